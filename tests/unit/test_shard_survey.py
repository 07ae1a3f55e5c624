"""A file surveyed and read shard by shard gives the facts one pass over the whole file gives.

The same facts in the same order, with the same names (a name may be given in another
shard), gold labels and predicate filter, repeats left out wherever the first one is, and
one fingerprint wherever the file is cut; JSON Lines ids repeated across shards are the
error one pass raises.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kgcheck.data import shard_survey
from kgcheck.data.fact_stream import FactStream
from kgcheck.data.facts import Fact
from kgcheck.data.gold import read_gold
from kgcheck.data.predicates import PredicateFilter
from kgcheck.data.rdf import Names
from kgcheck.data.shard_survey import (
    ShardSource,
    combine_digests,
    find_repeats,
    merge_names,
    repeated_ids,
    shard_drops,
    shard_facts,
    survey_shard,
)
from kgcheck.data.shards import plan_shards
from kgcheck.data.sources import TriplesError
from kgcheck.runs.plan import _batch_preparer, fact_source
from tests.integration.test_shards import LABEL, nt_file


def one_pass(path: Path, gold: Any = None, chooser: PredicateFilter | None = None
             ) -> list[Fact]:
    """The local engine's whole-file stream: what a sharded run must check."""
    origin = fact_source(None, path, None, None, None, None, None)
    opener = origin.open if chooser is None else (lambda: chooser.apply(origin.open()))
    stream = FactStream(opener, prepare=_batch_preparer(origin, gold))
    stream.scan()
    return list(stream)


def surveyed(path: Path, shard_bytes: int, partitions: int = 3, gold: Any = None,
             chooser: PredicateFilter | None = None) -> tuple[list[Fact], int, int]:
    """Survey every shard, settle names and repeats, read each shard: facts, count, digest."""
    source = ShardSource(str(path), path.stem, gold, chooser)
    shards = plan_shards(path, path.stem, shard_bytes)
    found = [survey_shard(source, shard, n, partitions) for n, shard in enumerate(shards)]
    names = merge_names(part for _, part, _ in found)
    settled = [find_repeats([ids[j] for _, _, ids in found]) for j in range(partitions)]
    repeats = sum(r.repeats for _, r in settled)
    facts: list[Fact] = []
    for n, shard in enumerate(shards):
        facts += shard_facts(source, shard, shard_drops([d for d, _ in settled], n), names)
    digest = combine_digests((s.digest, s.kept) for s, _, _ in found)
    assert sum(s.kept for s, _, _ in found) - repeats == len(facts)
    return facts, len(shards), digest


def dumps(facts: list[Fact]) -> list[dict[str, Any]]:
    return [f.model_dump() for f in facts]


@pytest.mark.parametrize("shard_bytes", [1, 150, 900, 10**6])
def test_n_triples_shards_give_the_facts_of_one_pass(tmp_path: Path, shard_bytes: int) -> None:
    path = nt_file(tmp_path / "kg.nt")
    with path.open("a") as fh:  # a triple given twice, far apart: checked once
        fh.write('<http://e.org/s3> <http://e.org/p0> "o3" .\n')
    expected = one_pass(path)
    facts, shards, digest = surveyed(path, shard_bytes)
    assert dumps(facts) == dumps(expected)
    assert any(f.names for f in facts) and len(facts) == 138
    assert (shards > 1) == (shard_bytes < 10**6)
    # One fingerprint wherever the file is cut.
    assert digest == surveyed(path, 10**6)[2] == surveyed(path, 333, partitions=1)[2]


def test_a_triple_in_two_graphs_is_one_fact(tmp_path: Path) -> None:
    path = tmp_path / "kg.nq"
    lines = [f'<http://e.org/s{n}> <http://e.org/p> "o{n}" <http://e.org/g{n % 2}> .'
             for n in range(30)]
    lines += [f'<http://e.org/s{n}> <http://e.org/p> "o{n}" <http://e.org/g9> .'
              for n in range(0, 30, 4)]
    path.write_text("\n".join(lines) + "\n")
    facts, _, _ = surveyed(path, 200)
    assert dumps(facts) == dumps(one_pass(path)) and len(facts) == 30


def test_names_past_the_cap_are_those_one_pass_gives(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = nt_file(tmp_path / "kg.nt")
    expected = one_pass(path)

    class Small(Names):
        def __init__(self, cap: int = 4) -> None:
            super().__init__(cap)

    monkeypatch.setattr(shard_survey, "Names", Small)
    facts, _, _ = surveyed(path, 400)
    assert dumps(facts) == dumps(expected)
    assert sum(bool(f.names) for f in facts) > 4


def test_gold_labels_and_the_predicate_filter_apply(tmp_path: Path) -> None:
    path = nt_file(tmp_path / "kg.nt")
    gold_file = tmp_path / "gold.csv"
    gold_file.write_text("subject,predicate,object,label\n"
                         "http://e.org/s4,http://e.org/p1,o4,F\n"
                         "http://e.org/s5,http://e.org/p2,o5,T\n")
    gold = read_gold(gold_file)
    expected = one_pass(path, gold, PredicateFilter.of("http://e.org/p1,http://e.org/knows"))
    facts, _, with_gold = surveyed(path, 300, gold=gold,
                                   chooser=PredicateFilter.of("http://e.org/p1,"
                                                              "http://e.org/knows"))
    assert dumps(facts) == dumps(expected)
    assert [f.label for f in facts if f.label is not None] == [False]
    _, _, without = surveyed(path, 300, chooser=PredicateFilter.of("http://e.org/p1,"
                                                                   "http://e.org/knows"))
    assert with_gold != without, "a gold label is part of the input's identity"


def test_json_lines_ids_repeated_across_shards_are_the_error_of_one_pass(
        tmp_path: Path) -> None:
    path = tmp_path / "kg.jsonl"
    rows = [{"id": f"f{n}", "subject": f"s{n}", "predicate": "p", "object": "o"}
            for n in range(40)]
    rows[33]["id"] = "f5"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(TriplesError) as local:
        one_pass(path)
    source = ShardSource(str(path), "kg")
    shards = plan_shards(path, "kg", 300)
    found = [survey_shard(source, shard, n, 2) for n, shard in enumerate(shards)]
    firsts = [r.first for _, r in (find_repeats([ids[j] for _, _, ids in found])
                                   for j in range(2)) if r.first]
    assert len(shards) > 3 and len(firsts) == 1
    error = repeated_ids(source, shards, [s.parsed for s, _, _ in found], firsts[0])
    assert str(error) == str(local.value) == (
        f"{path}: fact id 'f5' appears more than once (facts 6 and 34); ids must be unique")


def test_a_malformed_line_is_named_in_its_shard(tmp_path: Path) -> None:
    path = nt_file(tmp_path / "kg.nt")
    lines = path.read_text().splitlines()
    lines[100] = f'<http://e.org/x> {LABEL} "broken'
    path.write_text("\n".join(lines) + "\n")
    source = ShardSource(str(path), "kg")
    errors = []
    for n, shard in enumerate(plan_shards(path, "kg", 500)):
        try:
            survey_shard(source, shard, n, 2)
        except TriplesError as exc:
            errors.append(str(exc))
    assert len(errors) == 1 and errors[0].startswith(f"{path}, line 101: malformed N-Triples")
