"""Engines: facts/s of the local engine and of Ray with 1 and 2 workers, against the ideal.

A fixed-latency OpenAI-compatible stub (the slotted stub with more slots than requests, in
its own process) answers every call after ``--seconds``. Each engine checks ``--facts``
facts at ``--concurrency`` facts in flight; the ideal is ``concurrency / seconds`` facts/s.
Ray runs on a local cluster started for the benchmark (2 CPUs), so Ray's figures include
its per-call overhead (a remote call and the pickling of the input and the verdict), not
its start-up: each engine is warmed up on a few facts first.

    python benchmarks/bench_engines.py [--facts 400] [--seconds 0.2] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from benchmarks.bench_concurrency import facts, start_stub  # noqa: E402
from kgcheck import api  # noqa: E402
from kgcheck.runs.engines import make_engine  # noqa: E402


async def timed_run(url: str, n: int, tag: str, out: Path, concurrency: int,
                    engine: Any) -> dict[str, Any]:
    plan = api.plan_run(facts=facts(n, tag), model="openai-compatible:stub-model", out=out,
                        settings={"base_url": url})
    started = time.perf_counter()
    result = await api.execute(plan, concurrency=concurrency, cache=False, fresh=True,
                               engine=engine)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), "facts_per_second": round(n / seconds, 2),
            "failed": result.summary["errors"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    os.environ.pop("OPENAI_BASE_URL", None)
    ideal = args.concurrency / args.seconds
    report: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "facts": args.facts, "seconds_per_answer": args.seconds,
        "concurrency": args.concurrency, "ideal_facts_per_second": ideal, "engines": {}}
    proc, url = start_stub(100_000, args.seconds, "queue")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for label, engine, options in (
                    ("local", "local", {}),
                    ("ray_1_worker", "ray", {"workers": 1, "num_cpus": 2,
                                             "per_worker": args.concurrency}),
                    ("ray_2_workers", "ray", {"workers": 2, "num_cpus": 2,
                                              "per_worker": args.concurrency})):
                out = Path(tmp) / label
                started = time.perf_counter()
                runner = make_engine(engine, **options)
                try:
                    # Warm-up: start the workers and compile their graphs.
                    asyncio.run(timed_run(url, 8, f"warm{label}", out, args.concurrency,
                                          runner))
                    warm = time.perf_counter() - started
                    row = asyncio.run(timed_run(url, args.facts, label, out,
                                                args.concurrency, runner))
                finally:
                    runner.close()
                row["start_seconds"] = round(warm, 2)
                row["ratio_to_ideal"] = round(row["facts_per_second"] / ideal, 3)
                report["engines"][label] = row
    finally:
        proc.terminate()
        proc.wait()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
