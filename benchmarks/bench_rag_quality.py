"""Retrieval quality proxy on YAGO: do the retrieved chunks mention the object's name?

For a seeded sample of true YAGO facts, retrieve the top chunks for the fact's sentence
from all its documents, once dense-only (every sentence embedded, ranked by similarity:
the study's set-up) and once with the default hybrid (BM25-preselected sentences, ranked
by similarity plus a lexical bonus). Reports the share of facts whose retrieved windows
(what the model reads) and whose matched sentences name the object. Prints JSON.

    python benchmarks/bench_rag_quality.py [--corpus PATH] [--sample 100]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from rag_corpus import check_corpus, corpus_arg, import_or_fail  # noqa: E402


def object_name(readable_object: str) -> str:
    """Fold the object's readable name, without a parenthetical qualifier."""
    from kgcheck.retrievers.lexical import fold

    return " ".join(re.sub(r"\([^)]*\)", " ", fold(readable_object)).split())


def mentions(name: str, texts: list[str]) -> bool:
    from kgcheck.retrievers.lexical import fold

    return bool(name) and any(name in " ".join(fold(t).split()) for t in texts)


def main() -> dict:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--sample", type=int, default=100)
    corpus_arg(parser)
    args = parser.parse_args()
    corpus_path = check_corpus(args.corpus)

    from kgcheck.data.datasets import load_facts
    from kgcheck.retrievers.embeddings import CachedEmbedder, get_embedder
    from kgcheck.retrievers.evidence import Retriever

    work = Path(tempfile.mkdtemp(prefix="bench-rag-quality-"))
    store, _ = import_or_fail(corpus_path, work / "corpus.sqlite")
    have = set(store.fact_ids("yago"))
    facts = [f for f in load_facts("yago") if f.label and f.id in have]
    sample = random.Random(11).sample(facts, min(args.sample, len(facts)))
    model = get_embedder("minilm").inner
    out: dict = {"benchmark": "rag_quality_proxy_yago", "facts": len(sample)}
    for mode in ("hybrid", "dense"):
        # Each mode starts cold (own vector table and query cache), so costs compare.
        retriever = Retriever(store, CachedEmbedder(model), index="memory", chroma_path=mode)
        window_hits = sentence_hits = empty = chunks = 0
        started = time.perf_counter()
        before = retriever.vectors("yago").embedded
        for fact in sample:
            name = object_name(fact.readable_terms()[2])
            found = retriever.chunks(fact.sentence or fact.readable, "yago", fact.id, None,
                                     mode=mode)
            chunks += len(found)
            empty += not found
            window_hits += mentions(name, [c.text for c in found])
            sentence_hits += mentions(name, [c.sentence for c in found])
        out[mode] = {
            "object_in_windows": round(window_hits / len(sample), 3),
            "object_in_matched_sentences": round(sentence_hits / len(sample), 3),
            "facts_without_chunks": empty,
            "mean_chunks": round(chunks / len(sample), 2),
            "sentences_embedded": retriever.vectors("yago").embedded - before,
            "seconds": round(time.perf_counter() - started, 1),
        }
    return out


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
