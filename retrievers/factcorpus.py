"""One fact's evidence, prepared once: documents, sentences, BM25 indexes, cached vectors.

Upstream search results are stored per fact, so every retrieval step works inside one
fact's ten or so documents: small enough that BM25 indexes are built on first use and kept
in a bounded cache, while sentence vectors go to the (persistent) chunk index and are
computed only for the sentences a query actually needs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kgcheck.retrievers.chunking import Chunk, SplitDocument, split_document
from kgcheck.retrievers.corpus import Document
from kgcheck.retrievers.embeddings import Embedder
from kgcheck.retrievers.index import ChunkIndex
from kgcheck.retrievers.lexical import LexicalIndex
from kgcheck.retrievers.store import DocumentSource


@dataclass
class FactCorpus:
    """A fact's documents split into sentence chunks, with BM25 over sentences and documents."""

    dataset: str
    fact_id: str
    documents: list[Document]
    splits: dict[str, SplitDocument]
    chunks: list[Chunk]
    chunk_doc: np.ndarray
    sentence_index: LexicalIndex
    document_index: LexicalIndex

    @classmethod
    def build(cls, dataset: str, fact_id: str, documents: list[Document]) -> FactCorpus:
        """Split and index a fact's documents."""
        splits = {d.doc_id: split_document(d) for d in documents}
        chunks = [c for d in documents for c in splits[d.doc_id].chunks()]
        positions = {d.doc_id: n for n, d in enumerate(documents)}
        return cls(
            dataset=dataset.lower(), fact_id=fact_id, documents=documents, splits=splits,
            chunks=chunks,
            chunk_doc=np.array([positions[c.doc_id] for c in chunks], dtype=np.int32),
            sentence_index=LexicalIndex([c.sentence for c in chunks]),
            document_index=LexicalIndex([f"{d.title}\n{d.text}" for d in documents]),
        )

    def document(self, doc_id: str) -> Document | None:
        """Return a document of this fact by id."""
        return next((d for d in self.documents if d.doc_id == doc_id), None)

    def chunk_positions(self, doc_ids: Sequence[str] | None) -> np.ndarray:
        """Positions in ``chunks`` of the sentences of ``doc_ids`` (all when None)."""
        if doc_ids is None:
            return np.arange(len(self.chunks))
        wanted = {n for n, d in enumerate(self.documents) if d.doc_id in set(doc_ids)}
        return np.array([i for i, n in enumerate(self.chunk_doc) if n in wanted], dtype=np.int64)

    def window(self, chunk: Chunk, size: int) -> str:
        """Return the chunk's sentence with ``size`` sentences on each side."""
        return self.splits[chunk.doc_id].window(chunk.index, size)


class FactCorpora:
    """Build fact corpora from a document source, keep the most recent ones."""

    def __init__(self, source: DocumentSource, size: int = 256) -> None:
        self.source = source
        self.size = size
        self._cache: OrderedDict[tuple[str, str], FactCorpus] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, dataset: str, fact_id: str) -> FactCorpus:
        """Return the fact's corpus (empty when the source has no documents for it)."""
        key = (dataset.lower(), fact_id)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        corpus = FactCorpus.build(dataset, fact_id, self.source.documents(dataset, fact_id))
        with self._lock:
            self._cache[key] = corpus
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return corpus

    def forget(self, dataset: str, fact_id: str) -> None:
        """Drop a fact's prepared corpus (its documents changed)."""
        with self._lock:
            self._cache.pop((dataset.lower(), fact_id), None)


class ChunkVectors:
    """Vectors of chunks: read from the index, embedding (and storing) only missing ones."""

    def __init__(self, embedder: Embedder, index: ChunkIndex) -> None:
        self.embedder = embedder
        self.index = index
        # Two facts may share no chunks, but two queries of one fact do: embed each once.
        self._lock = threading.Lock()
        self.embedded = 0

    def get(self, chunks: Sequence[Chunk]) -> np.ndarray:
        """Return an ``(n, dim)`` array of the chunks' vectors, in order."""
        if not chunks:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        ids = list(dict.fromkeys(c.id for c in chunks))
        with self._lock:
            missing = set(self.index.missing(ids))
            if missing:
                todo = list({c.id: c for c in chunks if c.id in missing}.values())
                vectors = self.embedder.embed([c.sentence for c in todo])
                self.index.add(todo, vectors)
                self.embedded += len(todo)
                fresh = {c.id: v for c, v in zip(todo, vectors, strict=True)}
            else:
                fresh = {}
        stored = self.index.vectors([i for i in ids if i not in fresh])
        stored.update(fresh)
        return np.stack([stored[c.id] for c in chunks])
