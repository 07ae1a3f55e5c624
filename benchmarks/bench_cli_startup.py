"""CLI start-up benchmark: how long ``kgcheck --version``, ``--help`` and ``run --help`` take.

Each command runs ``--runs`` times in a fresh interpreter (the console script's own import
path: ``from kgcheck.cli import app``) and the median wall time is reported. With
``--against COMMIT`` (default ``63b3204``, the code before the commands were loaded
lazily) the same commands run, interleaved, over that commit's tree (``git archive``, laid
out as the installed namespace by ``tests/support/package_tree.py``) with the same interpreter, so
the ratio is measured in one run on one machine. Goals on an idle machine: ``--version``
and ``--help`` below 0.3 s, ``run --help`` below 0.6 s.

Prints one JSON document.

    python benchmarks/bench_cli_startup.py [--runs 7] [--against 63b3204 | --against '']
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.package_tree import build_tree, commit_tree  # noqa: E402

COMMANDS = {"version": ["--version"], "help": ["--help"], "run_help": ["run", "--help"]}
GOALS = {"version": 0.3, "help": 0.3, "run_help": 0.6}
ENTRY = "import sys\nfrom kgcheck.cli import app\napp(sys.argv[1:], prog_name='kgcheck')\n"


def seconds_of(args: list[str], tree: Path) -> float:
    """Run the CLI once over ``tree``; return the wall time of the whole process."""
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "100"}
    started = time.perf_counter()
    # From the tree's folder: ``-c`` puts the working folder first on the path.
    done = subprocess.run([sys.executable, "-c", ENTRY, *args], env=env, cwd=tree,
                          capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kgcheck {' '.join(args)} failed: {done.stderr.strip()[-400:]}")
    return elapsed


def which_kgcheck(tree: Path) -> str:
    """Say where the interpreter finds ``kgcheck.cli`` with ``tree`` on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-c", "import kgcheck.cli, os; "
                           "print(os.path.dirname(kgcheck.cli.__file__))"], env=env,
                          cwd=tree, capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    """Measure the start-up times and print them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--against", default="63b3204",
                        help="a commit to measure beside the working tree ('' for none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kgcheck-bench-cli-") as folder:
        trees = {"now": build_tree(Path(folder) / "now-tree", root=ROOT)}
        if args.against:
            base = Path(folder) / "base"
            base.mkdir()
            trees[args.against] = commit_tree(args.against, base)
        for tree in trees.values():
            seconds_of(["--version"], tree)  # warm the file cache and the bytecode
            seconds_of(["run", "--help"], tree)
        times: dict[str, dict[str, list[float]]] = {k: {c: [] for c in COMMANDS} for k in trees}
        for _ in range(args.runs):
            for name, command in COMMANDS.items():
                for key, tree in trees.items():  # interleaved: the same load on both
                    times[key][name].append(seconds_of(command, tree))
        result: dict[str, Any] = {
            "benchmark": "cli_startup",
            "python": platform.python_version(),
            "runs": args.runs,
            "load_average": os.getloadavg(),
            "goals_seconds": GOALS,
            "code": {key: which_kgcheck(tree) for key, tree in trees.items()},
        }
        for key in trees:
            result[key] = {name: {"median_s": round(statistics.median(values), 3),
                                  "min_s": round(min(values), 3)}
                           for name, values in times[key].items()}
        result["now"]["meets_goals"] = {name: result["now"][name]["median_s"] < GOALS[name]
                                        for name in COMMANDS}
        if args.against:
            result["speed_up"] = {name: round(result[args.against][name]["median_s"]
                                              / result["now"][name]["median_s"], 2)
                                  for name in COMMANDS}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
