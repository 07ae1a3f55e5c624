"""Consensus benchmark: members run at the same time, so a fact costs its slowest member.

Four replay members answer with their recorded response times slept
(``replay_latency=1.0``); ties go to the recorded cons-up judge.

1. Latency: each fact alone (concurrency 1), wall time against the slowest member's
   recorded time plus the judge's time on ties, and against the sum of the members (what a
   sequential loop would cost). Goal: wall <= 1.15 x (slowest + judge).
2. Throughput: the consensus runner (verdicts written, progress off) at concurrency 1 and
   8, against the ideal ``concurrency / mean per-fact latency``; and at zero latency, the
   cost of the graph itself.

Prints one JSON document.

    python benchmarks/bench_consensus.py [--dataset factbench] [--method dka] [--facts 48]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import kgcheck
from kgcheck.data.facts import Fact
from kgcheck.data.recordings import lookup
from kgcheck.data.upstream import resolve_data_dir
from kgcheck.evals.metrics import consensus_alignment
from kgcheck.graphs.consensus.graph import ConsensusContext, build
from kgcheck.graphs.consensus.judges import resolve_judge
from kgcheck.graphs.parsing import parse_verdict

MEMBERS = ["replay:gemma2:9b", "replay:qwen2.5:7b", "replay:llama3.1:8b", "replay:mistral:7b"]
GOAL_RATIO = 1.15


def measured_alignment(facts: list[Fact], method: str, data_dir: str) -> dict[str, float]:
    """CA_M of the members over the whole dataset, from the recordings (picks the judge)."""
    votes = []
    for fact in facts:
        try:
            votes.append({m: parse_verdict(lookup(data_dir, m.split(":", 1)[1], fact.dataset,
                                                  method, fact.id)["text"]) for m in MEMBERS})
        except LookupError:
            continue
    return consensus_alignment(votes)


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def latency(graph: Any, ctx: ConsensusContext, facts: list[Fact]) -> dict[str, Any]:
    """Run each fact alone; compare its wall time with its slowest member plus the judge."""
    rows = []
    for fact in facts:
        started = time.perf_counter()
        out = await graph.ainvoke({"fact": fact.as_input()}, context=ctx,
                                  config={"recursion_limit": 50},
                                  output_keys=["verdict", "judge_verdict"])
        wall = time.perf_counter() - started
        details = out["verdict"]["details"]
        member_seconds = [v["seconds"] for v in details["votes"]]
        judge_seconds = (out.get("judge_verdict") or {}).get("seconds") or 0.0
        # Replay reports recorded seconds where the study kept them; judges have none, so
        # their seconds are the measured call time.
        bound = max(member_seconds) + judge_seconds
        rows.append({"wall": wall, "slowest": max(member_seconds), "judge": judge_seconds,
                     "sum": sum(member_seconds) + judge_seconds, "ratio": wall / bound,
                     "overhead_ms": 1000 * (wall - bound), "tie": details["judge_called"]})
    ratios = [r["ratio"] for r in rows]
    return {
        "facts": len(rows),
        "ties": sum(r["tie"] for r in rows),
        "mean_wall_s": round(statistics.mean(r["wall"] for r in rows), 4),
        "mean_slowest_member_s": round(statistics.mean(r["slowest"] for r in rows), 4),
        "mean_sum_of_members_s": round(statistics.mean(r["sum"] for r in rows), 4),
        "ratio_to_slowest_plus_judge": {
            "median": round(statistics.median(ratios), 4),
            "p90": round(percentile(ratios, 0.9), 4),
            "max": round(max(ratios), 4),
            "aggregate": round(sum(r["wall"] for r in rows)
                               / sum(r["slowest"] + r["judge"] for r in rows), 4),
        },
        "overhead_ms": {"median": round(statistics.median(r["overhead_ms"] for r in rows), 2),
                        "p90": round(percentile([r["overhead_ms"] for r in rows], 0.9), 2)},
        "speedup_vs_sequential_members": round(
            sum(r["sum"] for r in rows) / sum(r["wall"] for r in rows), 2),
        "goal": f"aggregate <= {GOAL_RATIO} x (slowest + judge)",
        "goal_met": sum(r["wall"] for r in rows)
        <= GOAL_RATIO * sum(r["slowest"] + r["judge"] for r in rows),
    }


async def throughput(facts: list[Fact], method: str, judge: str, latency_scale: float,
                     concurrency: int, data: str | None) -> dict[str, Any]:
    """Run a consensus batch through the Python API over ``facts``; report facts per second."""
    settings = {"replay_latency": latency_scale}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = await kgcheck.arun(facts=facts, strategy=method, consensus=MEMBERS,
                                    judge=judge, data=data, settings=settings, out=Path(tmp),
                                    concurrency=concurrency)
        seconds = time.perf_counter() - started
    out = {"concurrency": concurrency, "replay_latency": latency_scale, "facts": len(facts),
           "seconds": round(seconds, 3), "facts_per_second": round(len(facts) / seconds, 2),
           "errors": result.summary["errors"], "judge_calls": result.summary["judge_calls"]}
    if latency_scale:
        # A verdict's seconds are its critical path: the slowest member plus the judge.
        per_fact = latency_scale * statistics.mean(r["seconds"] for r in result.records)
        out["ideal_facts_per_second"] = round(concurrency / per_fact, 2)
        out["share_of_ideal"] = round(out["facts_per_second"] / out["ideal_facts_per_second"], 3)
    return out


async def main() -> None:
    """Measure and print the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="factbench")
    parser.add_argument("--method", default="dka")
    parser.add_argument("--facts", type=int, default=48, help="facts in the latency sample")
    parser.add_argument("--throughput-facts", type=int, default=96)
    parser.add_argument("--data", default=None)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    data_dir = str(resolve_data_dir(args.data))
    strategy = kgcheck.strategy(args.method)
    every = [f for f in kgcheck.load_dataset(args.dataset, args.data) if not f.defect]
    alignment = measured_alignment(every, strategy.replays or "", data_dir)
    judge = resolve_judge("cons-up", MEMBERS, alignment=alignment)
    rng = random.Random(args.seed)
    sample = rng.sample(every, args.facts + args.throughput_facts)
    ctx = ConsensusContext(members=MEMBERS, method=strategy.name, judge=judge or "none",
                           data_dir=args.data or "", replay_latency=1.0)
    graph = build(strategy.name).compile(name="consensus")
    # Warm the recordings' caches so the first fact does not pay for loading files.
    await graph.ainvoke({"fact": sample[0].as_input()},
                        context=ConsensusContext(members=MEMBERS, method=strategy.name,
                                                 judge=judge or "none",
                                                 data_dir=args.data or ""))
    lat = await latency(graph, ctx, sample[: args.facts])
    rest = sample[args.facts:]
    runs = [await throughput(rest, strategy.name, judge or "none", scale, concurrency, args.data)
            for scale, concurrency in ((1.0, 1), (1.0, 8), (0.0, 8))]
    print(json.dumps({
        "benchmark": "consensus",
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "dataset": every[0].dataset, "method": strategy.label, "members": MEMBERS,
        "judge": judge, "replay_latency": 1.0,
        "latency": lat,
        "throughput": runs,
    }, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
