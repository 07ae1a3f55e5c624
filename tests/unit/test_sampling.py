"""Choosing facts over a stream: first N, seeded reservoir samples, strata, ids."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.data.facts import Fact
from kgcheck.data.sampling import (
    Reservoir,
    SelectionError,
    parse_ids,
    reservoir_indices,
    select_facts,
)

runner = CliRunner()


def _facts(n: int, predicates: int = 4) -> list[Fact]:
    return [Fact(id=str(i), subject=f"s{i}", predicate=f"p{i % predicates}", object=f"o{i}")
            for i in range(n)]


def _once(n: int, predicates: int = 4) -> Iterator[Fact]:
    """A one-shot stream (a generator), like a file that is read once."""
    yield from _facts(n, predicates)


def test_the_same_seed_gives_the_same_uniform_sample() -> None:
    first = select_facts(_once(1000), sample=50, seed=7).facts
    assert [f.id for f in first] == [f.id for f in select_facts(_once(1000), sample=50, seed=7).facts]
    assert [f.id for f in first] != [f.id for f in select_facts(_once(1000), sample=50, seed=8).facts]
    assert len({f.id for f in first}) == 50
    # Kept in input order.
    assert [int(f.id) for f in first] == sorted(int(f.id) for f in first)


def test_the_reservoir_is_uniform() -> None:
    # Every position equally likely: over 400 seeds each of 20 items is drawn ~100 times (5 of 20).
    hits = Counter(f.id for seed in range(400) for f in select_facts(_facts(20), sample=5, seed=seed).facts)
    assert len(hits) == 20 and min(hits.values()) > 60 and max(hits.values()) < 140


def test_a_sample_larger_than_the_kg_is_all_of_it_with_a_note() -> None:
    chosen = select_facts(_once(30), sample=100, seed=1)
    assert len(chosen.facts) == 30 and chosen.seen == 30
    assert chosen.notes and "more facts than there are (30)" in chosen.notes[0]


def test_limit_reads_no_further_than_needed() -> None:
    read = []

    def stream() -> Iterator[Fact]:
        for fact in _facts(1000):
            read.append(fact.id)
            yield fact

    assert [f.id for f in select_facts(stream(), limit=3).facts] == ["0", "1", "2"]
    assert len(read) == 3


def test_proportional_strata_and_per_stratum() -> None:
    facts = [Fact(id=str(i), subject="s", predicate="big" if i < 80 else "small", object=str(i))
             for i in range(100)]
    chosen = select_facts(facts, sample=10, stratify="predicate", seed=3).facts
    assert Counter(f.predicate for f in chosen) == {"big": 8, "small": 2}
    assert [f.id for f in chosen] == [f.id for f in select_facts(facts, sample=10, stratify="predicate", seed=3).facts]
    each = select_facts(iter(facts), per_stratum=5, stratify="predicate", seed=3).facts
    assert Counter(f.predicate for f in each) == {"big": 5, "small": 5}
    few = select_facts(facts, per_stratum=30, stratify="predicate")
    assert Counter(f.predicate for f in few.facts) == {"big": 30, "small": 20}
    assert "fewer than 30 facts" in few.notes[0]


def test_ids_pick_facts_and_missing_ids_are_named(tmp_path) -> None:
    assert [f.id for f in select_facts(_once(100), ids=["42", "7"]).facts] == ["7", "42"]
    with pytest.raises(SelectionError, match=r"^ids: 1 id\(s\) not in the input, e.g. nope"):
        select_facts(_once(100), ids=["7", "nope"])
    (tmp_path / "ids.txt").write_text("3\n5,8\n\n")
    assert parse_ids(f"@{tmp_path / 'ids.txt'}") == ["3", "5", "8"]
    assert parse_ids("1, 2") == ["1", "2"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"sample": 10, "stratify": "colour"}, "stratify='colour': unknown key; known: dataset, label, predicate, subject"),
    ({"sample": 0}, "sample=0 must be at least 1"),
    ({"per_stratum": 3}, "per_stratum=3 needs stratify=KEY"),
    ({"stratify": "predicate"}, "needs sample=N \\(proportional\\) or per_stratum=K"),
])
def test_bad_selections_say_what_is_wrong(kwargs, message: str) -> None:
    with pytest.raises(SelectionError, match=message):
        select_facts(_facts(10), **kwargs)


def test_api_and_cli_sample_a_file(tmp_path, scripted) -> None:
    kg = tmp_path / "kg.nt"
    kg.write_text("".join(f"<http://e.org/s{i}> <http://e.org/p{i % 3}> \"{i}\" .\n" for i in range(200)))
    api = kgcheck.select_facts(lambda: kgcheck.iter_triples(kg), sample=12, seed=5)
    spec = scripted("sample", ["T"] * 12)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--triples", str(kg), "--sample", "12", "--seed", "5",
                                 "--model", spec, "--concurrency", "1", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(r["fact_id"] for r in records) == sorted(f.id for f in api)
    result = runner.invoke(app, ["run", "--triples", str(kg), "--sample", "5", "--stratify", "object",
                                 "--model", spec, "--out", str(tmp_path / "r2"), "--no-progress"])
    assert result.exit_code == 2 and "--stratify object: unknown key; known:" in " ".join(result.output.split())


def test_cli_sample_larger_than_the_file_notes_it(tmp_path, scripted) -> None:
    kg = tmp_path / "kg.csv"
    kg.write_text("subject,predicate,object\nA,p,B\nC,p,D\n")
    spec = scripted("sample-all", ["T", "T"])
    result = runner.invoke(app, ["run", "--triples", str(kg), "--sample", "10", "--model", spec,
                                 "--concurrency", "1", "--out", str(tmp_path / "r"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "--sample 10 asks for more facts than there are (2)" in " ".join(result.output.split())
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["n"] == 2


def test_one_largest_remainder_allocator_for_samples_and_designs() -> None:
    from kgcheck.data.sampling import largest_remainder
    from kgcheck.evals.accuracy.designs import MIN_PER_STRATUM, Unit, draw_stratified

    # Hamilton's method: whole parts first, then the largest remainders (Wikipedia's example).
    assert largest_remainder({"Yellow": 47_000, "White": 16_000, "Red": 15_800, "Green": 12_000,
                              "Blue": 6_100, "Pink": 3_100}, 10) == {
        "Yellow": 5, "White": 2, "Red": 1, "Green": 1, "Blue": 1, "Pink": 0}
    # Equal remainders go by stratum name, whatever order the strata came in.
    assert largest_remainder({"b": 10, "a": 10}, 5, minimum=2) == {"a": 3, "b": 2}
    assert largest_remainder({"a": 10, "b": 10}, 5, minimum=2) == {"a": 3, "b": 2}
    # Minimums are paid back by the strata furthest over their share; no stratum gets more
    # than its size, and every unit is given while some stratum has room.
    assert largest_remainder({"big": 90, "small": 10}, 10, minimum=2) == {"big": 8, "small": 2}
    assert largest_remainder({"x": 3, "y": 1}, 4) == {"x": 3, "y": 1}
    assert largest_remainder({}, 3) == {}
    units = [Unit(str(i), "b" if i < 10 else "a", str(i)) for i in range(20)]
    drawn = Counter(d.stratum for d in draw_stratified(units, 5, np.random.default_rng(0)))
    assert drawn == {"a": 3, "b": 2} and min(drawn.values()) >= MIN_PER_STRATUM


@pytest.mark.parametrize("total, size", [(4095, 1000), (4097, 3000), (70_000, 1), (70_000, 4096),
                                         ((1 << 17) + 5, 1000), (300_000, 1000), (9_000, 9_000)])
def test_the_kept_indices_drawn_in_bulk_are_those_drawn_one_by_one(total: int, size: int) -> None:
    class OneByOne(random.Random):
        """A subclass: its draws are randrange's, one per item."""

    for seed in range(3):
        bulk, single = random.Random(seed), OneByOne(seed)
        assert reservoir_indices(total, size, bulk) == reservoir_indices(total, size, single)
        # And the generator goes on where the draws one by one leave it.
        assert bulk.getrandbits(64) == single.getrandbits(64)


def test_a_reservoir_advanced_in_pieces_keeps_what_one_advance_keeps() -> None:
    for seed, total, size in [(0, 50_000, 1000), (1, 9_000, 5), (2, 3, 10)]:
        pieces, left = Reservoir(size, random.Random(seed)), total
        cut = random.Random(seed + 100)
        while left:
            step = min(left, cut.choice([0, 1, 7, 999, 4096, 20_000]))
            pieces.advance(step)
            left -= step
        assert pieces.seen == total
        assert pieces.kept == reservoir_indices(total, size, random.Random(seed))
