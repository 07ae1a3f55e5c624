"""The run folder of a sharded run, as its driver keeps it: the plan, a resume, the summary.

A sharded run (``kgcheck run --engine ray`` over a whole file) writes ``run.json`` as any
run does, and ``shards/plan.json``: the byte ranges the input was cut in, and the shard
store when it is not ``shards/`` itself (``--shards-uri``). Its workers write
``NNNNN.jsonl`` and ``NNNNN.done`` into the store (``kgcheck.runs.shard_check``). Before the
workers start, ``prepare_sharded`` checks the folder as ``runner.prepare_out_dir`` checks a
local one: another run's verdicts are refused unless resumed or started over, a resume must
be of the same run (identity, settings, prompt files, input) and cut in the same shards.
It returns the shards left to check: those without a marker, and, in a resume, those whose
marker counts failed checks (their good verdicts are kept and the failed facts run again).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kgcheck.arguments import Arg, literal
from kgcheck.data import safe_json
from kgcheck.data.runfolder import (
    LOCK,
    RESUME_INDEX,
    RUN_INFO,
    SHARD_PLAN,
    SHARDS,
    SUMMARY,
    VERDICTS,
    RunError,
    make_folder,
    read_run_info,
    read_verdicts,
    shard_name,
)
from kgcheck.data.shard_store import ShardStore
from kgcheck.data.shards import Shard
from kgcheck.runs.runner import RunInfo, different_run, resume_conflicts, write_run_file
from kgcheck.runs.shard_check import STOP, shard_result

__all__ = ["PLAN_VERSION", "local_store", "plan_of", "prepare_sharded", "stored_plan"]

PLAN_VERSION = 1


def plan_of(shards: Sequence[Shard], shard_bytes: int, store: ShardStore
            ) -> dict[str, Any]:
    """Return ``shards/plan.json``'s content: input, shard size, byte ranges, remote store."""
    plan = {"version": PLAN_VERSION, "input": shards[0].path if shards else "",
            "shard_bytes": shard_bytes,
            "shards": [[s.start, s.end, s.first_line] for s in shards]}
    return {**plan, "store": store.where} if store.remote else plan


def local_store(out_dir: Path) -> ShardStore:
    """Return the store of a run folder's own shards (``RUN/shards/``)."""
    return ShardStore(Path(out_dir).resolve() / SHARDS)


def stored_plan(out_dir: Path) -> dict[str, Any] | None:
    """Read a folder's shard plan (None: none, or a torn or foreign file)."""
    try:
        found = safe_json.parse((out_dir / SHARDS / SHARD_PLAN).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return found if isinstance(found, dict) and found.get("version") == PLAN_VERSION else None


def prepare_sharded(out_dir: Path, info: RunInfo, plan: Mapping[str, Any], store: ShardStore,
                    *, resume: bool, fresh: bool) -> tuple[list[int], list[dict[str, Any]]]:
    """Check or create the folder of a sharded run; return the shards left and those done.

    Returns the indices of the shards to check, and the markers of the shards finished
    (their results, merged into the summary).
    """
    make_folder(out_dir)
    info_path = out_dir / RUN_INFO
    known = (VERDICTS, SUMMARY, RUN_INFO, LOCK, RESUME_INDEX)
    foreign = sorted(p.name for p in out_dir.iterdir() if p.is_file() and p.name not in known)
    if foreign and not info_path.exists():
        raise RunError(f"{literal(str(out_dir))} is not a kgcheck run folder (it holds "
                       f"{literal(', '.join(foreign[:3]))} but no {RUN_INFO}); pick another "
                       "{out}", out=Arg("out"))
    store.check()
    if fresh:
        for name in (VERDICTS, SUMMARY, RUN_INFO):
            (out_dir / name).unlink(missing_ok=True)
        shutil.rmtree(out_dir / SHARDS, ignore_errors=True)
        store.clear()
    local = len(read_verdicts(out_dir / VERDICTS))
    if local:
        if resume:
            raise RunError(
                f"{literal(str(out_dir))} holds a run of the local engine ({local} verdicts in "
                f"{VERDICTS}): resume it without {{engine}}, or start over with {{fresh}}",
                engine=Arg("engine", "ray"), fresh=Arg("fresh", True, out=str(out_dir)))
        raise RunError(
            f"{literal(str(out_dir))} already holds {local} verdicts: pass {{resume}} "
            "to continue that run, {fresh} to start over, or another {out}",
            resume=Arg("resume", True), fresh=Arg("fresh", True), out=Arg("out"))
    held = store.names()
    if held and not resume:
        raise RunError(
            f"{literal(str(out_dir))} already holds the verdicts of a sharded run "
            f"({len(held)} shard files in {literal(store.shown)}): pass {{resume}} to "
            "continue that run, {fresh} "
            "to start over, or another {out}",
            resume=Arg("resume", True), fresh=Arg("fresh", True), out=Arg("out"))
    if held:
        _check_resume(out_dir, info, plan)
    store.remove(STOP)
    write_run_file(info_path, safe_json.dumps(info.stored(), indent=1) + "\n")
    (out_dir / SHARDS).mkdir(exist_ok=True)
    write_run_file(out_dir / SHARDS / SHARD_PLAN, safe_json.dumps(plan) + "\n")
    pending, done = [], []
    for index in range(len(plan["shards"])):
        marker = shard_name(index, ".done")
        result = shard_result(store, index) if marker in held else None
        if (result is not None and shard_name(index, ".jsonl") in held
                and not (resume and result["tally"]["counts"]["errors"])):
            done.append(result)
            continue
        # Not finished, or finished with failed checks a resume retries.
        if marker in held:
            store.remove(marker)
        pending.append(index)
    return pending, done


def _check_resume(out_dir: Path, info: RunInfo, plan: Mapping[str, Any]) -> None:
    """Refuse to resume a folder that holds another run, or the same input cut otherwise."""
    try:
        stored = read_run_info(out_dir, RunError)
    except RunError:
        stored = {}
    changes = resume_conflicts(stored, info)
    before = stored.get("input") or {}
    if any(before.get(k) != info.input.get(k) for k in ("facts", "digest", "drawn")):
        changes.append("the input facts (their count or content)")
    old = stored_plan(out_dir)
    if not changes and (old is None or old["shards"] != plan["shards"]):
        changes.append("the shards the input is cut in (shards/plan.json)")
    if not changes and old is not None and old.get("store") != plan.get("store"):
        changes.append("where the shards are written (--shards-uri, shards/plan.json)")
    if changes:
        raise different_run(out_dir, changes)
    info.run_id = stored.get("run_id", info.run_id)
