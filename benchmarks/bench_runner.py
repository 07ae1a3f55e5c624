"""Runner benchmark: what the graph and the runner add per fact, and throughput under latency.

1. Overhead: the DKA graph with ``replay:<model>`` at zero latency against calling the same
   ReplayChatModel directly with the same call metadata; and the batch runner (verdicts
   written, progress off) against the bare graph. Goal: graph <= 2 ms per fact over the
   model call.
2. Throughput: the runner with the recorded response times slept (``replay_latency=1.0``)
   at several concurrencies, against the ideal ``concurrency / mean latency``.
   Goal: >= 0.9 x ideal.

Prints one JSON document. ``--profile`` adds a pyinstrument text profile of the graph loop
(pip install pyinstrument) on stderr.

    python benchmarks/bench_runner.py [--dataset yago] [--facts 256] [--data DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

import kgcheck
from kgcheck.data.facts import Fact
from kgcheck.data.recordings import has_recordings, lookup
from kgcheck.data.upstream import resolve_data_dir
from kgcheck.graphs.calls import call_config
from kgcheck.graphs.context import Context
from kgcheck.graphs.prompting import fill_prompt
from kgcheck.graphs.strategies.dka import PROMPT_FIELDS

STRATEGY = "dka"
METHOD = kgcheck.strategy(STRATEGY).replays or ""


def sample_facts(dataset: str, data: str | None, model: str, n: int, seed: int) -> list[Fact]:
    """Pick ``n`` facts with a recorded answer of ``model``, reproducibly."""
    data_dir = str(resolve_data_dir(data))
    facts = [f for f in kgcheck.load_dataset(dataset, data) if not f.defect]
    rng = random.Random(seed)
    rng.shuffle(facts)
    chosen = []
    for fact in facts:
        try:
            lookup(data_dir, model, fact.dataset, METHOD, fact.id)
        except LookupError:
            continue
        chosen.append(fact)
        if len(chosen) == n:
            break
    return chosen


class Clock:
    """Wall and CPU seconds (all threads of the process) of a block."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


async def time_direct(ctx: Context, facts: list[Fact], messages: dict[str, list]) -> Clock:
    """Time calling the model once per fact, in sequence, with the graph's metadata."""
    model = ctx.chat_model()
    with Clock() as clock:
        for fact in facts:
            await model.ainvoke(messages[fact.id], config=call_config(fact, ctx))
    return clock


async def time_graph(compiled: Any, ctx: Context, facts: list[Fact]) -> Clock:
    """Time running the DKA graph once per fact, in sequence."""
    with Clock() as clock:
        for fact in facts:
            out = await compiled.ainvoke({"fact": fact.as_input()}, context=ctx,
                                         config={"recursion_limit": 50})
            if out["verdict"].get("error"):
                raise RuntimeError(out["verdict"]["error"])
    return clock


async def time_runner(ctx: Context, facts: list[Fact], concurrency: int,
                      label: str) -> tuple[Clock, dict[str, Any]]:
    """Time a batch run through the Python API (``kgcheck.arun``: fresh folder, no bar)."""
    settings = {"data_dir": ctx.data_dir, "replay_latency": ctx.replay_latency}
    with tempfile.TemporaryDirectory(prefix=f"bench-{label}-") as tmp, Clock() as clock:
        result = await kgcheck.arun(facts=facts, strategy=STRATEGY, model=ctx.model,
                                    out=Path(tmp), concurrency=concurrency, settings=settings)
    if result.summary["errors"]:
        raise RuntimeError(f"{result.summary['errors']} facts failed in the {label} run")
    return clock, result.summary


def best(clocks: list[Clock], n: int) -> tuple[float, float]:
    """Milliseconds per fact (wall, CPU) of the fastest repeat: the least disturbed one."""
    return (min(c.wall for c in clocks) / n * 1000, min(c.cpu for c in clocks) / n * 1000)


async def overhead(args: argparse.Namespace, facts: list[Fact]) -> dict[str, Any]:
    """Measure graph and runner cost per fact over the bare model call."""
    strategy = kgcheck.strategy(STRATEGY)
    ctx = strategy.make_context(model=f"replay:{args.model}", data_dir=args.data or "")
    messages = {f.id: [HumanMessage(fill_prompt(ctx.prompt, PROMPT_FIELDS, f))] for f in facts}
    compiled = strategy.compile()
    # Warm the recording caches and the graph's first-run set-up.
    await time_direct(ctx, facts, messages)
    await time_graph(compiled, ctx, facts)
    direct, graph, runner = [], [], []
    for _ in range(args.repeats):
        direct.append(await time_direct(ctx, facts, messages))
        graph.append(await time_graph(compiled, ctx, facts))
        runner.append((await time_runner(ctx, facts, 1, "overhead"))[0])
    n = len(facts)
    (dw, dc), (gw, gc), (rw, _) = best(direct, n), best(graph, n), best(runner, n)
    result = {
        "facts": n,
        "repeats": args.repeats,
        "ms_per_fact_model_call": round(dw, 3),
        "ms_per_fact_graph": round(gw, 3),
        "ms_per_fact_runner_c1": round(rw, 3),
        "graph_overhead_ms_per_fact": round(gw - dw, 3),
        "runner_overhead_ms_per_fact_over_graph": round(rw - gw, 3),
        # CPU time counts every thread of the process and ignores time spent waiting for
        # a core, so it stays meaningful on a busy machine.
        "cpu_ms_per_fact_model_call": round(dc, 3),
        "cpu_ms_per_fact_graph": round(gc, 3),
        "cpu_graph_overhead_ms_per_fact": round(gc - dc, 3),
        "goal_graph_overhead_ms": 2.0,
    }
    result["meets_goal"] = result["graph_overhead_ms_per_fact"] <= 2.0
    if args.profile:
        await profile_graph(compiled, ctx, facts)
    return result


async def profile_graph(compiled: Any, ctx: Context, facts: list[Fact]) -> None:
    """Print where the graph loop spends its time (pyinstrument), to stderr."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        print("--profile needs pyinstrument: pip install pyinstrument", file=sys.stderr)
        return
    profiler = Profiler(interval=0.0002, async_mode="enabled")
    with profiler:
        await time_graph(compiled, ctx, facts)
    print(profiler.output_text(unicode=False, color=False, show_all=False), file=sys.stderr)


async def throughput(args: argparse.Namespace, facts: list[Fact]) -> list[dict[str, Any]]:
    """Run the runner with real recorded latency at each concurrency."""
    ctx = kgcheck.strategy(STRATEGY).make_context(model=f"replay:{args.model}",
                                                  data_dir=args.data or "", replay_latency=1.0)
    data_dir = str(resolve_data_dir(args.data))
    rows = []
    for concurrency in args.concurrency:
        # Enough facts for several rounds of every worker, within the sample.
        n = min(len(facts), max(args.min_facts, concurrency * args.rounds))
        chosen = facts[:n]
        latencies = [lookup(data_dir, args.model, f.dataset, METHOD, f.id)["seconds"] or 0.0
                     for f in chosen]
        mean = statistics.fmean(latencies)
        clock, summary = await time_runner(ctx, chosen, concurrency, f"c{concurrency}")
        seconds = clock.wall
        achieved = n / seconds
        ideal = concurrency / mean
        # A last round with fewer facts than workers cannot reach the ideal; say so apart.
        bound = n / max(sum(latencies) / concurrency, max(latencies))
        rows.append({
            "concurrency": concurrency,
            "facts": n,
            "mean_latency_s": round(mean, 4),
            "seconds": round(seconds, 3),
            "cpu_seconds": round(clock.cpu, 3),
            "facts_per_second": round(achieved, 2),
            "ideal_facts_per_second": round(ideal, 2),
            "ratio_to_ideal": round(achieved / ideal, 3),
            "ratio_to_schedule_bound": round(achieved / bound, 3),
            "f1_true": summary["f1_true"],
            "meets_goal": achieved >= 0.9 * ideal,
        })
    return rows


def main() -> None:
    """Parse options, run both measurements, print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="yago")
    parser.add_argument("--model", default="gemma2:9b", help="recorded model to replay")
    parser.add_argument("--data", default=None, help="FactCheck data, upstream layout")
    parser.add_argument("--facts", type=int, default=256, help="sample size (overhead part)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=8,
                        help="facts per worker in the throughput part")
    parser.add_argument("--min-facts", type=int, default=48)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--profile", action="store_true", help="pyinstrument profile to stderr")
    args = parser.parse_args()
    if not has_recordings(args.data, args.model, args.dataset, METHOD):
        parser.error(f"no recorded {METHOD} answers of {args.model} for {args.dataset}")
    facts = sample_facts(args.dataset, args.data, args.model, args.facts, args.seed)
    report: dict[str, Any] = {
        "benchmark": "runner",
        "dataset": facts[0].dataset,
        "model": f"replay:{args.model}",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        # Other work on the machine slows every figure here: keep the load with them.
        "loadavg_1m_before": round(os.getloadavg()[0], 2),
        "overhead": asyncio.run(overhead(args, facts)),
    }
    if not args.skip_throughput:
        report["throughput"] = asyncio.run(throughput(args, facts))
    report["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
