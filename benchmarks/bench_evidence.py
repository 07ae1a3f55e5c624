"""Evidence retrieval for any KG: per-fact cost cold (simulated network latency) and warm.

A SearxNG-format API and result pages are served on 127.0.0.1 by the test stub, each
request delayed by ``--latency`` seconds (a network's round trip). For ``--facts`` own
triples, RAG's evidence step runs with ``sources=searxng,web``:

1. cold: every search and page is fetched (through the guard, robots.txt, caps), facts
   ``--concurrency`` at a time;
2. warm: the same facts again, everything read from the cache in the corpus store: the
   cache hit rate (goal 100 %) and the network requests made (goal 0);
3. warm retrieval: the whole retrieval of a fact (cache, search, document ranking, chunk
   selection with the offline embedder), as RAG runs it before the model is asked.

Prints one JSON document.

    python benchmarks/bench_evidence.py [--facts 20] [--latency 0.05] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the test stubs

from kgcheck.data.facts import Fact  # noqa: E402
from kgcheck.graphs.strategies.rag import RAGContext, rule_sentence, template_questions  # noqa: E402
from kgcheck.retrievers.evidence import gather_evidence, retriever_for  # noqa: E402
from kgcheck.retrievers.sources.net import NetStats  # noqa: E402
from tests.support.stubs.web import Page, WebStub  # noqa: E402

WORDS = ("river city author painter composer island mountain novel prize school").split()


def facts_and_web(n: int) -> tuple[list[Fact], dict[str, list[dict[str, str]]], dict[str, Page]]:
    """Write n facts, three result pages per fact, and the search results that list them."""
    facts, results, pages = [], {}, {}
    for i in range(n):
        subject, obj = f"Person{i} Example", f"Place{i} {WORDS[i % len(WORDS)].title()}"
        fact = Fact(id=str(i), dataset="bench", subject=subject, predicate="born in", object=obj)
        facts.append(fact)
        listed = []
        for j in range(3):
            path = f"/f{i}/p{j}.html"
            body = "".join(f"<p>{subject} was born in {obj} in {1900 + j}. It is a "
                           f"{WORDS[(i + k) % len(WORDS)]} with a long history, line {k}.</p>"
                           for k in range(40))
            pages[path] = Page(f"<html><head><title>{subject} {j}</title></head><body>"
                               f"<article>{body}</article></body></html>".encode())
            listed.append({"url": "{base}" + path, "title": f"{subject} {j}",
                           "content": f"{subject} and {obj}."})
        for query in queries(fact):
            results[query] = listed
    return facts, results, pages


def queries(fact: Fact) -> list[str]:
    """The queries RAG searches: the sentence and template questions (no model needed)."""
    sentence = rule_sentence(fact)
    return [sentence, *template_questions(fact, sentence)[:3]]


async def gather_all(ctx: RAGContext, facts: list[Fact], concurrency: int) -> dict[str, Any]:
    """Gather every fact's evidence; return per-fact seconds and cache figures."""
    limit = asyncio.Semaphore(concurrency)
    seconds: list[float] = []
    asked = hits = 0

    async def one(fact: Fact) -> None:
        nonlocal asked, hits
        async with limit:
            started = time.perf_counter()
            gathered = await gather_evidence(ctx, fact, queries(fact))
            seconds.append(time.perf_counter() - started)
            asked += gathered.asked
            hits += gathered.cache_hits
            assert gathered.documents, gathered.reason()

    started = time.perf_counter()
    await asyncio.gather(*(one(f) for f in facts))
    wall = time.perf_counter() - started
    return {"wall_s": round(wall, 3), "per_fact_ms_median": round(statistics.median(seconds)
                                                                  * 1000, 2),
            "per_fact_ms_max": round(max(seconds) * 1000, 2), "requests": asked,
            "cache_hits": hits, "cache_hit_rate": round(hits / asked, 4) if asked else None}


async def retrieval(ctx: RAGContext, facts: list[Fact]) -> dict[str, Any]:
    """Time the whole warm retrieval of each fact, as RAG runs it."""
    seconds = []
    for fact in facts:
        started = time.perf_counter()
        await gather_evidence(ctx, fact, queries(fact))
        retriever = retriever_for(ctx, fact.dataset)
        hits = retriever.search_many(queries(fact), fact.dataset, fact.id, ctx.search_k)
        doc_ids = [h.doc_id for h in hits[0][:ctx.k_d]]
        chunks = retriever.chunks(rule_sentence(fact), fact.dataset, fact.id, doc_ids)
        seconds.append(time.perf_counter() - started)
        assert chunks
    return {"per_fact_ms_median": round(statistics.median(seconds) * 1000, 2),
            "per_fact_ms_max": round(max(seconds) * 1000, 2)}


async def main() -> None:
    """Run the three measurements and print them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.05,
                        help="seconds each request to the stub web waits (default 0.05)")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    facts, results, pages = facts_and_web(args.facts)
    with tempfile.TemporaryDirectory() as tmp, WebStub(results=results, pages=pages,
                                                       latency=args.latency) as web:
        ctx = RAGContext(model="replay:gemma2:9b", sources="searxng,web", searxng_url=web.url,
                         allow_private_urls="127.0.0.0/8", host_interval=0.0,
                         evidence_store=str(Path(tmp) / "evidence.sqlite"), index="memory",
                         source_results=3)
        sent = NetStats.requests
        cold = await gather_all(ctx, facts, args.concurrency)
        cold["network_requests"] = NetStats.requests - sent
        seen, sent = len(web.requests), NetStats.requests
        warm = await gather_all(ctx, facts, args.concurrency)
        warm["network_requests"] = NetStats.requests - sent
        warm["stub_requests"] = len(web.requests) - seen
        warm_retrieval = await retrieval(ctx, facts)
    print(json.dumps({
        "benchmark": "evidence", "facts": args.facts, "latency_s": args.latency,
        "concurrency": args.concurrency, "pages_per_fact": 3, "queries_per_fact": 4,
        "cold": cold, "warm": warm, "warm_retrieval": warm_retrieval,
        "goal": {"warm_cache_hit_rate": 1.0, "warm_network_requests": 0},
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
    }, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
