"""A gzip bomb against the evidence client: peak memory with the cap, and without it.

The web stub on 127.0.0.1 serves ``--mb`` MB of zeros gzip-compressed (about 1/1000 of
that on the wire). Measured in one run, each as the peak of Python allocations
(tracemalloc) and the process's peak RSS growth:

1. capped: ``Net.get`` as the web source uses it (decoded as it arrives, cut at
   ``--cap`` bytes);
2. uncapped: httpx's own ``Response.aread()``, which decodes the whole body.

Prints one JSON document.

    python benchmarks/bench_http_bodies.py [--mb 300] [--cap 2000000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import resource
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the test stubs

import httpx  # noqa: E402

from kgcheck.retrievers.sources.net import Net, NetPolicy  # noqa: E402
from tests.support.stubs.bodies import gzip_bomb  # noqa: E402
from tests.support.stubs.web import Page, WebStub  # noqa: E402


def rss_mb() -> float:
    """Return the process's peak RSS so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(work: Any) -> dict[str, Any]:
    """Run the coroutine ``work`` and report its result, time and memory peaks."""
    before = rss_mb()
    tracemalloc.start()
    started = time.perf_counter()
    result = asyncio.run(work)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"decoded_bytes": result, "seconds": round(seconds, 3),
            "peak_python_mb": round(peak / 2**20, 1),
            "peak_rss_growth_mb": round(rss_mb() - before, 1)}


async def capped(url: str, cap: int) -> int:
    """Fetch through the evidence client (decoded, capped)."""
    policy = NetPolicy(allow_private="127.0.0.0/8", max_bytes=cap, host_interval=0.0,
                       timeout=60.0)
    async with Net(policy) as net:
        response = await net.get(url)
    return len(response.body)


async def uncapped(url: str) -> int:
    """Fetch with httpx's own decoding of the whole body."""
    async with httpx.AsyncClient(timeout=60.0, trust_env=False) as client:
        response = await client.get(url)
    return len(response.content)


def main() -> None:
    """Serve the bomb and measure both readers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--cap", type=int, default=2_000_000)
    args = parser.parse_args()
    payload = gzip_bomb(args.mb)
    with WebStub(pages={"/bomb.html": Page(payload, encoded="gzip")}) as web:
        url = f"{web.url}/bomb.html"
        # Capped first: the uncapped read raises the process's peak RSS for good.
        results = {"capped": measure(capped(url, args.cap)), "uncapped": measure(uncapped(url))}
    ratio = results["uncapped"]["peak_python_mb"] / max(results["capped"]["peak_python_mb"], 0.1)
    print(json.dumps({"benchmark": "http_bodies", "python": platform.python_version(),
                      "bomb_decoded_mb": args.mb, "bomb_wire_bytes": len(payload),
                      "cap_bytes": args.cap, **results,
                      "peak_python_ratio_uncapped_to_capped": round(ratio, 1)}, indent=1))


if __name__ == "__main__":
    main()
