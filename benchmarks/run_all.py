"""Run benchmark scripts one after another; fail when any fails, report the skipped ones.

    python benchmarks/run_all.py benchmarks/bench_*.py

A script's JSON goes to stdout as it comes. Exit status 0 is a result, 77 (``SKIPPED``) a
benchmark that cannot run on this machine (its JSON says why and how to get what it
needs), anything else a failure: the run goes on, and ends with status 1.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rag_corpus import SKIPPED  # noqa: E402


def main(scripts: list[str]) -> int:
    """Run each script with this interpreter; return 1 when one failed, else 0."""
    if not scripts:
        print("error: no benchmark scripts given", file=sys.stderr)
        return 2
    ran, skipped, failed = [], [], []
    for script in scripts:
        print(f"== {script}", flush=True)
        status = subprocess.run([sys.executable, script], check=False).returncode
        name = Path(script).name
        (ran if status == 0 else skipped if status == SKIPPED else failed).append(
            name if status in (0, SKIPPED) else f"{name} (exit {status})")
    print(f"bench: {len(ran)} ran, {len(skipped)} skipped, {len(failed)} failed")
    for label, names in (("skipped", skipped), ("failed", failed)):
        if names:
            print(f"{label}: {', '.join(names)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
