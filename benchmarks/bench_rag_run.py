"""Full YAGO RAG run with replay, from an empty index: facts/s and agreement with the study.

Imports the YAGO evidence tarball from ../shared into a temporary store, then runs the RAG
graph over every YAGO fact with replay answers and a fresh Chroma index (every chunk the
run needs is embedded on first use). Prints JSON.

    python benchmarks/bench_rag_run.py [--corpus PATH] [--limit N] [--concurrency 4]
        [--model replay:gemma2:9b]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from rag_corpus import check_corpus, corpus_arg, import_or_fail  # noqa: E402


async def main() -> dict:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--model", default="replay:gemma2:9b")
    parser.add_argument("--retrieval", default="hybrid")
    corpus_arg(parser)
    args = parser.parse_args()
    corpus_path = check_corpus(args.corpus)

    import kgcheck
    from kgcheck.data.upstream import iter_records, open_data, recorded_path
    from kgcheck.graphs.parsing import read_yes_no_json
    from kgcheck.retrievers.evidence import get_retriever

    work = Path(tempfile.mkdtemp(prefix="bench-rag-run-"))
    started = time.perf_counter()
    _, documents = import_or_fail(corpus_path, work / "corpus.sqlite")
    import_seconds = time.perf_counter() - started

    settings = {"corpus": str(work / "corpus.sqlite"), "chroma_path": str(work / "chroma"),
                "retrieval": args.retrieval}
    run_started = time.perf_counter()
    result = await kgcheck.arun(dataset="yago", strategy="rag", model=args.model,
                                limit=args.limit, settings=settings, out=work / "run",
                                concurrency=args.concurrency)
    run_seconds = time.perf_counter() - run_started

    recorded = {str(r["id"]): r for r in iter_records(
        open_data(None), recorded_path("RAG", "YAGO", args.model.split(":", 1)[1]))}
    agree = differ = 0
    reasons: collections.Counter[str] = collections.Counter()
    for record in result.records:
        want = recorded[record["fact_id"]]
        expected = read_yes_no_json(want["full_answer"]).label
        if record["label"] == expected:
            agree += 1
        else:
            differ += 1
        if record["label"] == "NA":
            reason = record["details"].get("reason", "")
            reasons[reason.split(":")[0] + (": " + reason.split(" ")[-1] if "similarity"
                                             in reason else "")] += 1
    retriever = get_retriever(str(work / "corpus.sqlite"), dataset="yago",
                              chroma_path=str(work / "chroma"))
    return {
        "benchmark": "rag_full_yago_replay",
        "model": args.model,
        "retrieval": args.retrieval,
        "facts": len(result.records),
        "documents_imported": documents,
        "import_seconds": round(import_seconds, 2),
        "run_seconds": round(run_seconds, 1),
        "total_seconds_from_empty_index": round(import_seconds + run_seconds, 1),
        "facts_per_second": round(len(result.records) / run_seconds, 2),
        "chunks_embedded": retriever.vectors("yago").embedded,
        "verdicts_equal_to_parsed_recorded_answer": agree,
        "verdicts_differing": differ,
        "f1_true": result.summary["f1_true"],
        "f1_false": result.summary["f1_false"],
        "na": result.summary["na"],
        "na_reasons": dict(reasons),
        "concurrency": args.concurrency,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "workdir": str(work),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=1))
