"""The mock search engine: replay a fact's stored results, ranked by relevance to the query.

A query about a fact returns that fact's stored documents (the upstream corpus keeps the
pages that a web search returned for it), ordered by reciprocal-rank fusion of BM25 over
the whole document and dense similarity of the query to the document's best-matching
sentences. Only those few sentences are embedded, and their vectors are cached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from kgcheck.retrievers.corpus import Document
from kgcheck.retrievers.embeddings import Embedder
from kgcheck.retrievers.factcorpus import ChunkVectors, FactCorpora, FactCorpus

RRF_K = 60
SNIPPET_CHARS = 240


@dataclass(frozen=True)
class SearchHit:
    """One search result: a stored document and how well it matches the query."""

    doc_id: str
    dataset: str
    fact_id: str
    doc_no: int
    url: str
    title: str
    domain: str
    rank: int
    score: float
    lexical: float
    dense: float
    snippet: str

    def as_dict(self) -> dict[str, object]:
        """Return the hit as plain JSON."""
        return asdict(self)


def hit_of(doc: Document, rank: int, score: float, lexical: float, dense: float) -> SearchHit:
    """Describe ``doc`` as a search result."""
    return SearchHit(
        doc_id=doc.doc_id, dataset=doc.dataset, fact_id=doc.fact_id, doc_no=doc.doc_no,
        url=doc.link, title=doc.title, domain=doc.domain, rank=rank, score=score,
        lexical=lexical, dense=dense, snippet=" ".join(doc.text.split())[:SNIPPET_CHARS],
    )


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks, best first; ties keep document order."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    ranks = np.empty(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(scores) + 1)
    return ranks


class MockSearch:
    """Search one fact's stored documents, BM25 fused with dense similarity."""

    def __init__(self, corpora: FactCorpora, embedder: Embedder | None,
                 vectors: Callable[[str], ChunkVectors] | None = None, *,
                 sentences_per_doc: int = 1) -> None:
        self.corpora = corpora
        self.embedder = embedder
        self.vectors = vectors
        self.sentences_per_doc = sentences_per_doc

    def _picks(self, query: str, corpus: FactCorpus) -> list[int]:
        """Each document's best BM25 sentences for the query (positions in ``chunks``)."""
        scores = corpus.sentence_index.scores(query)
        picked: list[int] = []
        for n in range(len(corpus.documents)):
            rows = np.flatnonzero(corpus.chunk_doc == n)
            if len(rows):
                best = rows[np.lexsort((rows, -scores[rows]))][: self.sentences_per_doc]
                picked.extend(int(i) for i in best)
        return picked

    def _dense(self, queries: Sequence[str], corpus: FactCorpus) -> list[np.ndarray]:
        """Per query and document: the best cosine of the query to the picked sentences."""
        blank = np.zeros(len(corpus.documents), dtype=np.float32)
        if self.embedder is None or self.vectors is None or not corpus.chunks:
            return [blank for _ in queries]
        picks = [self._picks(q, corpus) for q in queries]
        # One batch for every query's sentences: batching is what makes CPU embedding fast.
        wanted = sorted({i for p in picks for i in p})
        matrix = self.vectors(corpus.dataset).get([corpus.chunks[i] for i in wanted])
        row_of = {i: n for n, i in enumerate(wanted)}
        query_vectors = self.embedder.embed(list(queries))
        out = []
        for picked, qv in zip(picks, query_vectors, strict=True):
            dense = np.full(len(corpus.documents), -1.0, dtype=np.float32)
            sims = matrix[[row_of[i] for i in picked]] @ qv if picked else []
            for i, sim in zip(picked, sims, strict=True):
                doc = corpus.chunk_doc[i]
                dense[doc] = max(dense[doc], float(sim))
            out.append(dense)
        return out

    def search_many(self, queries: Sequence[str], dataset: str, fact_id: str,
                    k: int = 100) -> list[list[SearchHit]]:
        """Rank the fact's documents for each query, best first, at most ``k`` each."""
        corpus = self.corpora.get(dataset, fact_id)
        if not corpus.documents:
            return [[] for _ in queries]
        results = []
        for query, dense in zip(queries, self._dense(queries, corpus), strict=True):
            lexical = corpus.document_index.scores(query)
            fused = 1.0 / (RRF_K + _ranks(lexical))
            if self.embedder is not None:
                fused = fused + 1.0 / (RRF_K + _ranks(dense))
            order = np.lexsort((np.arange(len(fused)), -fused))[:k]
            results.append([hit_of(corpus.documents[i], rank, float(fused[i]),
                                   float(lexical[i]), float(dense[i]))
                            for rank, i in enumerate(order, start=1)])
        return results

    def search(self, query: str, dataset: str, fact_id: str, k: int = 100) -> list[SearchHit]:
        """Rank the fact's documents for ``query``, best first, at most ``k``."""
        return self.search_many([query], dataset, fact_id, k)[0]


def merge_hits(results: Sequence[Sequence[SearchHit]]) -> list[SearchHit]:
    """Fuse several queries' result lists by reciprocal rank; best first."""
    scores: dict[str, float] = {}
    first: dict[str, SearchHit] = {}
    for hits in results:
        for hit in hits:
            scores[hit.doc_id] = scores.get(hit.doc_id, 0.0) + 1.0 / (RRF_K + hit.rank)
            first.setdefault(hit.doc_id, hit)
    ordered = sorted(scores, key=lambda d: (-scores[d], first[d].doc_no))
    return [
        SearchHit(**{**first[d].as_dict(), "rank": n, "score": scores[d]})  # type: ignore[arg-type]
        for n, d in enumerate(ordered, start=1)
    ]
