"""Every way of reading an RDF file gives the facts of pyoxigraph's parse, with the same ids.

The modes: ``read_triples``, ``select_facts`` (all facts), ``select_facts(sample=N)`` with N
above the file's size (every fact drawn), the same stratified by predicate, and a seeded
sample below the size compared with the same draw over the full parse's facts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyoxigraph as ox
import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.data.facts import Fact
from kgcheck.data.rdf import RdfReader
from kgcheck.data.sampling import select_facts as select_stream
from kgcheck.data.triples import TriplesError, read_triples

runner = CliRunner()
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
ALL = 10_000  # a sample above every test file's size: every fact is drawn


def modes(path: Path) -> dict[str, list[Fact]]:
    """Read a file in every mode."""
    return {
        "read_triples": read_triples(path),
        "read_again": read_triples(path),
        "select_facts": kgcheck.select_facts(path),
        "sample": kgcheck.select_facts(path, sample=ALL, seed=3),
        "stratified": kgcheck.select_facts(path, sample=ALL, seed=3, stratify="predicate"),
    }


def as_rows(facts: list[Fact]) -> set[tuple]:
    return {(f.id, f.rdf["subject"], f.rdf["predicate"], f.rdf["object"],
             json.dumps(f.names, sort_keys=True)) for f in facts}


def same_in_every_mode(path: Path) -> set[tuple]:
    """Assert every mode gives the same facts (ids, terms, names); return them."""
    read = modes(path)
    rows = as_rows(read["read_triples"])
    for mode, facts in read.items():
        assert as_rows(facts) == rows, mode
        assert len(facts) == len(rows), mode
    return rows


def test_blank_nodes_of_turtle_are_never_merged_with_labels_the_file_uses(tmp_path) -> None:
    path = tmp_path / "kg.ttl"
    path.write_text("@prefix ex: <http://e.org/> .\n[] ex:p _:anon0 .\n_:b0 ex:p _:b1 .\n")
    rows = same_in_every_mode(path)
    pairs = {(s, o) for _id, s, _p, o, _n in rows}
    assert len(pairs) == 2 and all(s != o for s, o in pairs)
    assert len({term for pair in pairs for term in pair}) == 4  # four distinct blank nodes


def test_n_triples_blank_node_labels_are_kept_as_written(tmp_path) -> None:
    path = tmp_path / "kg.nt"
    path.write_text("_:anon0 <http://e.org/p> _:0123456789abcdef0123 .\n")
    rows = same_in_every_mode(path)
    assert {(s, o) for _id, s, _p, o, _n in rows} == {("_:anon0", "_:0123456789abcdef0123")}


def test_n_quads_sample_keeps_triples_differing_inside_a_triple_term(tmp_path) -> None:
    path = tmp_path / "kg.nq"
    path.write_text("<http://e.org/s> <http://e.org/p> <<( <http://e.org/a> <http://e.org/b> <http://e.org/c> )>> .\n"
                    "<http://e.org/s> <http://e.org/p> <<( <http://e.org/a> <http://e.org/b> <http://e.org/d> )>> .\n")
    rows = same_in_every_mode(path)
    assert len(rows) == 2


def test_n_quads_duplicates_written_differently_are_one_fact_and_the_seeded_sample_is_the_full_parses(
        tmp_path) -> None:
    path = tmp_path / "kg.nq"
    lines = []
    for i in range(40):
        lines += [f'<http://e.org/s{i}> <http://e.org/p{i % 3}> "A{i}" .',
                  f'<http://e.org/s{i}><http://e.org/p{i % 3}>"\\u0041{i}"<http://e.org/g>.#again',
                  f'<http://e.org/\\u0073{i}> <http://e.org/p{i % 3}> "A{i}" <http://e.org/h> .']
    path.write_text("\n".join(lines) + "\n")
    rows = same_in_every_mode(path)
    assert len(rows) == 40
    full = list(RdfReader(path))
    for seed in range(5):
        drawn = kgcheck.select_facts(path, sample=7, seed=seed)
        assert [f.id for f in drawn] == [f.id for f in select_stream(full, sample=7, seed=seed).facts]


def test_triple_terms_are_written_as_n_triples_with_stable_ids(tmp_path) -> None:
    nt = tmp_path / "kg.nt"
    nt.write_text("<http://e.org/s> <http://e.org/p> <<( _:x <http://e.org/q> <<( <http://e.org/a> <http://e.org/b> _:y )>> )>> .\n")
    rows = same_in_every_mode(nt)
    (obj,) = {o for _id, _s, _p, o, _n in rows}
    assert obj == "<<( _:x <http://e.org/q> <<( <http://e.org/a> <http://e.org/b> _:y )>> )>>"
    assert [t.object for t in ox.parse(f"<http://e.org/s> <http://e.org/p> {obj} .",
                                       ox.RdfFormat.N_TRIPLES)]  # N-Triples indeed
    ttl = tmp_path / "kg.ttl"
    ttl.write_text("@prefix ex: <http://e.org/> .\nex:s ex:p <<( [] ex:q _:y )>> .\n"
                   "ex:s ex:r << ex:a ex:b [] >> .\nex:a ex:b ex:c {| ex:src _:z |} .\n")
    rows = same_in_every_mode(ttl)  # read twice too: the same ids
    assert any(o.startswith("<<( _:b") for _id, _s, _p, o, _n in rows)


def test_relative_iris_of_turtle_resolve_against_the_file_or_the_given_base(tmp_path) -> None:
    path = tmp_path / "kg.ttl"
    path.write_text("<s> <p> <#o> .\n")
    rows = same_in_every_mode(path)
    base = path.resolve().as_uri()
    assert {(s, o) for _id, s, _p, o, _n in rows} == {
        (f"<{base.rsplit('/', 1)[0]}/s>", f"<{base}#o>")}
    given = RdfReader(path, base_iri="http://e.org/dir/kg")
    assert [f.rdf["object"] for f in given] == ["<http://e.org/dir/kg#o>"]
    assert [f.rdf["object"] for f in kgcheck.read_triples(path, base_iri="http://e.org/k")] == [
        "<http://e.org/k#o>"]


@pytest.mark.parametrize(("name", "text"), [
    ("empty.nt", ""), ("comments.nt", "# nothing\n\n   \n# here\n"), ("empty.ttl", ""),
    ("names.nq", f'<http://e.org/a> <{LABEL}> "A" .\n'), ("prefixes.ttl", "@prefix ex: <http://e.org/> .\n")])
def test_a_file_without_facts_is_refused_in_every_mode(tmp_path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    for read in (read_triples, kgcheck.select_facts,
                 lambda p: kgcheck.select_facts(p, sample=ALL),
                 lambda p: kgcheck.select_facts(p, sample=ALL, stratify="predicate")):
        with pytest.raises(TriplesError, match=f"{name}: no facts found"):
            read(path)


def test_cr_line_ends_and_naming_lines_without_whitespace_or_with_escapes(tmp_path) -> None:
    path = tmp_path / "kg.nt"
    path.write_bytes(b"<http://e.org/a> <http://e.org/p> <http://e.org/b> .\r"
                     b'<http://e.org/a><http://www.w3.org/2000/01/rdf-schema#label>"A".\r'
                     b'<http://e.org/b> <http://www.w3.org/2000/01/rdf-schema\\u0023label> "B" .\r'
                     b"<http://e.org/b><http://e.org/q><http://e.org/a>.#no space\r")
    rows = same_in_every_mode(path)
    assert {(p, n) for _id, _s, p, _o, n in rows} == {
        ("<http://e.org/p>", json.dumps({"object": "B", "subject": "A"}, sort_keys=True)),
        ("<http://e.org/q>", json.dumps({"object": "A", "subject": "B"}, sort_keys=True))}


def test_strata_come_from_parsed_predicates(tmp_path) -> None:
    path = tmp_path / "kg.nt"
    lines = [f"<http://e.org/s{i}> <http://e.org/p{i % 2}> <http://e.org/o{i}> ." for i in range(20)]
    lines += [f"<http://e.org/t{i}><http://e.org/p{i % 2}><http://e.org/o{i}>." for i in range(20)]
    path.write_text("\n".join(lines) + "\n")
    full = list(RdfReader(path))
    for seed in range(4):
        drawn = kgcheck.select_facts(path, sample=10, seed=seed, stratify="predicate")
        expected = select_stream(full, sample=10, seed=seed, stratify="predicate").facts
        assert [f.id for f in drawn] == [f.id for f in expected]
        assert sorted(f.predicate for f in drawn) == ["http://e.org/p0"] * 5 + ["http://e.org/p1"] * 5


def test_a_malformed_line_is_refused_by_a_small_sample_as_by_a_full_read(tmp_path, scripted) -> None:
    path = tmp_path / "kg.nt"
    lines = [f"<http://e.org/s{i}> <http://e.org/p> <http://e.org/o{i}> ." for i in range(40)]
    lines[29] = "<http://e.org/s29> <http://e.org/p> oops ."
    path.write_text("\n".join(lines) + "\n")
    for read in (read_triples, lambda p: kgcheck.select_facts(p, sample=5),
                 lambda p: kgcheck.select_facts(p, sample=5, stratify="predicate")):
        with pytest.raises(TriplesError, match="kg.nt, line 30: malformed N-Triples"):
            read(path)
    result = runner.invoke(app, ["run", "--triples", str(path), "--sample", "5", "--model",
                                 scripted("rdf-sample", ["T"] * 5), "--out", str(tmp_path / "run"),
                                 "--no-progress"])
    assert result.exit_code == 2
    assert "line 30: malformed N-Triples" in " ".join(result.output.split())


def test_cli_run_takes_a_base_iri_for_relative_iris(tmp_path, scripted) -> None:
    path = tmp_path / "kg.ttl"
    path.write_text("<s> <p> <#o> .\n")
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--triples", str(path), "--base", "http://e.org/dir/kg",
                                 "--model", scripted("rdf-base", ["T"]), "--out", str(out),
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    (record,) = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert record["rdf"]["subject"] == "<http://e.org/dir/s>"
    assert record["rdf"]["object"] == "<http://e.org/dir/kg#o>"
    assert kgcheck.select_facts(path, base_iri="http://e.org/x")[0].rdf["subject"] == "<http://e.org/s>"
