"""kgcheck's own CPU per fact, layer by layer, against a model server that answers at once.

A stub model server (tests/support/stubs: Ollama's or the OpenAI-compatible wire format) runs in
its own process, so the CPU counted here (``time.process_time`` of this process) is the
client's alone. Each layer checks ``--facts`` facts, 16 at once, after a warm-up:

- ``langgraph``: LangGraph's own floor: a graph of DKA's shape (three nodes, two
  routers) whose nodes do nothing, one ``ainvoke`` per fact, no model and no server;
- ``http``: one bare ``httpx.AsyncClient`` POST per fact over the transport model clients
  use, with the kind of request body the provider sends (the floor: connection reuse,
  JSON in and out);
- ``chat_model``: the provider's chat model (``resolve_model``), one ``ainvoke`` per fact;
- ``floor``: the ``langgraph`` layer's graph whose middle node calls the chat model and
  does nothing else: what no DKA graph on LangGraph and a LangChain chat model can go
  below (the call inside a graph costs more than outside it: child callback managers);
- ``graph``: the compiled DKA graph, one ``ainvoke`` per fact with the run's context;
- ``runner``: ``kgcheck.arun`` over the facts into a run folder (records, resume file,
  summary), no cache.

Each layer is measured ``--repeats`` times, each time in a fresh process (the median is
reported), on the event loop kgcheck's entry points use (``kgcheck.event_loop``: uvloop
where installed); ``--loops asyncio,uvloop`` measures each layer on both, interleaved, and
reports the ratio. With ``--before REV`` the same layers of that commit's code (``git archive``,
laid out as the installed namespace) are measured too, interleaved with this tree's, so
the before/after ratio comes from one run. With ``--profile``, the top functions by own
time (cProfile) of the ``runner`` layer, before and after. Goal: at most 2.5 ms per fact
for ``runner`` (400 facts/s per core). ``langgraph`` plus ``chat_model`` is the floor of
``graph`` that kgcheck's own code cannot go below; ``floor`` measures that floor directly.
The machine is noisy: compare within one run.

    python benchmarks/bench_client_cpu.py [--facts 2000] [--provider ollama|openai]
        [--before REV] [--repeats 3] [--profile] [--loops kgcheck|asyncio,uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import itertools
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, NotRequired, TypeVar

from typing_extensions import TypedDict

from kgcheck.data.facts import Fact

ROOT = Path(__file__).resolve().parent.parent

CONCURRENCY = 16
WARM_UP = 50
RUNS = itertools.count()  # every runner job writes a folder of its own
MODELS = {"ollama": "ollama:bench", "openai": "openai-compatible:bench"}
T = TypeVar("T")


def make_facts(count: int) -> list[Fact]:
    """Return ``count`` distinct facts with readable terms."""
    return [Fact(id=f"f{i}", subject=f"Entity {i}", predicate="bornIn",
                 object=f"City {i % 97}", dataset="bench") for i in range(count)]


async def gather_bounded(items: list[Any], one: Callable[[Any], Awaitable[Any]]) -> None:
    """Run ``one`` over ``items``, ``CONCURRENCY`` at once."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def bounded(item: Any) -> None:
        async with gate:
            await one(item)

    await asyncio.gather(*(bounded(item) for item in items))


def run_on(loop: str, main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on ``loop``: ``kgcheck`` (the loop a run uses), ``asyncio`` or ``uvloop``."""
    if loop == "kgcheck":
        try:
            from kgcheck.event_loop import run
        except ImportError:  # a tree from before kgcheck chose its loop: asyncio's
            return asyncio.run(main)
        return run(main)
    factory = None
    if loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def cpu_of(job: Callable[[list[Fact]], Awaitable[Any]], facts: list[Fact], loop: str) -> float:
    """Run ``job`` on a warm-up batch, then on ``facts``, on ``loop``; return CPU ms per fact."""
    async def both() -> float:
        await job(make_facts(WARM_UP))
        cpu = time.process_time()
        await job(facts)
        return time.process_time() - cpu

    return 1000 * run_on(loop, both()) / len(facts)


def http_layer(kind: str, url: str) -> Callable[[list[Fact]], Awaitable[None]]:
    """One bare POST per fact with the provider's request body."""
    import httpx

    from kgcheck.providers.transports import capped_transport

    async def job(facts: list[Fact]) -> None:
        async with httpx.AsyncClient(base_url=url,
                                     transport=capped_transport(asynchronous=True)) as client:
            async def one(fact: Fact) -> None:
                messages = [{"role": "user", "content": f"Is it true that {fact.subject} "
                             f"{fact.predicate} {fact.object}? Answer T or F."}]
                if kind == "ollama":
                    body = {"model": "bench", "messages": messages, "stream": False,
                            "options": {"temperature": 0.75, "top_p": 0.9, "top_k": 40}}
                    reply = await client.post("/api/chat", json=body)
                else:
                    body = {"model": "bench", "messages": messages, "temperature": 0.75,
                            "top_p": 0.9, "max_tokens": 512}
                    reply = await client.post("chat/completions", json=body)  # the URL ends in /v1
                reply.raise_for_status()
                reply.json()

            await gather_bounded(facts, one)

    return job


def chat_layer(model: str, url: str) -> Callable[[list[Fact]], Awaitable[None]]:
    """One ``ainvoke`` of the provider's chat model per fact."""
    from langchain_core.messages import HumanMessage

    from kgcheck.providers.resolve import resolve_model
    from kgcheck.providers.settings import ModelSettings

    settings = ModelSettings(base_url=url)

    async def job(facts: list[Fact]) -> None:
        chat = resolve_model(model, settings)

        async def one(fact: Fact) -> None:
            await chat.ainvoke([HumanMessage(f"Is it true that {fact.subject} "
                                             f"{fact.predicate} {fact.object}?")])

        await gather_bounded(facts, one)

    return job


class State(TypedDict):
    """The state of the ``langgraph`` layer's graph: DKA's keys."""

    fact: Any
    messages: NotRequired[list[str]]
    verdict: NotRequired[str]


def langgraph_layer(chat_model: Callable[[], Any] | None = None
                    ) -> Callable[[list[Fact]], Awaitable[None]]:
    """One ``ainvoke`` per fact of a graph of DKA's shape whose nodes do nothing.

    With ``chat_model`` (it makes a chat model, on the job's event loop), the middle node
    asks that model about the fact and does nothing else with the answer.
    """
    from langchain_core.messages import HumanMessage
    from langgraph.graph import END, START, StateGraph

    from kgcheck.graphs.routing import then, unless_decided

    chat: Any = None

    async def build_prompt(state: State) -> dict[str, Any]:
        return {"messages": ["prompt"]}

    async def ask_model(state: State) -> dict[str, Any]:
        if chat is not None:
            fact = state["fact"]
            await chat.ainvoke([HumanMessage(f"Is it true that {fact['subject']} "
                                             f"{fact['predicate']} {fact['object']}?")])
        return {"messages": ["reply"]}

    async def decide(state: State) -> dict[str, Any]:
        return {"verdict": "T"}

    builder = StateGraph(State)
    for node in (build_prompt, ask_model, decide):
        builder.add_node(node.__name__, node)
    builder.add_edge(START, "build_prompt")
    builder.add_conditional_edges("build_prompt", unless_decided, then("ask_model"))
    builder.add_conditional_edges("ask_model", unless_decided, then("decide"))
    builder.add_edge("decide", END)
    graph = builder.compile()

    async def job(facts: list[Fact]) -> None:
        nonlocal chat
        if chat_model is not None:
            chat = chat_model()  # as the chat_model layer does: a client per event loop

        async def one(fact: Fact) -> None:
            await graph.ainvoke({"fact": fact.as_input()})

        await gather_bounded(facts, one)

    return job


def graph_layer(model: str, url: str) -> Callable[[list[Fact]], Awaitable[None]]:
    """One ``ainvoke`` of the compiled DKA graph per fact."""
    from kgcheck.graphs.registry import compile_graph, get_strategy

    ctx = get_strategy("dka").make_context(model=model, base_url=url)
    graph = compile_graph(("strategy", "dka"))
    config = {"recursion_limit": 25, "metadata": {"kgcheck_run_id": "bench"}}

    async def job(facts: list[Fact]) -> None:
        async def one(fact: Fact) -> None:
            await graph.ainvoke({"fact": fact.as_input()}, context=ctx, config=config)

        await gather_bounded(facts, one)

    return job


def runner_layer(model: str, url: str, folder: Path) -> Callable[[list[Fact]], Awaitable[None]]:
    """``kgcheck.arun`` over the facts into a fresh run folder."""
    import kgcheck

    async def job(facts: list[Fact]) -> None:
        await kgcheck.arun(facts, strategy="dka", model=model, base_url=url,
                           out=folder / f"run{next(RUNS)}", cache=False,
                           concurrency=CONCURRENCY)

    return job


def profile_of(job: Callable[[list[Fact]], Awaitable[Any]], facts: list[Fact], top: int,
               loop: str) -> list[dict[str, Any]]:
    """Return the ``top`` functions by own time while ``job`` checks ``facts`` on ``loop``."""
    profiler = cProfile.Profile()

    async def profiled() -> None:
        await job(make_facts(WARM_UP))
        profiler.enable()
        await job(facts)
        profiler.disable()

    run_on(loop, profiled())
    stats = pstats.Stats(profiler, stream=io.StringIO())
    total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])  # type: ignore[attr-defined]
    return [{"function": f"{Path(path).name}:{line}({name})",
             "own_ms_per_fact": round(1000 * own / len(facts), 3),
             "share": round(own / total, 3), "calls_per_fact": round(calls / len(facts), 1)}
            for (path, line, name), (_, calls, own, _cum, _) in rows[:top]]


def layer_job(name: str, provider: str, url: str, folder: Path
              ) -> Callable[[list[Fact]], Awaitable[Any]]:
    """Return the job of layer ``name``."""
    model = MODELS[provider]
    if name == "langgraph":
        return langgraph_layer()
    if name == "floor":
        from kgcheck.providers.resolve import resolve_model
        from kgcheck.providers.settings import ModelSettings

        return langgraph_layer(lambda: resolve_model(model, ModelSettings(base_url=url)))
    if name == "http":
        return http_layer(provider, url)
    if name == "chat_model":
        return chat_layer(model, url)
    if name == "graph":
        return graph_layer(model, url)
    return runner_layer(model, url, folder)


def run_child(tree: Path | None, layer: str, args: argparse.Namespace, url: str, loop: str,
              *extra: str) -> str:
    """Run one layer on ``loop`` in a fresh process over ``tree`` (None: this tree).

    Returns:
        The child's last line of output.

    """
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", layer, "--url", url,
               "--provider", args.provider, "--facts", str(args.facts), "--loop", loop, *extra]
    done = subprocess.run(command, env=env, cwd=tree or ROOT, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"layer {layer} failed:\n{done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def summary_of(times: list[float], facts: int) -> dict[str, Any]:
    """The median CPU per fact of repeated measurements, and each one."""
    median = statistics.median(times)
    return {"cpu_ms_per_fact": round(median, 3), "facts_per_cpu_second": round(1000 / median, 1),
            "cpu_ms_per_fact_each": [round(t, 3) for t in times]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=2000)
    parser.add_argument("--provider", choices=sorted(MODELS), default="ollama")
    parser.add_argument("--layers", default="langgraph,http,chat_model,floor,graph,runner")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", default="", help="a commit to measure beside this tree")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--loops", default="kgcheck",
                        help="event loops, comma-separated: kgcheck (the one a run uses), "
                        "asyncio, uvloop")
    parser.add_argument("--loop", default="kgcheck", help=argparse.SUPPRESS)
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one measurement (or profile), in this process
        with tempfile.TemporaryDirectory(prefix="kgcheck-cpu-") as folder:
            job = layer_job(args.child, args.provider, args.url, Path(folder))
            facts = make_facts(args.facts)
            print(json.dumps(profile_of(job, facts, args.top, args.loop)) if args.profile
                  else cpu_of(job, facts, args.loop))
        return
    sys.path.insert(0, str(ROOT))  # tests/: the parent runs this tree only
    from tests.support.stubs.process import start_stub_process

    stub, url = start_stub_process("tests.support.stubs", args.provider, "--answer", "T",
                                   *(["--models", "bench"] if args.provider == "ollama" else []))
    layers = args.layers.split(",")
    try:
        with tempfile.TemporaryDirectory(prefix="kgcheck-cpu-") as folder:
            trees: dict[str, Path | None] = {"after": None}
            if args.before:
                from tests.support.package_tree import commit_tree

                base = Path(folder) / "before"
                base.mkdir()
                trees = {"before": commit_tree(args.before, base), **trees}
            loops = args.loops.split(",")
            # One measured variant per tree and loop, named "after", or "after/uvloop".
            variants = {(key if len(loops) == 1 else f"{key}/{loop}"): (tree, loop)
                        for key, tree in trees.items() for loop in loops}
            times: dict[str, dict[str, list[float]]] = {k: {n: [] for n in layers}
                                                        for k in variants}
            for _ in range(args.repeats):
                for layer in layers:
                    for key, (tree, loop) in variants.items():  # interleaved: the same noise
                        times[key][layer].append(float(run_child(tree, layer, args, url, loop)))
            result: dict[str, Any] = {
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "load_average": os.getloadavg()},
                "provider": args.provider, "facts": args.facts, "concurrency": CONCURRENCY,
                "repeats": args.repeats, "loops": loops, "goal_cpu_ms_per_fact": 2.5,
                **{key: {layer: summary_of(times[key][layer], args.facts) for layer in layers}
                   for key in variants},
            }

            def ratio(slow: str, fast: str) -> dict[str, float]:
                return {layer: round(statistics.median(times[slow][layer])
                                     / statistics.median(times[fast][layer]), 2)
                        for layer in layers}

            for loop in loops:
                suffix = "" if len(loops) == 1 else f"/{loop}"
                if args.before:
                    result[f"before_over_after{suffix}"] = ratio(f"before{suffix}",
                                                                 f"after{suffix}")
            for loop in loops[1:]:
                result[f"{loops[0]}_over_{loop}"] = ratio(f"after/{loops[0]}", f"after/{loop}")
            if args.profile:
                result["profile_runner"] = {
                    key: json.loads(run_child(tree, "runner", args, url, loop, "--profile",
                                              "--top", str(args.top)))
                    for key, (tree, loop) in variants.items()}
    finally:
        stub.terminate()
        stub.wait()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
