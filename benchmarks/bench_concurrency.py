"""Adaptive concurrency and the answer cache against a model server with fixed capacity.

A slotted OpenAI-compatible stub (``tests/support/stubs/slotted.py``) runs in its own process with
``--slots`` concurrent answers of ``--seconds`` each: capacity = slots / seconds answers/s.

1. Adaptive concurrency: ``concurrency="auto"`` (up to ``--max-concurrency``) against the
   stub in "reject" mode (429 beyond capacity, as rate-limited APIs do) and "queue" mode
   (vLLM-style waiting), each against the capacity; fixed concurrency at the slot count
   (the best a user who knows the server can do) and far above it, for comparison.
   Goal: auto reaches >= 0.9 of capacity without failed facts. Answers of a second each
   (a short LLM answer) keep the client's own work per fact (~10 ms of CPU) small beside
   the server's; 480 facts make a run of about a minute, in which the slow start's first
   rounds still cost a few per cent (less in a longer run).
   Each mode's server is warmed up by a short run first (imports, connections).
2. Cache: the same run twice; the second makes zero model calls.

Prints one JSON document.

    python benchmarks/bench_concurrency.py [--slots 8] [--seconds 1.0] [--facts 480]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import kgcheck  # noqa: E402
from tests.support.stubs.process import start_stub_process  # noqa: E402


def start_stub(slots: int, seconds: float, mode: str) -> tuple[subprocess.Popen[str], str]:
    """Start the slotted stub in its own process; return it and its URL."""
    return start_stub_process("tests.support.stubs.slotted", "--slots", str(slots),
                              "--seconds", str(seconds), "--mode", mode)


def facts(n: int, tag: str) -> list[dict[str, str]]:
    return [{"id": f"{tag}{i}", "subject": f"Subject_{tag}_{i}", "predicate": "p",
             "object": "o"} for i in range(n)]


def one_run(url: str, n: int, tag: str, out: Path, *, concurrency: int | str,
            max_concurrency: int, cache: Any = False) -> dict[str, Any]:
    started = time.perf_counter()
    result = kgcheck.run(facts=facts(n, tag), model="openai-compatible:stub-model", out=out,
                         settings={"base_url": url, "max_retries": 10, "retry_backoff": 0.05},
                         concurrency=concurrency, max_concurrency=max_concurrency,
                         cache=cache, fresh=True)
    seconds = time.perf_counter() - started
    summary = result.summary
    return {"concurrency": concurrency, "seconds": round(seconds, 2),
            "facts_per_second": round(n / seconds, 2), "failed": summary["errors"],
            "levels": summary.get("concurrency"), "cache": summary.get("cache")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--facts", type=int, default=480)
    parser.add_argument("--max-concurrency", type=int, default=64)
    args = parser.parse_args()
    os.environ.pop("OPENAI_BASE_URL", None)
    capacity = args.slots / args.seconds
    machine = {"cpus": os.cpu_count(), "python": platform.python_version()}
    report: dict[str, Any] = {"machine": machine,
                              "slots": args.slots, "seconds_per_answer": args.seconds,
                              "capacity_per_second": capacity, "facts": args.facts}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for mode in ("reject", "queue"):
            proc, url = start_stub(args.slots, args.seconds, mode)
            try:
                # The first run in a process pays for imports and connections: warm up first,
                # so that no setting is timed with them.
                one_run(url, 16, f"{mode}warm", out / f"{mode}-warm", concurrency=4,
                        max_concurrency=args.max_concurrency)
                rows = {}
                for label, conc in (("auto", "auto"), ("fixed_at_slots", args.slots),
                                    ("fixed_4x_slots", 4 * args.slots)):
                    row = one_run(url, args.facts, f"{mode}{label}", out / f"{mode}-{label}",
                                  concurrency=conc, max_concurrency=args.max_concurrency)
                    row["ratio_to_capacity"] = round(row["facts_per_second"] / capacity, 3)
                    rows[label] = row
                for row in rows.values():
                    row["ratio_to_fixed_at_slots"] = round(
                        row["facts_per_second"] / rows["fixed_at_slots"]["facts_per_second"], 3)
                report[mode] = rows
            finally:
                proc.terminate()
                proc.wait()
        proc, url = start_stub(args.slots, args.seconds, "queue")
        try:
            cache = out / "answers.sqlite"
            first = one_run(url, args.facts, "cached", out / "c1", concurrency=args.slots,
                            max_concurrency=args.max_concurrency, cache=cache)
            second = one_run(url, args.facts, "cached", out / "c2", concurrency=args.slots,
                             max_concurrency=args.max_concurrency, cache=cache)
            report["cache"] = {"first": first, "second": second,
                               "second_run_model_calls": second["cache"]["misses"],
                               "speedup": round(first["seconds"] / max(second["seconds"], 1e-9),
                                                1)}
        finally:
            proc.terminate()
            proc.wait()
    auto = [report[m]["auto"] for m in ("reject", "queue")]
    report["goal"] = {"auto_ratio_to_capacity_at_least": 0.9,
                      "met": all(r["ratio_to_capacity"] >= 0.9 and r["failed"] == 0
                                 for r in auto),
                      "second_run_zero_calls": report["cache"]["second_run_model_calls"] == 0}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
