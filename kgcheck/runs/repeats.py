"""Repeated runs: every fact checked N times, the majority as its verdict.

``kgcheck run --repeats N`` runs the plan N times, each repeat into its own run folder
``OUT/repeats/<i>`` (resumable like any run). Every model call of repeat ``i`` carries the
repeat index in its metadata and in its answer-cache key, so no cached answer is reused
across repeats: with a temperature above 0 each repeat samples anew. ``OUT`` itself then
holds one verdict per fact, the majority over the repeats, with the fact's labels, flip
rate and label entropy in ``details.repeats``, and a summary whose ``repeats`` section gives
the mean flip rate and entropy and each score's mean and spread across the repeats
(``kgcheck.evals.stats.repeats``). Tokens (and so cost) are summed over the repeats.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from kgcheck.data import safe_json
from kgcheck.data.runfolder import RUN_INFO, SUMMARY, VERDICTS, RunError, exclusive
from kgcheck.evals.stats.repeats import repeat_summary
from kgcheck.runs.runner import (
    RunInfo,
    RunResult,
    prepare_out_dir,
    summarize,
    write_run_file,
)

__all__ = ["REPEATS_DIR", "MAX_LISTED", "combine_repeats", "flipped_entry", "majority_record",
           "repeat_folder", "run_repeats", "top_flipped"]

REPEATS_DIR = "repeats"
# Facts that flipped listed in summary.json (most uncertain first); all are in verdicts.jsonl.
MAX_LISTED = 1000

RunOne = Callable[[int, Path], Awaitable[RunResult]]


def repeat_folder(out_dir: Path, repeat: int) -> Path:
    """Return the run folder of repeat ``repeat`` (0-based) of the run in ``out_dir``."""
    return Path(out_dir) / REPEATS_DIR / str(repeat + 1)


def _sum(values: list[Any]) -> int | None:
    present = [int(v) for v in values if v is not None]
    return sum(present) if present else None


def majority_record(copies: list[dict[str, Any]], stability: dict[str, Any]
                    ) -> dict[str, Any]:
    """Return a fact's verdict over its repeats' records: the majority, tokens summed."""
    base = copies[0]
    seconds = [c["seconds"] for c in copies if c.get("seconds")]
    return {
        **base,
        "label": stability["majority"],
        "raws": [raw for c in copies for raw in (c.get("raws") or [c.get("raw")])],
        "seconds": sum(seconds) / len(seconds) if seconds else base.get("seconds"),
        "tokens_in": _sum([c.get("tokens_in") for c in copies]),
        "tokens_out": _sum([c.get("tokens_out") for c in copies]),
        # An error of one repeat is not the fact's error when others answered.
        "error": base.get("error") if all(c.get("error") for c in copies) else None,
        "details": {**(base.get("details") or {}), "repeats": stability},
    }


def top_flipped(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the ``MAX_LISTED`` most uncertain facts that flipped (highest entropy first).

    Entries are ``flipped_entry`` dicts; the top of parts' tops is the top of the whole.
    """
    return sorted(entries, key=lambda e: (-e["entropy"], e["fact_id"]))[:MAX_LISTED]


def flipped_entry(fact_id: str, stability: dict[str, Any]) -> dict[str, Any] | None:
    """Return a fact's entry in the summary's ``flipped`` list (None: it never flipped)."""
    if not stability["flip_rate"]:
        return None
    return {"fact_id": fact_id, "flip_rate": stability["flip_rate"],
            "entropy": stability["entropy"], "counts": stability["counts"]}


def combine_repeats(results: list[RunResult]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return the majority verdict records and the summary's ``repeats`` section."""
    by_fact = [{str(r["fact_id"]): r for r in res.records} for res in results]
    per_fact, section = repeat_summary(by_fact)
    records = [majority_record([rep[fid] for rep in by_fact if fid in rep], stability)
               for fid, stability in per_fact.items()]
    section["flipped"] = top_flipped(
        e for fid, s in per_fact.items() if (e := flipped_entry(fid, s)) is not None)
    return records, section


async def run_repeats(out_dir: Path, info: RunInfo, repeats: int, run_one: RunOne, *,
                      resume: bool, fresh: bool, asked: int) -> RunResult:
    """Run ``run_one(i, folder)`` for each repeat, then write the majority into ``out_dir``."""
    out_dir = Path(out_dir)
    started = time.perf_counter()
    with exclusive(out_dir):
        prepare_out_dir(out_dir, info, resume=resume, fresh=fresh)[0].close()
        info_path = out_dir / RUN_INFO
        stored = safe_json.parse(info_path.read_text(encoding="utf-8"))
        before = stored.get("repeats")
        if resume and before is not None and before != repeats:
            raise RunError(f"cannot resume {out_dir}: it ran {before} repeats, not {repeats}; "
                           f"start over with --fresh --out {out_dir}, or use another --out")
        write_run_file(info_path, safe_json.dumps({**stored, "repeats": repeats}, indent=1) + "\n")
    results = []
    for repeat in range(repeats):
        results.append(await run_one(repeat, repeat_folder(out_dir, repeat)))
        if results[-1].aborted:
            break
    with exclusive(out_dir):
        records, section = combine_repeats(results)
        write_run_file(out_dir / VERDICTS, "".join(safe_json.dumps(r) + "\n" for r in records))
        summary = summarize(records, info, seconds=time.perf_counter() - started,
                            ran=sum(int(r.summary.get("ran_this_time") or 0) for r in results))
        summary["asked"] = asked
        summary["repeats"] = section
        aborted = next((r.aborted for r in results if r.aborted), None)
        if aborted:
            summary["aborted"] = f"repeat {len(results)} of {repeats}: {aborted}"
        write_run_file(out_dir / SUMMARY, safe_json.dumps(summary, indent=1) + "\n")
    return RunResult(out_dir, records, summary, summary.get("aborted"))
