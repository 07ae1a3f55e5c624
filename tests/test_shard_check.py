"""One shard of a sharded run checked where it runs, and the driver's view of the folder.

No Ray here: a shard is checked in this process (as a worker checks it) with a scripted
model. A shard ends with one verdict per fact and a marker with its tally; a partial shard
is resumed fact by fact (a torn line and a failed check dropped, the good verdicts kept as
they were); a stop file stops it without a marker. The folder refuses another run's
verdicts, a changed input, and a local run's folder, and a resume re-runs the shards whose
marker counts failed checks.
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

from kgcheck.data.runfolder import (
    SHARDS,
    VERDICTS,
    RunError,
    shard_done_path,
    shard_verdicts_path,
)
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
from kgcheck.runs.sharded_folder import plan_of, prepare_sharded
from tests.scripted import SCRIPTED, register_scripted


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


class Shards:
    """A small file surveyed in this process: what the driver hands each shard's task."""

    def __init__(self, kg: Path, out: Path, spec: str) -> None:
        self.source = ShardSource(str(kg), "kg")
        self.shards = plan_shards(kg, "kg", SHARD_BYTES)
        found = [survey_shard(self.source, s, n, 1) for n, s in enumerate(self.shards)]
        self.names = merge_names(part for _, part, _ in found)
        self.drops = [find_repeats([ids[0] for _, _, ids in found])[0]]
        self.job = ShardJob(out_dir=str(out), run_id="run1", method="DKA", models=[spec],
                            key=("strategy", "dka"),
                            context=get_strategy("dka").make_context(model=spec),
                            config={"recursion_limit": 50}, concurrency=2)

    def check(self, index: int, progress: Callable[[int], None] | None = None
              ) -> dict[str, Any]:
        return check_shard(self.job, self.source, self.shards[index], index, self.drops,
                           self.names, progress)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_shard_is_checked_into_its_file_and_marker(tmp_path: Path, model: str) -> None:
    work = Shards(_kg(tmp_path / "kg.nt"), tmp_path / "run", model)
    assert len(work.shards) == 5
    heard: list[int] = []
    result = work.check(1, heard.append)
    lines = _lines(shard_verdicts_path(tmp_path / "run", 1))
    assert len(lines) == result["facts"] == result["ran"] == sum(heard) == 6
    # Two facts at once: the order within the shard is the order they finished in.
    assert sorted(r["subject"] for r in lines) == [f"http://e.org/s{n:02d}"
                                                   for n in range(6, 12)]
    marker = json.loads(shard_done_path(tmp_path / "run", 1).read_text())
    assert marker == result and marker["tally"]["n"] == 6
    # A retried task of a finished shard finds its marker and checks nothing.
    assert work.check(1) == result
    assert len(_lines(shard_verdicts_path(tmp_path / "run", 1))) == 6


def test_a_partial_shard_is_resumed_fact_by_fact(tmp_path: Path, model: str) -> None:
    work = Shards(_kg(tmp_path / "kg.nt"), tmp_path / "run", model)
    work.check(2)
    path = shard_verdicts_path(tmp_path / "run", 2)
    lines = path.read_text().splitlines()
    failed = json.loads(lines[1])
    failed.update(error="ConnectError: refused", label="NA")
    # Two verdicts kept, one failed, then a line torn by a kill: the rest never written.
    path.write_text(f"{lines[0]}\n{json.dumps(failed)}\n{lines[2]}\n" + '{"fact_id": "x", "la')
    shard_done_path(tmp_path / "run", 2).unlink()
    result = work.check(2)
    after = path.read_text().splitlines()
    records = [json.loads(line) for line in after]
    assert len(records) == len({r["fact_id"] for r in records}) == 6 == result["facts"]
    assert after[:2] == [lines[0], lines[2]], "the kept verdicts stay as they were"
    assert not [r for r in records if r.get("error")]
    assert result["ran"] == 4


def test_a_stop_file_stops_a_shard_without_a_marker(tmp_path: Path, model: str) -> None:
    work = Shards(_kg(tmp_path / "kg.nt"), tmp_path / "run", model)
    (tmp_path / "run" / SHARDS).mkdir(parents=True)
    (tmp_path / "run" / SHARDS / STOP).write_text("stop\n")
    result = work.check(0)
    assert result["stopped"]["reason"] == "stopped" and result["facts"] == 0
    assert not shard_done_path(tmp_path / "run", 0).exists()


def _info(digest: str = "ab") -> RunInfo:
    return RunInfo(dataset="kg", strategy="dka", method="DKA", models=["scripted:cycle"],
                   input={"facts": 30, "digest": digest, "drawn": {"how": "all"}})


def _plan(tmp_path: Path) -> tuple[dict[str, Any], list[Shard]]:
    shards = plan_shards(_kg(tmp_path / "kg.nt"), "kg", SHARD_BYTES)
    return plan_of(shards, SHARD_BYTES), shards


def test_a_folder_with_another_runs_verdicts_is_refused(tmp_path: Path) -> None:
    plan, _ = _plan(tmp_path)
    out = tmp_path / "run"
    pending, done = prepare_sharded(out, _info(), plan, resume=False, fresh=False)
    assert pending == [0, 1, 2, 3, 4] and done == []
    shard_verdicts_path(out, 0).write_text('{"fact_id": "a", "label": "T"}\n')
    with pytest.raises(RunError, match="already holds the verdicts of a sharded run"):
        prepare_sharded(out, _info(), plan, resume=False, fresh=False)
    with pytest.raises(RunError, match="changed: the input facts"):
        prepare_sharded(out, _info("cd"), plan, resume=True, fresh=False)
    other = {**plan, "shards": plan["shards"][:2]}
    with pytest.raises(RunError, match="the shards the input is cut in"):
        prepare_sharded(out, _info(), other, resume=True, fresh=False)
    pending, _ = prepare_sharded(out, _info("cd"), plan, resume=False, fresh=True)
    assert pending == [0, 1, 2, 3, 4] and not shard_verdicts_path(out, 0).exists()


def test_a_resume_reruns_the_shards_with_failed_checks(tmp_path: Path, model: str) -> None:
    work = Shards(_kg(tmp_path / "kg.nt"), tmp_path / "run", model)
    plan = plan_of(work.shards, SHARD_BYTES)
    out = tmp_path / "run"
    info = _info()
    prepare_sharded(out, info, plan, resume=False, fresh=False)
    for index in range(len(work.shards)):
        work.check(index)
    marker = json.loads(shard_done_path(out, 3).read_text())
    marker["tally"]["counts"]["errors"] = 1
    shard_done_path(out, 3).write_text(json.dumps(marker))
    pending, done = prepare_sharded(out, info, plan, resume=True, fresh=False)
    assert pending == [3] and sorted(r["shard"] for r in done) == [0, 1, 2, 4]
    assert not shard_done_path(out, 3).exists()
    tally, outcomes = merged(done, info.models)
    assert tally.n == outcomes.facts == 24


def test_a_local_runs_folder_is_not_resumed_in_shards(tmp_path: Path) -> None:
    plan, _ = _plan(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / VERDICTS).write_text('{"fact_id": "a", "label": "T"}\n')
    with pytest.raises(RunError, match="holds a run of the local engine"):
        prepare_sharded(out, _info(), plan, resume=True, fresh=False)
    with pytest.raises(RunError, match="already holds 1 verdicts"):
        prepare_sharded(out, _info(), plan, resume=False, fresh=False)
