"""Wall time and peak memory of `kgcheck reproduce` over a full upstream data folder.

Runs the real command in a child process (interpreter start and imports included), once
with the figures and once without, and prints JSON. Goal: under 20 s and 1 GB.

    .venv/bin/python benchmarks/bench_reproduce.py [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from rag_corpus import fail, skip  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "factcheck-data"


def measure(data: Path, plots: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "kgcheck.cli", "reproduce", "--data", str(data),
               "--out", str(out), "--plots" if plots else "--no-plots"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        # A fresh child per measurement, so ru_maxrss of the children is this run's peak.
        code = ("import resource, subprocess, sys; "
                "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
                "sys.stderr.write(r.stderr); "
                "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
                "print(u.ru_utime + u.ru_stime, u.ru_maxrss); "
                "sys.exit(r.returncode)")
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True,
                              text=True, env=env, cwd=ROOT)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            fail(f"reproduce failed: {done.stderr.strip()}")
        cpu, peak_kb = done.stdout.strip().splitlines()[-1].split()
        records = json.loads((out / "tables.json").read_text(encoding="utf-8"))
        files = list((out / "plots").iterdir()) if plots else []
        return {
            "plots": plots,
            "wall_seconds": round(seconds, 2),
            # CPU time does not grow when other jobs share the cores; wall time does.
            "cpu_seconds": round(float(cpu), 2),
            "peak_rss_mb": round(int(peak_kb) / 1024, 1),
            "records": len(records),
            "datasets": sorted({r["dataset"] for r in records}),
            "plot_files": len(files),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if not args.data.is_dir() and args.data == DEFAULT_DATA:
        skip(f"no full upstream data folder at {args.data}; the vendored copy is too small "
             "to measure: clone https://github.com/FactCheck-AI/FactCheck (dataset/ and "
             "results/paper_results/) and pass it with --data DIR")
    if not args.data.is_dir():
        fail(f"--data {args.data}: data folder not found")
    runs = [measure(args.data, plots=True), measure(args.data, plots=False)]
    print(json.dumps({
        "benchmark": "reproduce",
        "data": str(args.data),
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "goal": {"wall_seconds": 20, "peak_rss_mb": 1024},
        "runs": runs,
        "within_goal": all(r["wall_seconds"] < 20 and r["peak_rss_mb"] < 1024 for r in runs),
    }, indent=1))


if __name__ == "__main__":
    main()
