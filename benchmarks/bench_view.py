"""Explorer benchmark: opening a 100,000-verdict run in ``kgcheck view`` and paging it.

A run folder of N synthetic verdicts (tests/view_runs.py: five predicates, wrong answers,
NA, confidences) is written into a temporary folder by a child process. Then, each in a
fresh child process so that each peak RSS is its own:

- ``cold``: the explorer opens the run, building and caching its index, and serves the
  runs page and pages of the fact table through the real app (first, middle and last
  page; filtered pages; one fact's page; the runs page's figures list);
- ``warm``: the same with the cached index;
- ``read_all``: for scale, ``read_verdicts`` loading every record into memory, as a
  viewer that keeps the run in memory would.

Prints one JSON document.

    python benchmarks/bench_view.py [--facts 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _timed(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return round(1000 * statistics.median(times), 2)


def child_open(run_dir: str) -> dict:
    from fastapi.testclient import TestClient

    from kgcheck.view.explorer import Explorer
    from kgcheck.view.server import TOKEN_HEADER, create_app

    started = time.perf_counter()
    explorer = Explorer([Path(run_dir)])
    open_s = time.perf_counter() - started
    client = TestClient(create_app(explorer, "t", {"testserver"}), headers={TOKEN_HEADER: "t"})
    total = explorer.facts(explorer_query(0))["total"]
    last = (total - 1) // 50
    started = time.perf_counter()
    runs = client.get("/api/runs").json()
    runs_s = time.perf_counter() - started
    assert len(runs["runs"]) == 1

    def page(params: dict) -> None:
        response = client.get("/api/facts", params=params)
        assert response.status_code == 200, response.text

    result = {
        "open_s": round(open_s, 3),
        "runs_page_s": round(runs_s, 3),
        "page_first_ms": _timed(lambda: page({"page": 0})),
        "page_middle_ms": _timed(lambda: page({"page": last // 2})),
        "page_last_ms": _timed(lambda: page({"page": last})),
        "page_wrong_ms": _timed(lambda: page({"filters": "wrong", "page": 10})),
        "page_wrong_predicate_low_ms": _timed(
            lambda: page({"filters": "wrong,low", "predicate": "author", "page": 2})),
        "fact_page_ms": _timed(lambda: client.get("/api/fact",
                                                  params={"id": "f50000"}).raise_for_status()),
        "peak_rss_mb": _peak_mb(),
    }
    explorer.close()
    return result


def explorer_query(page: int):
    from kgcheck.view.explorer import FactQuery

    return FactQuery(page=page)


def child_index(run_dir: str) -> dict:
    from kgcheck.view.index import index_path

    return {"bytes": index_path(Path(run_dir)).stat().st_size}


def child_read_all(run_dir: str) -> dict:
    from kgcheck.data.runfolder import VERDICTS, read_verdicts

    started = time.perf_counter()
    records = read_verdicts(Path(run_dir) / VERDICTS)
    return {"records": len(records), "seconds": round(time.perf_counter() - started, 3),
            "peak_rss_mb": _peak_mb()}


def child_write(run_dir: str, facts: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from tests.view_runs import make_view_run

    make_view_run(Path(run_dir), facts)
    return {"verdicts_mb": round((Path(run_dir) / "verdicts.jsonl").stat().st_size / 1e6, 1)}


def _child(*args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                          text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        kind, run_dir, *rest = args.child
        out = {"write": lambda: child_write(run_dir, int(rest[0])),
               "open": lambda: child_open(run_dir),
               "read_all": lambda: child_read_all(run_dir),
               "index": lambda: child_index(run_dir)}[kind]()
        print(json.dumps(out))
        return
    with tempfile.TemporaryDirectory(prefix="kgcheck-bench-view-") as tmp:
        # The children keep the index in the benchmark's own cache folder, not the user's.
        os.environ["KGCHECK_CACHE_DIR"] = str(Path(tmp) / "cache")
        run_dir = str(Path(tmp) / "run")
        written = _child("write", run_dir, str(args.facts))
        cold = _child("open", run_dir)
        warm = _child("open", run_dir)
        read_all = _child("read_all", run_dir)
        index_mb = round(_child("index", run_dir)["bytes"] / 1e6, 1)
    print(json.dumps({
        "benchmark": "view", "facts": args.facts, **written, "index_mb": index_mb,
        "cold": cold, "warm": warm, "read_all_for_scale": read_all,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }, indent=1))


if __name__ == "__main__":
    main()
