"""Reading an input file: one pass in the driver against parallel shards on Ray.

Writes an N-Triples file of ``--triples`` facts (one name per tenth subject) and reads it
with names, as a run's plan does: in one pass (``RdfReader``), in shards one after another
in this process (the cost of cutting and merging), the driver's part alone (shards parsed
beforehand: the ceiling with CPUs to spare), and in shards parsed on a local Ray cluster
of 1 and of 2 CPUs (two shard tasks per CPU at a time). Each figure is facts/s, with its
ratio to one pass; Ray's start-up is left out (the cluster starts before the clock). The
facts read are checked to be the one pass's, in its order. Last, the memory the facts of
a run take in the driver (``tracemalloc`` over a one-pass read of 100,000 of them).

    python benchmarks/bench_shards.py [--triples 400000] [--shard-mb 4]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from kgcheck.data.facts import Fact  # noqa: E402
from kgcheck.data.rdf import RdfReader  # noqa: E402
from kgcheck.data.shards import (  # noqa: E402
    Shard,
    ShardedReader,
    ShardFacts,
    ShardMap,
    cut_shards,
    map_in_process,
)

LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"


def write_triples(path: Path, count: int) -> None:
    with path.open("w") as fh:
        for n in range(count):
            fh.write(f"<http://kg.example/e{n}> <http://kg.example/p{n % 50}> "
                     f"<http://kg.example/e{(n * 7919) % count}> .\n")
            if n % 10 == 0:
                fh.write(f'<http://kg.example/e{n}> {LABEL} "Entity {n}"@en .\n')


def timed(read: Callable[[], list[Fact]]) -> tuple[float, list[Fact]]:
    started = time.perf_counter()
    facts = read()
    return time.perf_counter() - started, facts


def one_pass(path: Path) -> list[Fact]:
    reader = RdfReader(path, "kg")
    return reader.named(list(reader))


def in_shards(path: Path, shard_map: ShardMap, shard_bytes: int) -> list[Fact]:
    reader = RdfReader(path, "kg")
    return reader.named(list(ShardedReader(path, "kg", shard_map, shard_bytes=shard_bytes,
                                           reader=reader)))


def _replayed(pairs: Iterable[tuple[Shard, bytes]],
              parsed: list[ShardFacts]) -> Iterator[ShardFacts]:
    for _pair, part in zip(pairs, parsed, strict=True):
        yield part


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--triples", type=int, default=400_000)
    parser.add_argument("--shard-mb", type=float, default=4.0)
    args = parser.parse_args()
    shard_bytes = int(args.shard_mb * 1024 * 1024)
    report: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "triples": args.triples, "shard_mb": args.shard_mb, "reads": {}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kg.nt"
        write_triples(path, args.triples)
        report["file_mb"] = round(path.stat().st_size / 1024 / 1024, 1)
        seconds, reference = timed(lambda: one_pass(path))
        base = len(reference) / seconds
        report["facts"] = len(reference)
        reads = report["reads"]
        reads["one_pass"] = {"seconds": round(seconds, 2), "facts_per_second": round(base)}

        def note(label: str, seconds: float, facts: list[Fact], **extra: Any) -> None:
            rate = len(facts) / seconds
            reads[label] = {"seconds": round(seconds, 2), "facts_per_second": round(rate),
                            "ratio_to_one_pass": round(rate / base, 2),
                            "same_facts": facts == reference, **extra}

        seconds, facts = timed(lambda: in_shards(path, map_in_process, shard_bytes))
        note("shards_in_process", seconds, facts)
        # The driver's part alone (cutting, reading the bytes, merging, naming) with shards
        # parsed beforehand: the ceiling when the cluster has CPUs to spare for the parsing.
        parsed = list(map_in_process(cut_shards(path, "kg", shard_bytes)))
        seconds, facts = timed(lambda: in_shards(path, lambda pairs: _replayed(pairs, parsed),
                                                 shard_bytes))
        note("driver_part_alone", seconds, facts)
        from kgcheck.runs.ray_engine import RayEngine

        for cpus in (1, 2):
            engine = RayEngine(workers=1, num_cpus=cpus, shard_bytes=shard_bytes)
            try:
                in_shards(path, engine.map_shards, shard_bytes)  # warm the task workers up
                seconds, facts = timed(lambda e=engine: in_shards(path, e.map_shards,
                                                                   shard_bytes))
                note(f"ray_{cpus}_cpus", seconds, facts, cpus=cpus)
            finally:
                engine.close()
        report["driver_bytes_per_fact"] = bytes_per_fact(Path(tmp) / "small.nt", 100_000)
    print(json.dumps(report, indent=1))


def bytes_per_fact(path: Path, count: int) -> int:
    """Measure the memory that read facts (with their names) hold, per fact."""
    import gc
    import tracemalloc

    write_triples(path, count)
    gc.collect()
    tracemalloc.start()
    try:
        facts = one_pass(path)
        gc.collect()
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return round(held / len(facts))


if __name__ == "__main__":
    main()
