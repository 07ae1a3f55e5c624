"""One shard of a sharded run checked where it runs, and the driver's view of the folder.

No Ray here: a shard is checked in this process (as a worker checks it) with a scripted
model. A shard ends with one verdict per fact and a marker with its tally; a partial shard
is resumed fact by fact (a torn line and a failed check dropped, the good verdicts kept as
they were); a stop file stops it without a marker. The folder refuses another run's
verdicts, a changed input, and a local run's folder, and a resume re-runs the shards whose
marker counts failed checks. Each holds for the run folder's own shards and for shards at
an S3 URI (moto's server on loopback).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from kgcheck.data.runfolder import VERDICTS, RunError, shard_name
from kgcheck.data.shard_store import ShardStore
from kgcheck.data.shard_survey import (
    ShardSource,
    find_repeats,
    merge_names,
    survey_shard,
)
from kgcheck.data.shards import Shard, plan_shards
from kgcheck.graphs.registry import get_strategy
from kgcheck.runs.runner import RunInfo
from kgcheck.runs.shard_check import STOP, ShardJob, check_shard, merged
from kgcheck.runs.sharded_folder import local_store, plan_of, prepare_sharded
from tests.support.scripted import SCRIPTED, register_scripted


def _line(n: int) -> str:
    return f"<http://e.org/s{n:02d}> <http://e.org/p> <http://e.org/o{n:02d}> .\n"


# Lines of one length: shards of exactly six facts.
SHARD_BYTES = 6 * len(_line(0))


def _kg(path: Path, facts: int = 30) -> Path:
    path.write_text("".join(_line(n) for n in range(facts)))
    return path


@pytest.fixture
def model() -> Any:
    """``scripted:cycle``, answering T, F, T, ... for ever."""
    register_scripted("cycle", lambda: GenericFakeChatModel(messages=itertools.cycle(
        [AIMessage(content="T"), AIMessage(content="F")])))
    yield "scripted:cycle"
    SCRIPTED.pop("cycle", None)


@pytest.fixture(params=["local", "s3"])
def store_of(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[Path], ShardStore]:
    """Where a run folder's shards go: its own ``shards/``, or a fresh S3 prefix."""
    if request.param == "local":
        return local_store
    s3 = request.getfixturevalue("s3")
    return lambda out: ShardStore(s3.uri(f"{tmp_path.name}/{out.name}/shards"))


class Shards:
    """A small file surveyed in this process: what the driver hands each shard's task."""

    def __init__(self, kg: Path, store: ShardStore, spec: str) -> None:
        self.store = store
        self.source = ShardSource(str(kg), "kg")
        self.shards = plan_shards(kg, "kg", SHARD_BYTES)
        found = [survey_shard(self.source, s, n, 1) for n, s in enumerate(self.shards)]
        self.names = merge_names(part for _, part, _ in found)
        self.drops = [find_repeats([ids[0] for _, _, ids in found])[0]]
        self.job = ShardJob(shards=store.where, run_id="run1", method="DKA", models=[spec],
                            key=("strategy", "dka"),
                            context=get_strategy("dka").make_context(model=spec),
                            config={"recursion_limit": 50}, concurrency=2)

    def check(self, index: int, progress: Callable[[int], None] | None = None
              ) -> dict[str, Any]:
        return check_shard(self.job, self.source, self.shards[index], index, self.drops,
                           self.names, progress)


def _text(store: ShardStore, index: int, suffix: str = ".jsonl") -> str:
    return store.read_text(shard_name(index, suffix)) or ""


def _lines(store: ShardStore, index: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _text(store, index).splitlines() if line.strip()]


def test_a_shard_is_checked_into_its_file_and_marker(tmp_path: Path, model: str,
                                                     store_of: Any) -> None:
    store = store_of(tmp_path / "run")
    work = Shards(_kg(tmp_path / "kg.nt"), store, model)
    assert len(work.shards) == 5
    heard: list[int] = []
    result = work.check(1, heard.append)
    lines = _lines(store, 1)
    assert len(lines) == result["facts"] == result["ran"] == sum(heard) == 6
    # Two facts at once: the order within the shard is the order they finished in.
    assert sorted(r["subject"] for r in lines) == [f"http://e.org/s{n:02d}"
                                                   for n in range(6, 12)]
    marker = json.loads(_text(store, 1, ".done"))
    assert marker == result and marker["tally"]["n"] == 6
    # A retried task of a finished shard finds its marker and checks nothing.
    assert work.check(1) == result
    assert len(_lines(store, 1)) == 6


def test_a_partial_shard_is_resumed_fact_by_fact(tmp_path: Path, model: str,
                                                 store_of: Any) -> None:
    store = store_of(tmp_path / "run")
    work = Shards(_kg(tmp_path / "kg.nt"), store, model)
    work.check(2)
    lines = _text(store, 2).splitlines()
    failed = json.loads(lines[1])
    failed.update(error="ConnectError: refused", label="NA")
    # Two verdicts kept, one failed, then a line torn by a kill: the rest never written.
    store.write_text(shard_name(2, ".jsonl"), f"{lines[0]}\n{json.dumps(failed)}\n{lines[2]}\n"
                     + '{"fact_id": "x", "la')
    store.remove(shard_name(2, ".done"))
    result = work.check(2)
    after = _text(store, 2).splitlines()
    records = [json.loads(line) for line in after]
    assert len(records) == len({r["fact_id"] for r in records}) == 6 == result["facts"]
    assert after[:2] == [lines[0], lines[2]], "the kept verdicts stay as they were"
    assert not [r for r in records if r.get("error")]
    assert result["ran"] == 4


def test_a_stop_file_stops_a_shard_without_a_marker(tmp_path: Path, model: str,
                                                    store_of: Any) -> None:
    store = store_of(tmp_path / "run")
    work = Shards(_kg(tmp_path / "kg.nt"), store, model)
    store.write_text(STOP, "stop\n")
    result = work.check(0)
    assert result["stopped"]["reason"] == "stopped" and result["facts"] == 0
    assert not store.exists(shard_name(0, ".done"))


def _info(digest: str = "ab") -> RunInfo:
    return RunInfo(dataset="kg", strategy="dka", method="DKA", models=["scripted:cycle"],
                   input={"facts": 30, "digest": digest, "drawn": {"how": "all"}})


def _plan(tmp_path: Path, store: ShardStore) -> tuple[dict[str, Any], list[Shard]]:
    shards = plan_shards(_kg(tmp_path / "kg.nt"), "kg", SHARD_BYTES)
    return plan_of(shards, SHARD_BYTES, store), shards


def test_a_folder_with_another_runs_verdicts_is_refused(tmp_path: Path, store_of: Any) -> None:
    out = tmp_path / "run"
    store = store_of(out)
    plan, _ = _plan(tmp_path, store)
    pending, done = prepare_sharded(out, _info(), plan, store, resume=False, fresh=False)
    assert pending == [0, 1, 2, 3, 4] and done == []
    store.write_text(shard_name(0, ".jsonl"), '{"fact_id": "a", "label": "T"}\n')
    with pytest.raises(RunError, match="already holds the verdicts of a sharded run"):
        prepare_sharded(out, _info(), plan, store, resume=False, fresh=False)
    with pytest.raises(RunError, match="changed: the input facts"):
        prepare_sharded(out, _info("cd"), plan, store, resume=True, fresh=False)
    other = {**plan, "shards": plan["shards"][:2]}
    with pytest.raises(RunError, match="the shards the input is cut in"):
        prepare_sharded(out, _info(), other, store, resume=True, fresh=False)
    # The same run, resumed into another store: refused (its verdicts are in the first).
    other_store = local_store(out) if store.remote else ShardStore("s3://other-bucket/run")
    moved = plan_of(plan_shards(tmp_path / "kg.nt", "kg", SHARD_BYTES), SHARD_BYTES,
                    other_store)
    with pytest.raises(RunError, match="where the shards are written"):
        prepare_sharded(out, _info(), moved, store, resume=True, fresh=False)
    pending, _ = prepare_sharded(out, _info("cd"), plan, store, resume=False, fresh=True)
    assert pending == [0, 1, 2, 3, 4] and not store.exists(shard_name(0, ".jsonl"))


def test_a_resume_reruns_the_shards_with_failed_checks(tmp_path: Path, model: str,
                                                       store_of: Any) -> None:
    out = tmp_path / "run"
    store = store_of(out)
    work = Shards(_kg(tmp_path / "kg.nt"), store, model)
    plan = plan_of(work.shards, SHARD_BYTES, store)
    info = _info()
    prepare_sharded(out, info, plan, store, resume=False, fresh=False)
    for index in range(len(work.shards)):
        work.check(index)
    marker = json.loads(_text(store, 3, ".done"))
    marker["tally"]["counts"]["errors"] = 1
    store.write_text(shard_name(3, ".done"), json.dumps(marker))
    pending, done = prepare_sharded(out, info, plan, store, resume=True, fresh=False)
    assert pending == [3] and sorted(r["shard"] for r in done) == [0, 1, 2, 4]
    assert not store.exists(shard_name(3, ".done"))
    tally, outcomes = merged(done, info.models)
    assert tally.n == outcomes.facts == 24


def test_a_local_runs_folder_is_not_resumed_in_shards(tmp_path: Path, store_of: Any) -> None:
    out = tmp_path / "run"
    store = store_of(out)
    plan, _ = _plan(tmp_path, store)
    out.mkdir()
    (out / VERDICTS).write_text('{"fact_id": "a", "label": "T"}\n')
    with pytest.raises(RunError, match="holds a run of the local engine"):
        prepare_sharded(out, _info(), plan, store, resume=True, fresh=False)
    with pytest.raises(RunError, match="already holds 1 verdicts"):
        prepare_sharded(out, _info(), plan, store, resume=False, fresh=False)


@pytest.fixture
def panel() -> Any:
    """Members ``scripted:m0``..``m3`` answering in cycles of their own, and a judge."""
    cycles = ["TF", "FT", "TTF", "F", "T"]
    names = [f"m{n}" for n in range(4)] + ["judge"]
    for name, cycle in zip(names, cycles, strict=True):
        # One cycle per member, shared by the models built for each fact: answers differ.
        answers = itertools.cycle([AIMessage(content=x) for x in cycle])
        register_scripted(name, lambda a=answers: GenericFakeChatModel(messages=a))
    yield [f"scripted:{n}" for n in names[:4]]
    for name in names:
        SCRIPTED.pop(name, None)


def test_a_consensus_shard_leaves_its_tally_and_a_second_pass_reuses_its_votes(
        tmp_path: Path, panel: list[str], store_of: Any) -> None:
    from dataclasses import replace

    from kgcheck.runs.consensus import consensus_context
    from kgcheck.runs.consensus_tally import ConsensusTally

    dka = get_strategy("dka")
    votes_store, final_store = store_of(tmp_path / "votes"), store_of(tmp_path / "run")
    work = Shards(_kg(tmp_path / "kg.nt"), votes_store, panel[0])
    work.job = replace(work.job, models=panel, key=("consensus", "dka"),
                       context=consensus_context(dka, panel, "none", {}),
                       consensus=tuple(panel))
    result = work.check(3)
    votes = {r["fact_id"]: r for r in _lines(votes_store, 3)}
    assert ConsensusTally.from_state(result["consensus"]).summary(panel) == \
        ConsensusTally.of(votes.values()).summary(panel)
    ties = sum(1 for r in votes.values() if r["details"]["decision"] == "tie")
    assert 0 < ties < len(votes)
    # The second pass starts each fact from the votes shard 3 recorded: only ties are judged.
    work.store = final_store
    work.job = replace(work.job, shards=final_store.where, votes_from=votes_store.where,
                       context=consensus_context(dka, panel, "scripted:judge", {}))
    judged = work.check(3)
    final = _lines(final_store, 3)
    assert {r["fact_id"] for r in final} == set(votes)
    for record in final:
        # The very votes of the first pass (their timings too): no member was asked again.
        assert record["details"]["votes"] == votes[record["fact_id"]]["details"]["votes"]
        assert bool(record["details"].get("judge_called")) == (
            record["details"]["decision"] == "tie")
    assert ConsensusTally.from_state(judged["consensus"]).counts["judge_calls"] == ties
