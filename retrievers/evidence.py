"""The retrieval steps of RAG over one evidence source: search, filter, select, chunks.

``Retriever`` ties a document source, an embedder and a chunk index together. Chunk
retrieval follows the study (sentence windows, top 6, similarity cutoff 0.3, window
replacement) with one change for CPU budgets, selectable per run: ``hybrid`` (default)
embeds only the sentences BM25 preselects for the query and ranks them by similarity plus
a small lexical bonus; ``dense`` embeds every sentence of the selected documents and ranks
by similarity alone, as the study did.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, TypeVar

import httpx
import numpy as np

from kgcheck.data.facts import Fact
from kgcheck.providers.secrets import redact_text, redact_url
from kgcheck.providers.transports import ssl_context
from kgcheck.retrievers.corpus import Document
from kgcheck.retrievers.embeddings import DEFAULT_EMBEDDING, Embedder, get_embedder
from kgcheck.retrievers.factcorpus import ChunkVectors, FactCorpora, FactCorpus
from kgcheck.retrievers.index import ChunkIndex, open_index
from kgcheck.retrievers.search.engine import MockSearch, SearchHit
from kgcheck.retrievers.settings import RetrievalSettings
from kgcheck.retrievers.sources.base import (
    CORPUS,
    EVIDENCE_SOURCES,
    EvidenceRequest,
    EvidenceSource,
    SourceSettings,
    parse_sources,
)
from kgcheck.retrievers.sources.gather import Gathered, GatheredSource, gather, open_cache
from kgcheck.retrievers.sources.net import NetPolicy, parse_allowed
from kgcheck.retrievers.store import DocumentSource, open_source

# The KGs' own sources, whose pages would let a model read the answer off the KG itself.
OWN_SOURCE_DOMAINS = {"dbpedia": ("wikipedia.org",), "factbench": ("wikipedia.org",)}
RETRIEVAL_MODES = ("hybrid", "dense")


class RetrievalError(ValueError):
    """A retrieval setting that is out of range or names an unknown mode."""


@dataclass(frozen=True)
class EvidenceChunk:
    """A retrieved chunk: its sentence, the window the model reads, and its scores."""

    chunk_id: str
    doc_id: str
    sentence: str
    text: str
    similarity: float
    lexical: float
    score: float
    url: str = ""
    source: str = "corpus"

    def as_dict(self) -> dict[str, object]:
        """Return the chunk as plain JSON."""
        return asdict(self)


def own_source_domains(dataset: str, setting: str = "auto") -> tuple[str, ...]:
    """Domains to drop: ``auto`` = the KG's own source; ``none``/empty; or a comma list."""
    value = (setting or "").strip().lower()
    if value == "auto":
        return OWN_SOURCE_DOMAINS.get(dataset.lower(), ())
    if value in ("", "none"):
        return ()
    return tuple(d.strip().removeprefix("www.") for d in value.split(",") if d.strip())


def in_domains(domain: str, domains: Sequence[str]) -> bool:
    """Tell whether ``domain`` is one of ``domains`` or a subdomain of one."""
    return any(domain == d or domain.endswith("." + d) for d in domains if d)


H = TypeVar("H", SearchHit, Mapping[str, Any])


def drop_domains(hits: Sequence[H], domains: Sequence[str]) -> tuple[list[H], list[H]]:
    """Split hits (``SearchHit`` or their dicts) into (kept, dropped) by source domain."""
    def excluded(hit: H) -> bool:
        return in_domains(hit["domain"] if isinstance(hit, Mapping) else hit.domain, domains)

    return [h for h in hits if not excluded(h)], [h for h in hits if excluded(h)]


class Retriever:
    """Search, select and chunk one evidence source's documents."""

    def __init__(self, source: DocumentSource, embedder: Embedder, *, index: str = "chroma",
                 chroma_path: str = "", chroma_url: str = "", cache_size: int = 256) -> None:
        self.source = source
        self.embedder = embedder
        self.corpora = FactCorpora(source, cache_size)
        self._index_kind = index
        self._chroma_path = chroma_path
        self._chroma_url = chroma_url
        self._vectors: dict[str, ChunkVectors] = {}
        self._lock = threading.Lock()
        self.engine = MockSearch(self.corpora, embedder, self.vectors)

    def index(self, dataset: str) -> ChunkIndex:
        """Return the chunk index of a dataset."""
        return self.vectors(dataset).index

    def vectors(self, dataset: str) -> ChunkVectors:
        """Chunk vectors of a dataset (its index opened on first use)."""
        key = dataset.lower()
        with self._lock:
            if key not in self._vectors:
                index = open_index(self._index_kind, key, self.embedder.name,
                                   path=self._chroma_path, url=self._chroma_url)
                self._vectors[key] = ChunkVectors(self.embedder, index)
            return self._vectors[key]

    def corpus(self, dataset: str, fact_id: str) -> FactCorpus:
        """Return a fact's prepared documents."""
        return self.corpora.get(dataset, fact_id)

    def documents(self, dataset: str, fact_id: str) -> dict[str, Document]:
        """Return a fact's documents by id."""
        return {d.doc_id: d for d in self.corpus(dataset, fact_id).documents}

    def search(self, query: str, dataset: str, fact_id: str, k: int = 100) -> list[SearchHit]:
        """Rank the fact's stored documents for ``query``."""
        return self.engine.search(query, dataset, fact_id, k)

    def search_many(self, queries: Sequence[str], dataset: str, fact_id: str,
                    k: int = 100) -> list[list[SearchHit]]:
        """Rank the fact's stored documents for several queries at once (one embedding batch)."""
        return self.engine.search_many(queries, dataset, fact_id, k)

    def chunks(self, query: str, dataset: str, fact_id: str, doc_ids: Sequence[str] | None,
               *, top_chunks: int = 6, cutoff: float = 0.3, window: int = 3, candidates: int = 24,
               mode: str = "hybrid", lexical_weight: float = 0.3) -> list[EvidenceChunk]:
        """Find the best chunks of the given documents for ``query``, as their windows."""
        if mode not in RETRIEVAL_MODES:
            raise RetrievalError(
                f"retrieval mode {mode!r}: use one of {', '.join(RETRIEVAL_MODES)}")
        if top_chunks < 1 or window < 0 or candidates < 1:
            raise RetrievalError(f"top_chunks={top_chunks}, window={window}, "
                                 f"candidates={candidates}: top_chunks and candidates must be "
                                 ">= 1, window >= 0")
        corpus = self.corpus(dataset, fact_id)
        positions = corpus.chunk_positions(doc_ids)
        if not len(positions):
            return []
        lexical = corpus.sentence_index.scores(query)[positions]
        if mode == "dense":
            pool = positions
        else:
            order = np.lexsort((positions, -lexical))[:candidates]
            # No shared word at all: fall back to each document's opening sentences.
            pool = positions[order] if lexical[order[0]] > 0 else positions[:candidates]
        chunks = [corpus.chunks[i] for i in pool]
        query_vector = self.embedder.embed([query])[0]
        sims = self.vectors(dataset).get(chunks) @ query_vector
        lex_by_pos = dict(zip(positions.tolist(), lexical.tolist(), strict=True))
        pool_lex = np.array([lex_by_pos[int(i)] for i in pool], dtype=np.float32)
        top_lex = float(pool_lex.max()) if len(pool_lex) and pool_lex.max() > 0 else 1.0
        bonus = lexical_weight * pool_lex / top_lex if mode == "hybrid" else 0.0 * pool_lex
        scores = sims + bonus
        keep = np.flatnonzero(sims >= cutoff)
        keep = keep[np.lexsort((keep, -scores[keep]))][:top_chunks]
        out = []
        for i in keep:
            chunk = chunks[int(i)]
            document = corpus.document(chunk.doc_id)
            out.append(EvidenceChunk(
                chunk_id=chunk.id, doc_id=chunk.doc_id, sentence=chunk.sentence,
                text=corpus.window(chunk, window), similarity=round(float(sims[i]), 4),
                lexical=round(float(pool_lex[i]), 4), score=round(float(scores[i]), 4),
                url=document.url if document else "",
                source=document.meta.get("source", CORPUS) if document else CORPUS))
        return out

    def put_gathered(self, dataset: str, fact_id: str, documents: list[Document]) -> None:
        """Give the retriever a fact's fetched documents (live sources only)."""
        if not isinstance(self.source, GatheredSource):
            raise RetrievalError("this retriever reads a stored corpus only; choose live "
                                 "sources with the sources setting")
        if self.source.put(dataset, fact_id, documents):
            self.corpora.forget(dataset, fact_id)

    def index_fact(self, dataset: str, fact_id: str, sentence: str, questions: Sequence[str],
                   *, candidates: int = 24, mode: str = "hybrid") -> int:
        """Embed and store what a run will need for a fact; returns the chunks embedded.

        Runs the same search (the sentence and each question) and chunk preselection as a
        RAG run, so a later run with these settings finds every vector in the index.
        """
        vectors = self.vectors(dataset)
        before = vectors.embedded
        self.search_many([sentence, *questions], dataset, fact_id)
        self.chunks(sentence, dataset, fact_id, None, top_chunks=1, cutoff=-1.0,
                    candidates=candidates, mode=mode)
        return vectors.embedded - before


_RETRIEVERS_LOCK = threading.Lock()


@lru_cache(maxsize=16)
def _retriever(corpus: str, api_key: str, dataset: str, embedding: str, index: str,
               chroma_path: str, chroma_url: str, sources: str) -> Retriever:
    names = sources.split(",")
    source: DocumentSource | None = None
    if CORPUS in names:
        source = open_source(corpus, api_key=api_key, dataset=dataset)
    if names != [CORPUS]:
        source = GatheredSource(source, names)
    assert source is not None
    return Retriever(source, get_embedder(embedding), index=index, chroma_path=chroma_path,
                     chroma_url=chroma_url)


def retriever_for(settings: RetrievalSettings, dataset: str) -> Retriever:
    """Return the retriever that ``settings`` describe, for one dataset's facts."""
    return get_retriever(settings.corpus, api_key=settings.api_key(), dataset=dataset,
                         embedding=settings.embedding, index=settings.index,
                         chroma_path=settings.chroma_path, chroma_url=settings.chroma_url,
                         sources=settings.sources)


def get_retriever(corpus: str = "", *, api_key: str = "", dataset: str = "",
                  embedding: str = DEFAULT_EMBEDDING, index: str = "chroma",
                  chroma_path: str = "", chroma_url: str = "",
                  sources: str = CORPUS) -> Retriever:
    """Return a retriever for these settings, built once per process (models load once)."""
    names = ",".join(parse_sources(sources))
    with _RETRIEVERS_LOCK:
        return _retriever(corpus, api_key, dataset.lower(), embedding or DEFAULT_EMBEDDING,
                          index, chroma_path, chroma_url, names)


def uses_live_sources(settings: RetrievalSettings) -> bool:
    """Tell whether a run fetches evidence (any source besides the stored corpus)."""
    return parse_sources(settings.sources) != [CORPUS]


def source_settings(settings: RetrievalSettings) -> SourceSettings:
    """Collect what the evidence sources are configured with."""
    policy = NetPolicy(allow_private=settings.allow_private_urls,
                       timeout=settings.fetch_timeout, max_bytes=settings.max_page_bytes,
                       host_interval=settings.host_interval, retries=settings.fetch_retries)
    parse_allowed(settings.allow_private_urls)  # a malformed setting fails before any fetch
    return SourceSettings(searxng_url=settings.searxng_url,
                          wikipedia_url=settings.wikipedia_url, sparql_url=settings.sparql_url,
                          results=settings.source_results, policy=policy)


# The longest wait for the one request that checks a source's server is there.
REACH_TIMEOUT = 10.0


class SourceUnreachableError(ValueError):
    """Nothing answers at an evidence source's server (checked once before a run starts)."""


def reach_source(source: EvidenceSource, timeout: float = REACH_TIMEOUT) -> None:
    """GET a source's endpoint once; any HTTP answer counts as reached.

    Sources without an endpoint of their own (``web`` fetches whatever pages were found)
    are not contacted.
    """
    url = source.location
    if not url.startswith(("http://", "https://")):
        return
    try:
        # The user's own endpoint, asked once: no redirects to elsewhere, no proxy settings;
        # streamed and closed unread, so no answer's body (however large) is read.
        with httpx.Client(timeout=min(timeout, REACH_TIMEOUT) if timeout > 0 else
                          REACH_TIMEOUT, follow_redirects=False, trust_env=False,
                          verify=ssl_context()) as client, client.stream("GET", url):
            pass
    except httpx.HTTPError as exc:
        detail = redact_text(str(exc).strip()) or type(exc).__name__
        raise SourceUnreachableError(
            f"cannot reach evidence source {source.name} at {redact_url(url)}: {detail}; "
            f"start it, fix {source.name}_url, or leave {source.name} out of sources=") \
            from None


def check_sources(settings: RetrievalSettings) -> None:
    """Build every chosen source and reach its server once, before the first fact.

    A missing URL or a server that does not answer fails here, not as every fact's NA.
    """
    config = source_settings(settings)
    for name in parse_sources(settings.sources):
        if name != CORPUS:
            reach_source(EVIDENCE_SOURCES.create(name, settings=config),
                         settings.fetch_timeout)


def evidence_request(fact: Fact, queries: Sequence[str]) -> EvidenceRequest:
    """Describe a fact to the evidence sources."""
    return EvidenceRequest(dataset=fact.dataset, fact_id=fact.id,
                           subject=fact.subject, predicate=fact.predicate, object=fact.object,
                           readable=fact.readable_terms(), queries=tuple(queries))


async def gather_evidence(settings: RetrievalSettings, fact: Fact,
                          queries: Sequence[str]) -> Gathered:
    """Fetch (or read from the cache) a fact's evidence and hand it to its retriever."""
    names = parse_sources(settings.sources)
    cache = await asyncio.to_thread(open_cache, settings.evidence_store)
    gathered = await gather(evidence_request(fact, queries), names,
                            source_settings(settings), cache)
    retriever = await asyncio.to_thread(retriever_for, settings, fact.dataset)
    retriever.put_gathered(fact.dataset, fact.id, gathered.documents)
    return gathered
