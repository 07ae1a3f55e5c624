"""Paired comparison benchmark: `kgcheck compare` on the study's recorded DKA runs.

Makes two DKA runs over all of FactBench with the recorded answers of two models
(``kgcheck run --model replay:<model>``), then times ``kgcheck compare`` on them as a user
runs it (a new process: start-up, reading both folders, McNemar, 10,000 paired bootstrap
resamples) and the comparison alone in this process.

Prints one JSON document.

    python benchmarks/bench_compare.py [--dataset factbench] [--models gemma2:9b,qwen2.5:7b]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kgcheck.evals.stats.paired import compare_runs

KGCHECK = [sys.executable, "-m", "kgcheck.cli"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    """Make the two runs, time the comparison; print JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="factbench")
    parser.add_argument("--models", default="gemma2:9b,qwen2.5:7b")
    parser.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()
    models = args.models.split(",")
    results: dict[str, object] = {"dataset": args.dataset, "models": models,
                                  "resamples": args.resamples, "machine": platform.machine()}
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for model in models:
            out = Path(tmp) / model.replace(":", "_")
            subprocess.run([*KGCHECK, "run", "--dataset", args.dataset, "--method", "dka",
                            "--model", f"replay:{model}", "--out", str(out), "--no-cache",
                            "--no-progress", "--concurrency", "16"],
                           check=True, capture_output=True)
            runs.append(out)
        # CPU time as well as wall time: on a shared machine the wall time measures the load.
        cpu_before = _children_cpu()
        started = time.perf_counter()
        subprocess.run([*KGCHECK, "compare", str(runs[0]), str(runs[1]), "--json",
                               str(Path(tmp) / "cmp.json"), "--resamples",
                               str(args.resamples)], check=True, capture_output=True)
        results["cli_seconds"] = round(time.perf_counter() - started, 3)
        results["cli_cpu_seconds"] = round(_children_cpu() - cpu_before, 3)
        results["load_average"] = os.getloadavg()[0]
        started = time.perf_counter()
        comparison = compare_runs(runs[0], runs[1], resamples=args.resamples)
        results["in_process_seconds"] = round(time.perf_counter() - started, 3)
        results["result"] = comparison.as_json()
        results["disagreements"] = len(comparison.disagreements)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
