"""Review benchmark: what a review costs over the SQLite checkpointer, per fact.

A DKA run over YAGO facts with ``replay:gemma2:9b`` (written once into a temporary folder),
then through ``kgcheck.open_review``: the first open (one review-graph thread started per
fact, each paused at ``interrupt()``), a second open (the threads read back), and the
latency of a decision (resume, checkpoint, labels.csv rewritten) and of an undo.

Prints one JSON document.

    python benchmarks/bench_review.py [--facts 500] [--decisions 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import kgcheck


async def measure(run_dir: Path, decisions: int) -> dict:
    started = time.perf_counter()
    async with kgcheck.open_review(run_dir) as review:
        first_open = time.perf_counter() - started
        ids = [i.fact_id for i in review.items]
        decide = []
        for n, fact_id in enumerate(ids[:decisions]):
            t = time.perf_counter()
            await review.decide(fact_id, "TF"[n % 2], "checked")
            decide.append(time.perf_counter() - t)
        undo = []
        for _ in range(min(10, decisions)):
            t = time.perf_counter()
            await review.undo()
            undo.append(time.perf_counter() - t)
    started = time.perf_counter()
    async with kgcheck.open_review(run_dir) as review:
        second_open = time.perf_counter() - started
        decided = review.progress()["decided"]
    return {"facts": len(ids), "first_open_s": round(first_open, 3),
            "first_open_ms_per_fact": round(1000 * first_open / len(ids), 2),
            "reopen_s": round(second_open, 3),
            "decide_ms_median": round(1000 * statistics.median(decide), 2),
            "decide_ms_max": round(1000 * max(decide), 2),
            "undo_ms_median": round(1000 * statistics.median(undo), 2),
            "decided_after_reopen": decided,
            "checkpoint_mb": round((run_dir / "review.sqlite").stat().st_size / 1e6, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=500)
    parser.add_argument("--decisions", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        kgcheck.run(dataset="yago", strategy="dka", model="replay:gemma2:9b", limit=args.facts,
                    out=run_dir)
        result = asyncio.run(measure(run_dir, args.decisions))
    print(json.dumps({"benchmark": "review", "cpus": os.cpu_count(),
                      "python": platform.python_version(), **result}, indent=1))


if __name__ == "__main__":
    main()
