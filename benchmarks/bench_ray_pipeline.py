"""The sharded Ray pipeline: throughput against workers, driver memory against facts.

A local Ray cluster is started once for the benchmark (4 logical CPUs on this machine's
cores, ``kgcheck.runs.ray_cluster``), and stub OpenAI-compatible servers in their own
processes answer every call (the slotted stub, with more slots than requests). Each run
is a fresh ``kgcheck run --engine ray --ray-address ...`` process over a whole N-Triples
file (facts of 50 predicates, an ``rdfs:label`` line for every tenth), so the driver's own
peak RSS is measured (``wait4``; the workers are the cluster's processes, not its
children).

- ``workers``: ``--facts`` facts (default 1,200, in about 30 shards) against a server that
  takes ``--latency`` seconds per answer (default 0.2), ``--concurrency`` facts at once
  per worker (default 4), with 1, 2 and 4 workers: facts/s of the checking (the summary's
  ``facts_per_second``: from the first shard handed out to the last marker, so without the
  driver's connection to the cluster and the survey), the ideal ``workers * concurrency /
  latency``, and the scaling against linear (``facts/s(W) / (W * facts/s(1))``; goal: at
  least 0.8). With ``--stores local,s3`` each worker count runs once more with the
  workers writing their shards to S3 (``--shards-uri``; moto's server on loopback, in this
  process, reached through the cluster's environment): ``s3_of_local`` is its facts/s
  against the run folder's own shards, measured side by side. With ``--inputs local,s3``
  each runs once more with the input file in S3 only (``--triples s3://...``: cut by
  seeking, each task reading its byte range): ``s3_input_of_local`` is its facts/s against
  the local file's.
- ``driver_memory``: files of ``--rss-facts`` facts (default 1,000, 3,000 and 9,000) against
  a server that answers at once, 2 workers: the driver's peak RSS with the pipeline, and
  with the Ray engine feeding every fact from the driver (``--limit N``: the same facts
  through the driver, as before the pipeline). Goal: the pipeline's driver RSS flat in the
  number of facts. With ``--inputs local,s3`` also the pipeline over the file in S3
  (``pipeline_s3_input``). With ``--repeats N`` (N > 1) each file also runs with
  ``--repeats N``: on the pipeline (``pipeline_repeats``: N passes, then the combine on the
  workers) and, unless ``--no-driver-fed``, fed by the driver (``driver_fed_repeats``:
  ``--limit``, the repeats combined in the driver's memory, as before); their facts/s count
  every repeat's checks.

With ``--consensus K`` every run is a consensus of K members (stub models ``stub-1`` ..
``stub-K`` with a fixed judge) instead of one model: the members ask in parallel branches,
so a fact costs K calls in about one answer's time; the driver-fed runs are consensus runs
fed from the driver, as consensus ran on Ray before the pipeline took it.

Prints one JSON document. The machine has 2 shared cores: compare within one run.

    python benchmarks/bench_ray_pipeline.py [--workers 1,2,4] [--facts 1200]
        [--latency 0.2] [--concurrency 4] [--rss-facts 1000,3000,9000] [--no-driver-fed]
        [--stores local,s3] [--inputs local,s3] [--repeats 3] [--consensus 4]
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
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from benchmarks.bench_concurrency import start_stub  # noqa: E402
from benchmarks.bench_flat_memory import generate  # noqa: E402
from benchmarks.rag_corpus import SKIPPED  # noqa: E402

SHARDS = 30


def command(path: str | Path, url: str, out: Path, address: str, workers: int, concurrency: int,
            shard_mb: float, *extra: str) -> list[str]:
    """Return the ``kgcheck run`` command line over a whole file on the cluster."""
    return [sys.executable, "-c", "from kgcheck.cli import app; app()", "run",
            "--triples", str(path), "--strategy", "dka", "--model",
            "openai-compatible:stub-model", "--base-url", url, "--out", str(out),
            "--no-progress", "--no-cache", "--concurrency", str(concurrency), "--engine",
            "ray", "--ray-address", address, "--ray-workers", str(workers), "--ray-shard-mb",
            f"{shard_mb:.6f}", *extra]


def consensus_options(members: int) -> list[str]:
    """Return the options of a consensus of ``members`` stub models (none for one model)."""
    if members < 2:
        return []
    return ["--consensus", ",".join(f"openai-compatible:stub-{n}" for n in range(1, members + 1)),
            "--judge", "openai-compatible:stub-judge"]


def measured(cmd: list[str], out: Path, facts: int) -> dict[str, Any]:
    """Run ``cmd`` to its end; return its wall seconds, peak RSS and the run's facts/s."""
    start = time.perf_counter()
    process = subprocess.Popen(cmd, cwd=out.parent, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{out.name} failed:\n{stderr}")
    summary = json.loads((out / "summary.json").read_text())
    if summary["n"] != facts or summary["errors"]:
        raise SystemExit(f"{out}: {summary['n']} verdicts, {summary['errors']} errors")
    return {"wall_seconds": round(time.perf_counter() - start, 2),
            "facts_per_second": summary["facts_per_second"],
            "driver_peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "driver_cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2)}


def _input(kg: Path, where: str, endpoint: Any) -> str | Path:
    """Return the run's input: the local file, or its copy in S3 (uploaded once)."""
    if where != "s3":
        return kg
    fs = endpoint.fs()
    key = f"{endpoint.bucket}/inputs/{kg.name}"
    if not fs.exists(key):
        fs.put_file(str(kg), key)
    return f"s3://{key}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--facts", type=int, default=1200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rss-facts", default="1000,3000,9000")
    parser.add_argument("--no-driver-fed", action="store_true")
    parser.add_argument("--stores", default="local", help="local, s3 or local,s3")
    parser.add_argument("--inputs", default="local", help="local, s3 or local,s3")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--consensus", type=int, default=0,
                        help="members of a consensus run (0: one model)")
    args = parser.parse_args()
    stores = args.stores.split(",")
    inputs = args.inputs.split(",")
    panel = consensus_options(args.consensus)
    try:
        import ray  # noqa: F401 - only to know it is there

        from kgcheck.runs.ray_cluster import LocalCluster
    except ImportError:
        print(json.dumps({"benchmark": "bench_ray_pipeline",
                          "skipped": "Ray is not installed: pip install 'kgcheck[ray]'"}))
        return SKIPPED
    workers = [int(w) for w in args.workers.split(",")]
    report: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "workers": {"facts": args.facts, "seconds_per_answer": args.latency,
                    "concurrency_per_worker": args.concurrency, "runs": []},
        "driver_memory": {"workers": 2, "seconds_per_answer": 0.0, "repeats": args.repeats,
                          "runs": []},
        "consensus_members": args.consensus if panel else None}
    slow, slow_url = start_stub(100_000, args.latency, "queue")
    fast, fast_url = start_stub(100_000, 0.0, "queue")
    endpoint = None
    if "s3" in stores or "s3" in inputs:
        from tests.support.stubs.object_store import S3Endpoint

        endpoint = S3Endpoint()
        # The cluster's processes, and the driver, reach it through their environment.
        os.environ.update(endpoint.env)
    cluster = LocalCluster.start(num_cpus=4)
    try:
        with tempfile.TemporaryDirectory(prefix="kgcheck-bench-") as folder:
            tmp = Path(folder)
            kg = tmp / f"kg-{args.facts}.nt"
            generate(kg, args.facts)
            shard_mb = kg.stat().st_size / SHARDS / 2**20
            for count in workers:
                for store in stores:
                    for where in inputs:
                        out = tmp / f"workers-{count}-{store}-{where}"
                        extra = panel + (["--shards-uri", endpoint.uri(f"bench/{out.name}")]
                                         if store == "s3" and endpoint is not None else [])
                        found = measured(command(_input(kg, where, endpoint), slow_url, out,
                                                 cluster.address, count, args.concurrency,
                                                 shard_mb, *extra), out, args.facts)
                        ideal = count * args.concurrency / args.latency
                        report["workers"]["runs"].append(
                            {"workers": count, "store": store, "input": where, **found,
                             "ideal_facts_per_second": ideal,
                             "of_ideal": round(found["facts_per_second"] / ideal, 3)})
            runs = report["workers"]["runs"]
            for store in stores:
                for where in inputs:
                    one = next((r["facts_per_second"] for r in runs if r["workers"] == 1
                                and r["store"] == store and r["input"] == where), None)
                    for run in (r for r in runs if r["store"] == store and r["input"] == where):
                        if one:
                            run["of_linear"] = round(
                                run["facts_per_second"] / (run["workers"] * one), 3)
            by = {(r["workers"], r["store"], r["input"]): r["facts_per_second"] for r in runs}
            for run in runs:
                if run["store"] == "s3" and by.get((run["workers"], "local", run["input"])):
                    run["s3_of_local"] = round(
                        run["facts_per_second"] / by[(run["workers"], "local", run["input"])], 3)
                if run["input"] == "s3" and by.get((run["workers"], run["store"], "local")):
                    run["s3_input_of_local"] = round(
                        run["facts_per_second"] / by[(run["workers"], run["store"], "local")], 3)
            for facts in (int(n) for n in args.rss_facts.split(",")):
                kg = tmp / f"kg-{facts}.nt"
                generate(kg, facts)
                shard_mb = 64 * 1024 / 2**20
                row: dict[str, Any] = {"facts": facts}
                out = tmp / f"memory-{facts}"
                row["pipeline"] = measured(command(kg, fast_url, out, cluster.address, 2,
                                                   args.concurrency, shard_mb, *panel), out,
                                           facts)
                row["pipeline"]["shards"] = json.loads(
                    (out / "summary.json").read_text())["engine"]["input_shards"]
                if "s3" in inputs:
                    out = tmp / f"memory-{facts}-s3"
                    row["pipeline_s3_input"] = measured(
                        command(_input(kg, "s3", endpoint), fast_url, out, cluster.address, 2,
                                args.concurrency, shard_mb), out, facts)
                if not args.no_driver_fed:
                    out = tmp / f"fed-{facts}"
                    row["driver_fed"] = measured(
                        command(kg, fast_url, out, cluster.address, 2, args.concurrency,
                                shard_mb, "--limit", str(facts), *panel), out, facts)
                if args.repeats > 1:
                    again = ("--repeats", str(args.repeats))
                    out = tmp / f"memory-{facts}-repeats"
                    row["pipeline_repeats"] = measured(
                        command(kg, fast_url, out, cluster.address, 2, args.concurrency,
                                shard_mb, *again), out, facts)
                    if not args.no_driver_fed:
                        out = tmp / f"fed-{facts}-repeats"
                        row["driver_fed_repeats"] = measured(
                            command(kg, fast_url, out, cluster.address, 2, args.concurrency,
                                    shard_mb, "--limit", str(facts), *again), out, facts)
                report["driver_memory"]["runs"].append(row)
            memory = report["driver_memory"]["runs"]
            if len(memory) > 1:
                for series in ("pipeline", "pipeline_s3_input", "driver_fed",
                               "pipeline_repeats", "driver_fed_repeats"):
                    if series in memory[0]:
                        report["driver_memory"][f"{series}_growth_mb"] = round(
                            memory[-1][series]["driver_peak_rss_mb"]
                            - memory[0][series]["driver_peak_rss_mb"], 1)
    finally:
        cluster.stop()
        if endpoint is not None:
            endpoint.stop()
        for stub in (slow, fast):
            stub.terminate()
            stub.wait(10)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
