"""Index build for the YAGO evidence corpus and retrieval latency per fact (cold and warm).

Imports ../shared's YAGO tarball into a temporary store, builds the Chroma index the way
`kgcheck index` does (BM25 preselection, one embedding batch per step, vectors cached),
then times the retrieval phase of RAG (search for the sentence and three questions, drop
own-source domains, select k_d documents, top chunks) per fact: cold (a fresh retriever on
the built index: documents, BM25 and query vectors computed anew) and warm (again).
Prints JSON.

    python benchmarks/bench_rag_index.py [--corpus PATH] [--limit N] [--sample 200]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from rag_corpus import check_corpus, corpus_arg, import_or_fail  # noqa: E402


def percentiles(values: list[float]) -> dict[str, float]:
    ms = np.array(values) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2),
            "p95_ms": round(float(np.percentile(ms, 95)), 2),
            "mean_ms": round(float(ms.mean()), 2), "n": len(values)}


def retrieve(retriever, dataset: str, fact_id: str, sentence: str, questions: list[str]) -> int:
    """Run RAG's retrieval phase for one fact; returns the number of chunks found."""
    from kgcheck.retrievers.evidence import drop_domains, own_source_domains
    from kgcheck.retrievers.search.engine import merge_hits
    from kgcheck.retrievers.selection import get_selector

    hits = merge_hits(retriever.search_many([sentence, *questions], dataset, fact_id))
    kept, _ = drop_domains(hits, own_source_domains(dataset))
    chosen = get_selector("fusion").select(sentence, kept, {}, 10)
    return len(retriever.chunks(sentence, dataset, fact_id, [h.doc_id for h in chosen]))


def main() -> dict:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--candidates", type=int, default=24)
    corpus_arg(parser)
    args = parser.parse_args()
    corpus_path = check_corpus(args.corpus)

    from kgcheck.retrievers.embeddings import CachedEmbedder, get_embedder
    from kgcheck.retrievers.evidence import Retriever
    from kgcheck.retrievers.questions import FactStatements, template_questions
    from kgcheck.retrievers.store import CorpusStore

    work = Path(tempfile.mkdtemp(prefix="bench-rag-index-"))
    started = time.perf_counter()
    store, documents = import_or_fail(corpus_path, work / "corpus.sqlite")
    import_seconds = time.perf_counter() - started

    embedder = get_embedder("minilm")
    statements = FactStatements()
    retriever = Retriever(store, embedder, index="chroma", chroma_path=str(work / "chroma"))
    fact_ids = store.fact_ids("yago")[: args.limit]
    queries = {}
    for fact_id in fact_ids:
        sentence, subject, obj = statements.get("yago", fact_id)
        queries[fact_id] = (sentence, template_questions(subject, obj, sentence)[:3])
    embedded = docs = sentences = 0
    started = time.perf_counter()
    for fact_id in fact_ids:
        sentence, questions = queries[fact_id]
        embedded += retriever.index_fact("yago", fact_id, sentence, questions,
                                         candidates=args.candidates)
        corpus = retriever.corpus("yago", fact_id)
        docs += len(corpus.documents)
        sentences += len(corpus.chunks)
    build_seconds = time.perf_counter() - started
    peak_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    sample = random.Random(7).sample(fact_ids, min(args.sample, len(fact_ids)))
    # Cold: a new retriever over the same store and index, with an empty query cache.
    cold = Retriever(CorpusStore(work / "corpus.sqlite"), CachedEmbedder(embedder.inner),
                     index="chroma", chroma_path=str(work / "chroma"))
    cold_times, warm_times = [], []
    for fact_id in sample:
        t = time.perf_counter()
        retrieve(cold, "yago", fact_id, *queries[fact_id])
        cold_times.append(time.perf_counter() - t)
    for fact_id in sample:
        t = time.perf_counter()
        retrieve(cold, "yago", fact_id, *queries[fact_id])
        warm_times.append(time.perf_counter() - t)
    return {
        "benchmark": "rag_index_yago",
        "facts": len(fact_ids),
        "documents": docs,
        "sentences": sentences,
        "chunks_embedded": embedded,
        "import_seconds": round(import_seconds, 2),
        "import_documents_per_second": round(documents / import_seconds, 1),
        "build_seconds": round(build_seconds, 1),
        "documents_per_second": round(docs / build_seconds, 1),
        "chunks_per_second": round(embedded / build_seconds, 1),
        "sentences_per_second": round(sentences / build_seconds, 1),
        "peak_rss_mb_build": round(peak_build, 1),
        "retrieval_cold": percentiles(cold_times),
        "retrieval_warm": percentiles(warm_times),
        "candidates": args.candidates,
        "cold_embedded_extra": cold.vectors("yago").embedded,
        "workdir": str(work),
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
