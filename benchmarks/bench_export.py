"""Export and estimate benchmark: how fast a run's verdicts leave in each format.

Writes a synthetic run folder of N verdict records (triples of a generated KG, with the
fields ``kgcheck run`` writes), then times ``kgcheck.export`` to CSV, JSONL, N-Triples and
Turtle (annotated) and N-Triples of the false triples (plain), and checks that each RDF
file parses back (pyoxigraph). Also times the dry-run estimate of a DKA run over N facts.

Prints one JSON document.

    python benchmarks/bench_export.py [--facts 50000]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import tempfile
import time
from pathlib import Path

import pyoxigraph as ox

import kgcheck
from kgcheck.data.facts import Fact
from kgcheck.graphs.registry import get_strategy
from kgcheck.runs.dry_run import estimate


def write_run(folder: Path, n: int) -> None:
    """Write run.json and n verdict records (every third judged false)."""
    (folder / "run.json").write_text(json.dumps({
        "dataset": "bench", "strategy": "dka", "method": "DKA", "models": ["ollama:gemma2:9b"],
        "judge": None, "source": "generated", "run_id": "bench0000001", "settings": {}}))
    with (folder / "verdicts.jsonl").open("w") as fh:
        for i in range(n):
            label = "F" if i % 3 == 0 else "T"
            fh.write(json.dumps({
                "fact_id": str(i), "label": label, "method": "DKA", "model": "ollama:gemma2:9b",
                "raw": label, "raws": [label], "attempts": 1, "seconds": 0.2, "tokens_in": 40,
                "tokens_out": 1, "error": None, "details": {}, "dataset": "bench",
                "gold": "T" if i % 2 else "F", "run_id": "bench0000001",
                "subject": f"Person_{i}", "predicate": f"rel{i % 20}",
                "object": f"Place_{i % 977}", "checked_at": "2026-12-01T20:00:00Z"}) + "\n")


def main() -> None:
    """Time each export and the estimate; print JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=50_000)
    args = parser.parse_args()
    results: dict[str, object] = {"facts": args.facts, "machine": platform.machine()}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_run(folder, args.facts)
        formats = {}
        for fmt, rdf in (("csv", "annotated"), ("jsonl", "annotated"), ("nt", "annotated"),
                         ("ttl", "annotated"), ("nt", "plain")):
            out = folder / f"out-{rdf}.{fmt}"
            only = "F" if rdf == "plain" else None
            started = time.perf_counter()
            written = kgcheck.export(folder, fmt, out, only=only, rdf=rdf)
            seconds = time.perf_counter() - started
            entry = {"verdicts": written.count, "seconds": round(seconds, 3),
                     "verdicts_per_second": round(written.count / seconds),
                     "bytes": out.stat().st_size}
            if fmt in ("nt", "ttl"):
                kind = ox.RdfFormat.N_TRIPLES if fmt == "nt" else ox.RdfFormat.TURTLE
                entry["triples_parsed_back"] = sum(1 for _ in ox.parse(path=str(out),
                                                                       format=kind))
            formats[f"{fmt}-{rdf}" if fmt in ("nt", "ttl") else fmt] = entry
        results["export"] = formats
    facts = [Fact(id=str(i), dataset="bench", subject=f"Person_{i}", predicate=f"rel{i % 20}",
                  object=f"Place_{i % 977}") for i in range(args.facts)]
    ctx = get_strategy("dka").make_context(model="openai:gpt-4o-mini")
    started = time.perf_counter()
    found = estimate(facts, {"openai:gpt-4o-mini": ctx})
    seconds = time.perf_counter() - started
    results["estimate_dka"] = {"facts": found.facts, "tokens_in": found.tokens_in,
                               "seconds": round(seconds, 3), "tokenizer": found.tokenizer,
                               "cost_in_usd": found.cost_in_usd}
    results["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
