"""Reading a file in parallel shards gives what one pass gives: facts, order, ids, names,
and the same errors, naming the same lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kgcheck import api
from kgcheck.data.facts import Fact
from kgcheck.data.rdf import RdfReader
from kgcheck.data.shards import (
    ParallelRead,
    ShardedReader,
    can_shard,
    cut_shards,
    map_in_process,
)
from kgcheck.data.sources import TriplesError
from kgcheck.data.triples import iter_triples
from tests.support.stubs.openai import OpenAIStub

LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"


def nt_file(path: Path, count: int = 120) -> Path:
    lines = []
    for n in range(count):
        lines.append(f'<http://e.org/s{n}> <http://e.org/p{n % 3}> "o{n}" .')
        if n % 5 == 0:
            lines.append(f'<http://e.org/s{n}> {LABEL} "Name {n}"@de .')
            lines.append(f'<http://e.org/s{n}> {LABEL} "Name {n}"@en .')
        if n % 7 == 0:
            lines.append(f"<http://e.org/s{n}> <http://e.org/knows> _:b{n} .")
    # A name given far from its term: it must still reach the term's facts.
    lines.append(f'<http://e.org/s1> {LABEL} "First" .')
    path.write_text("\n".join(lines) + "\n")
    return path


def serial(path: Path, cap: int | None = None) -> list[Fact]:
    reader = RdfReader(path, "kg")
    if cap is not None:
        reader.names.cap = cap
    return reader.named(list(reader))


def sharded(path: Path, shard_bytes: int, cap: int | None = None) -> tuple[list[Fact], int]:
    reader = RdfReader(path, "kg")
    if cap is not None:
        reader.names.cap = cap
    shards = ShardedReader(path, "kg", map_in_process, shard_bytes=shard_bytes, reader=reader)
    return reader.named(list(shards)), shards.shards


def test_shards_end_at_line_ends_and_cover_the_file(tmp_path: Path) -> None:
    path = nt_file(tmp_path / "kg.nt")
    data = path.read_bytes()
    cut = list(cut_shards(path, "kg", 300))
    shards = [shard for shard, _ in cut]
    assert len(shards) > 10
    assert all(chunk == data[shard.start:shard.end] for shard, chunk in cut)
    assert shards[0].start == 0 and shards[-1].end == len(data)
    for before, after in zip(shards, shards[1:], strict=False):
        assert before.end == after.start and data[after.start - 1:after.start] == b"\n"
        assert after.first_line == data[:after.start].count(b"\n") + 1


@pytest.mark.parametrize("shard_bytes", [1, 97, 300, 10_000_000])
def test_n_triples_in_shards_are_the_facts_and_names_of_one_pass(tmp_path: Path,
                                                                 shard_bytes: int) -> None:
    path = nt_file(tmp_path / "kg.nt")
    facts, count = sharded(path, shard_bytes)
    assert facts == serial(path)
    assert count > 1 or shard_bytes > path.stat().st_size
    named = {f.subject: f.names for f in facts}
    assert named["http://e.org/s5"]["subject"] == "Name 5", "English beats German"
    assert named["http://e.org/s1"]["subject"] == "First", "a name in the last shard"


def test_past_the_names_cap_the_chosen_facts_are_named_as_after_one_pass(
        tmp_path: Path) -> None:
    path = nt_file(tmp_path / "kg.nt")
    facts, _ = sharded(path, 200, cap=5)
    assert facts == serial(path, cap=5)
    assert {f.subject: f.names for f in facts}["http://e.org/s1"]["subject"] == "First"


def test_a_triple_in_two_named_graphs_is_one_fact_across_shards(tmp_path: Path) -> None:
    path = tmp_path / "kg.nq"
    quads = [f'<http://e.org/s{n}> <http://e.org/p> "o{n}" <http://e.org/g{g}> .'
             for g in range(2) for n in range(30)]
    path.write_text("\n".join(quads) + "\n")
    facts, count = sharded(path, 150)
    assert count > 4 and facts == serial(path) and len(facts) == 30


def test_a_syntax_error_names_the_line_of_the_file(tmp_path: Path) -> None:
    path = nt_file(tmp_path / "kg.nt")
    lines = path.read_text().splitlines()
    lines[150] = "<http://e.org/broken> <http://e.org/p> ."
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TriplesError) as one_pass:
        serial(path)
    with pytest.raises(TriplesError) as in_shards:
        sharded(path, 256)
    assert ", line 151:" in str(one_pass.value)
    assert str(in_shards.value) == str(one_pass.value)


def jsonl_file(path: Path, rows: list[dict | str]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in rows))
    return path


def jsonl_sharded(path: Path, shard_bytes: int) -> list[Fact]:
    return list(ShardedReader(path, "kg", map_in_process, shard_bytes=shard_bytes))


def test_json_lines_rows_keep_their_line_numbers_as_ids(tmp_path: Path) -> None:
    rows: list[dict | str] = []
    for n in range(60):
        rows.append({"subject": f"S{n}", "predicate": "p", "object": f"O{n}",
                     "label": n % 2 == 0})
        if n % 9 == 0:
            rows.append("")  # a blank line still counts as a line
    path = jsonl_file(tmp_path / "kg.jsonl", rows)
    facts = jsonl_sharded(path, 120)
    assert facts == list(iter_triples(path, "kg"))
    assert facts[-1].id == str(len(rows))


@pytest.mark.parametrize("bad, message", [
    ({"id": "7", "subject": "A", "predicate": "p", "object": "B"}, "appears more than once"),
    ("{not json", "malformed JSON"),
    ({"subject": "A", "predicate": "p"}, "missing object"),
])
def test_json_lines_errors_are_those_of_one_pass(tmp_path: Path, bad: dict | str,
                                                 message: str) -> None:
    rows: list[dict | str] = [{"id": str(n), "subject": f"S{n}", "predicate": "p",
                               "object": "o"} for n in range(40)]
    rows.append(bad)
    path = jsonl_file(tmp_path / "kg.jsonl", rows)
    with pytest.raises(TriplesError) as one_pass:
        list(iter_triples(path, "kg"))
    with pytest.raises(TriplesError) as in_shards:
        jsonl_sharded(path, 100)
    assert message in str(one_pass.value) and str(in_shards.value) == str(one_pass.value)


def test_only_uncompressed_line_formats_are_cut() -> None:
    assert can_shard("kg.nt") and can_shard("kg.NQ") and can_shard("kg.jsonl")
    assert not can_shard("kg.nt.gz") and not can_shard("kg.ttl") and not can_shard("kg.csv")


@pytest.mark.usefixtures("no_openai_env")
def test_a_plan_reads_in_shards_only_what_it_reads_whole(tmp_path: Path) -> None:
    path = nt_file(tmp_path / "kg.nt")
    asked: list[int] = []

    def parallel() -> ParallelRead:
        asked.append(1)
        return ParallelRead(map_in_process, 256)

    with OpenAIStub() as stub:
        def plan(source: Path, **extra: Any) -> api.RunPlan:
            return api.plan_run(triples=source, model="openai-compatible:stub-model",
                                settings={"base_url": stub.url}, **extra)

        whole = plan(path, parallel_read=parallel)
        assert whole.input_shards > 1 and asked
        assert whole.facts == list(plan(path).facts)
        asked.clear()
        first = plan(path, limit=5, parallel_read=parallel)
        assert first.input_shards == 0 and not asked, "a limit stops early: one pass"
        ttl = tmp_path / "kg.ttl"
        ttl.write_text(path.read_text())
        assert plan(ttl, parallel_read=parallel).input_shards == 0
        assert not asked, "Turtle cannot be cut at line ends; the engine need not start"
