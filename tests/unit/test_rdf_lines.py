"""Samples of N-Triples and N-Quads drawn over raw lines: the streaming parser's sample, cheaper."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from scipy.stats import chisquare
from typer.testing import CliRunner

import kgcheck
import kgcheck.data.rdf_lines as rdf_lines
from kgcheck.cli import app
from kgcheck.data import offset_spill
from kgcheck.data.rdf import RdfReader
from kgcheck.data.rdf_lines import LineSampler, TriplesLineSampler, line_source
from kgcheck.data.sampling import _reservoir, largest_remainder, reservoir_indices, select_facts
from kgcheck.data.sources import TriplesError

LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"
PREF = "<http://www.w3.org/2004/02/skos/core#prefLabel>"
runner = CliRunner()


def _kg(path: Path, n: int = 600, quads: bool = False) -> Path:
    """Write facts of mixed terms, names (some after their facts), comments and blank lines."""
    rng = random.Random(1)
    lines = []
    for i in range(n):
        subject = f"<http://e.org/s{i % 150}>"
        obj = rng.choice([f"<http://e.org/o{i}>", f'"says \\"{i}\\" ."@en', f"_:b{i % 40}",
                          f'"{i}"^^<http://www.w3.org/2001/XMLSchema#integer>'])
        lines.append(f"{subject} <http://e.org/p{rng.randrange(5)}> {obj} .")
        if i % 7 == 0:
            lines.append(f'{subject} {LABEL} "Name {i}"@de .')
            lines.append(f'{subject} {PREF} "Name {i}" .')
        if i % 61 == 0:
            lines += ["# a comment", "", f"<http://e.org/x{i}> <http://e.org/refers> {LABEL} ."]
    if quads:
        again = [line[:-1] + "<http://e.org/again> ." for line in lines[::5] if line.startswith("<")]
        lines = [line[:-1] + f"<http://e.org/g{i % 3}> ." if line.startswith("<") else line
                 for i, line in enumerate(lines)] + again
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _both(path: Path, seed: int, sampler: type[LineSampler] = LineSampler, **kwargs):
    streamed = RdfReader(path)
    by_facts = select_facts(lambda: iter(streamed), seed=seed, **kwargs)
    raw = RdfReader(path)
    by_lines = select_facts(sampler(raw, block_bytes=1000), seed=seed, **kwargs)
    return (streamed.named(by_facts.facts), by_facts), (raw.named(by_lines.facts), by_lines)


def test_the_kept_indices_follow_from_the_count_alone() -> None:
    class Drawn(random.Random):
        """A subclass, which takes the general path."""

    for total, size, seed in [(0, 5, 0), (3, 5, 1), (5, 5, 2), (1000, 7, 3), (5000, 100, 4), (70000, 1, 5)]:
        items, _ = _reservoir(enumerate(range(total)), size, random.Random(seed))
        kept = sorted(n for n, _ in items)
        assert sorted(reservoir_indices(total, size, random.Random(seed))) == kept
        assert sorted(reservoir_indices(total, size, Drawn(seed))) == kept


@pytest.mark.parametrize("memory_pairs", [None, 1, 3])
def test_n_triples_are_counted_and_picked_by_block(tmp_path, monkeypatch, memory_pairs) -> None:
    # (A cap of 1 or 3 naming lines: their offsets go to disk, and are read back to name.)
    monkeypatch.setattr(offset_spill, "MEMORY_PAIRS", memory_pairs or offset_spill.MEMORY_PAIRS)
    assert type(line_source(RdfReader(_kg(tmp_path / "kg.nt")))) is TriplesLineSampler
    assert type(line_source(RdfReader(_kg(tmp_path / "kg.nq", quads=True)))) is LineSampler
    path = tmp_path / "odd.nt"
    # Indented facts and comments, blank and whitespace lines, CRLF, no final line end.
    path.write_bytes(b"# head\r\n\r\n   <http://e.org/a> <http://e.org/p> \"1\" .\r\n  # note\r\n"
                     + b"".join(b"<http://e.org/s%d> <http://e.org/p> <http://e.org/o> .\r\n\t\r\n" % i
                                for i in range(300))
                     + b'<http://e.org/s1> <http://www.w3.org/2000/01/rdf-schema#label> "One" .\r\n'
                     + b"\n\n\n# two blank lines above\n\n# and one between comments\n"
                     + b"<http://e.org/z> <http://e.org/p> _:end .")
    for name in (path, _kg(tmp_path / "kg.nt")):
        for block in (64, 1000, 1 << 20):
            for sample in (1, 50, 10_000):
                for seed in range(2):
                    streamed = RdfReader(name)
                    by_facts = select_facts(lambda r=streamed: iter(r), sample=sample, seed=seed)
                    raw = RdfReader(name)
                    by_lines = select_facts(TriplesLineSampler(raw, block_bytes=block), sample=sample, seed=seed)
                    assert by_lines.seen == by_facts.seen
                    assert ([f.model_dump() for f in raw.named(by_lines.facts)]
                            == [f.model_dump() for f in streamed.named(by_facts.facts)])


@pytest.mark.parametrize("name", ["kg.nt", "kg.nq"])
@pytest.mark.parametrize("kwargs", [{"sample": 40}, {"sample": 5000}, {"sample": 30, "stratify": "predicate"},
                                    {"per_stratum": 2, "stratify": "subject"}, {"sample": 9, "limit": 4}])
def test_the_sample_over_lines_is_the_sample_over_facts(tmp_path, name: str, kwargs: dict) -> None:
    path = _kg(tmp_path / name, quads=name.endswith(".nq"))
    samplers = [LineSampler] + ([TriplesLineSampler] if name.endswith(".nt") else [])
    for seed in range(3):
        for sampler in samplers:
            (facts, chosen), (raw_facts, raw) = _both(path, seed, sampler, **kwargs)
            assert [f.model_dump() for f in raw_facts] == [f.model_dump() for f in facts]
            assert raw.seen == chosen.seen and raw.notes == chosen.notes
            assert any(f.names for f in raw_facts)


def test_reproducible_by_seed_and_only_the_chosen_lines_parsed(tmp_path, monkeypatch) -> None:
    path = _kg(tmp_path / "kg.nt")
    parsed: list[bytes] = []
    real = rdf_lines.parse_terms

    def counting(data, *args):
        parsed.append(data)
        return real(data, *args)

    monkeypatch.setattr(rdf_lines, "parse_terms", counting)
    first = kgcheck.select_facts(path, sample=25, seed=3)
    assert [f.id for f in first] == [f.id for f in kgcheck.select_facts(path, sample=25, seed=3)]
    assert [f.id for f in first] != [f.id for f in kgcheck.select_facts(path, sample=25, seed=4)]
    naming = [d for d in parsed if d.split()[1].decode() in (LABEL, PREF)]
    # Each call parsed its 25 chosen lines and the naming lines of their terms, nothing else.
    assert len(parsed) - len(naming) == 3 * 25
    assert all(line.count(b"\n") == 1 for line in parsed)


def test_the_line_sample_is_uniform(tmp_path) -> None:
    path = tmp_path / "kg.nt"
    lines = [f"<http://e.org/s{i}> <http://e.org/p> <http://e.org/o{i}> .\n" for i in range(20)]
    path.write_text("".join(line + f'<http://e.org/s{i}> {LABEL} "S{i}" .\n'
                            for i, line in enumerate(lines)))
    hits = Counter(f.subject for seed in range(600)
                   for f in select_facts(LineSampler(RdfReader(path)), sample=5, seed=seed).facts)
    assert len(hits) == 20 and sum(hits.values()) == 600 * 5
    # Each of 20 facts is in a sample of 5 with probability 1/4: expected 150 times each.
    assert chisquare(list(hits.values())).pvalue > 0.001
    # The test can fail: the first five lines every time are far from uniform.
    assert chisquare([600] * 5 + [1] * 15).pvalue < 1e-6


def test_stratified_shares_follow_the_predicates(tmp_path) -> None:
    path = tmp_path / "kg.nt"
    sizes = {"a": 300, "b": 120, "c": 60, "d": 20}
    path.write_text("".join(f"<http://e.org/s{i}> <http://e.org/{p}> \"{i}\" .\n"
                            for p, n in sizes.items() for i in range(n)))
    chosen = select_facts(LineSampler(RdfReader(path)), sample=50, seed=2, stratify="predicate").facts
    shares = Counter(f.predicate.rsplit("/", 1)[1] for f in chosen)
    assert shares == largest_remainder(sizes, 50) == {"a": 30, "b": 12, "c": 6, "d": 2}


def test_names_survive_and_quads_are_deduplicated(tmp_path) -> None:
    path = tmp_path / "kg.nq"
    fact = '<http://e.org/ada> <http://e.org/born> "1815"^^<http://www.w3.org/2001/XMLSchema#gYear>'
    path.write_text(f"{fact} <http://e.org/g1> .\n{fact} <http://e.org/g2> .\n{fact} .\n"
                    '<http://e.org/ada> <http://e.org/knows> _:b1 <http://e.org/g1> .\n'
                    f'<http://e.org/ada> {LABEL} "Ada Lovelace" <http://e.org/g1> .\n'
                    f'<http://e.org/born> {LABEL} "was born in" .\n')
    chosen = select_facts(LineSampler(reader := RdfReader(path)), sample=10, seed=0)
    facts = reader.named(chosen.facts)
    assert chosen.seen == 2 and len(facts) == 2
    assert facts[0].names == {"subject": "Ada Lovelace", "predicate": "was born in"}


def test_a_malformed_chosen_line_names_file_and_line(tmp_path, scripted) -> None:
    path = tmp_path / "kg.nt"
    path.write_text('<http://e.org/a> <http://e.org/p> "1" .\n\n<http://e.org/b> <http://e.org/p> "2 .\n')
    with pytest.raises(TriplesError, match=r"kg\.nt, line 3: malformed N-Triples"):
        kgcheck.select_facts(path, sample=5)
    result = runner.invoke(app, ["run", "--triples", str(path), "--sample", "5", "--model",
                                 scripted("bad-line", ["T"]), "--out", str(tmp_path / "r"), "--no-progress"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    message = " ".join(result.output.split())
    assert "kg.nt, line 3: malformed N-Triples" in message
