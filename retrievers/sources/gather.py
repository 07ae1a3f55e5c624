"""Gather a fact's evidence from the chosen sources, through the cache in the corpus store.

Each source's request keys (queries, page URLs, entity IRIs) are looked up in the store
first; only missing ones go to the network, and their answers (an empty one included) are
stored with URL, title, fetch time and source. The queries searched for a fact are kept
too, so a re-run asks the very same keys even when a model words its questions anew: the
second run of the same facts makes no network call.

A failing source does not stop the run: its failure is the fact's reason when nothing
else was found, and it is logged once per source and process.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kgcheck.retrievers.corpus import Document
from kgcheck.retrievers.sources.base import (
    CORPUS,
    EVIDENCE_SOURCES,
    EvidenceRequest,
    EvidenceSource,
    SourceError,
    SourceSettings,
    now,
)
from kgcheck.retrievers.sources.net import Net
from kgcheck.retrievers.sources.web import PageSkipped
from kgcheck.retrievers.store import CorpusStore, DocumentSource, Fetched, default_store_path

LOG = logging.getLogger("kgcheck.evidence")
CONCURRENT_KEYS = 4
_REPORTED: set[tuple[str, str]] = set()
_STORES: dict[str, CorpusStore] = {}
_LOCK = threading.Lock()


@dataclass
class Gathered:
    """A fact's fetched evidence and how it went."""

    documents: list[Document] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    asked: int = 0
    cache_hits: int = 0

    def summary(self) -> dict[str, object]:
        """Return what a verdict's details record of the gathering."""
        return {"documents": len(self.documents), "requests": self.asked,
                "cache_hits": self.cache_hits, "failed": dict(self.failures),
                "notes": self.notes[:20]}

    def reason(self) -> str:
        """Say why nothing was found: the failures first, else the empty answers."""
        if self.failures:
            return "; ".join(f"source {n} failed: {r}" for n, r in self.failures.items())
        if self.notes:
            return "the sources found nothing usable (" + "; ".join(self.notes[:3]) + ")"
        return "the sources found no results"


def open_cache(path: str = "") -> CorpusStore:
    """Open the store that caches fetched evidence (once per path and process)."""
    where = str(Path(path).expanduser()) if path else str(default_store_path())
    with _LOCK:
        if where not in _STORES:
            _STORES[where] = CorpusStore(where)
        return _STORES[where]


def fact_key(request: EvidenceRequest) -> str:
    """Identify a fact by its dataset, id and terms (an edited triple is a new fact)."""
    raw = "\x1f".join((request.dataset.lower(), request.fact_id, request.subject,
                       request.predicate, request.object))
    return hashlib.sha256(raw.encode()).hexdigest()


def document_number(item: Fetched) -> int:
    """Return a fetched document's number, from its content (its chunk ids never go stale)."""
    digest = hashlib.sha256(f"{item.source}\n{item.url}\n{item.text}".encode()).hexdigest()
    return 1_000 + int(digest[:12], 16) % 10**12


def _report_once(source: EvidenceSource, reason: str) -> None:
    key = (source.name, source.location)
    with _LOCK:
        if key in _REPORTED:
            return
        _REPORTED.add(key)
    LOG.warning("evidence source %s failed: %s; its facts go on without it", source.name,
                reason)


async def _answers(source: EvidenceSource, keys: list[str], cache: CorpusStore,
                   settings: SourceSettings, out: Gathered) -> list[Fetched]:
    """Answer each key from the cache or the source, in key order."""
    cached = await asyncio.to_thread(lambda: [cache.cached(source.name, k) for k in keys])
    found: dict[str, list[Fetched]] = {k: c for k, c in zip(keys, cached, strict=True)
                                       if c is not None}
    out.asked += len(keys)
    out.cache_hits += len(found)
    missing = [k for k in keys if k not in found]
    if missing:
        limit = asyncio.Semaphore(CONCURRENT_KEYS)
        async with Net(settings.policy, guard=not source.trusted) as net:
            async def one(key: str) -> None:
                async with limit:
                    try:
                        items = await source.fetch(key, net)
                    except PageSkipped as exc:
                        out.notes.append(str(exc))
                        if not exc.permanent:
                            return
                        items = []
                    except SourceError as exc:
                        out.failures.setdefault(source.name, str(exc))
                        _report_once(source, str(exc))
                        return
                    except Exception as exc:  # noqa: BLE001 - a source's bug ends no run
                        reason = (f"{source.name} at {source.location}: {key[:80]!r}: "
                                  f"{type(exc).__name__}: {exc}")
                        out.failures.setdefault(source.name, reason)
                        _report_once(source, reason)
                        return
                    found[key] = items
                    fetched_at = items[0].fetched_at if items else ""
                    await asyncio.to_thread(cache.save, source.name, key, items,
                                            fetched_at or now())
            await asyncio.gather(*(one(k) for k in missing))
    return [item for k in keys for item in found.get(k, [])]


async def gather(request: EvidenceRequest, names: Sequence[str], settings: SourceSettings,
                 cache: CorpusStore) -> Gathered:
    """Ask the sources in order (each sees what the earlier ones found); cache everything."""
    out = Gathered()
    sources_key = ",".join(names)
    key = fact_key(request)
    remembered = await asyncio.to_thread(cache.recall_queries, key, sources_key)
    if remembered is not None:
        request = EvidenceRequest(**{**request.__dict__, "queries": tuple(remembered)})
    else:
        await asyncio.to_thread(cache.remember_queries, key, sources_key,
                                list(request.queries))
    found: list[Fetched] = []
    for name in names:
        if name == CORPUS:
            continue
        try:
            source: EvidenceSource = EVIDENCE_SOURCES.create(name, settings=settings)
        except ValueError as exc:
            out.failures.setdefault(name, str(exc))
            continue
        found += await _answers(source, source.keys(request, found), cache, settings, out)
    out.documents = to_documents(request, found)
    return out


def to_documents(request: EvidenceRequest, found: Sequence[Fetched]) -> list[Document]:
    """Turn fetched items into the fact's documents; a page replaces its search snippet."""
    pages = {f.url for f in found if f.source == "web"}
    documents: dict[int, Document] = {}
    for item in found:
        if not item.text or (item.source != "web" and item.url in pages):
            continue
        number = document_number(item)
        documents.setdefault(number, Document(
            dataset=request.dataset.lower(), fact_id=request.fact_id, doc_no=number,
            text=item.text, url=item.url, title=item.title,
            meta={"source": item.source, "fetched_at": item.fetched_at}))
    return list(documents.values())


class GatheredSource:
    """A document source: a base corpus (optional) plus each fact's gathered documents."""

    def __init__(self, base: DocumentSource | None, names: Sequence[str]) -> None:
        self.base = base
        parts = [base.location] if base is not None else []
        self.location = " + ".join(parts + [n for n in names if n != CORPUS])
        self._gathered: dict[tuple[str, str], list[Document]] = {}
        self._lock = threading.Lock()

    def put(self, dataset: str, fact_id: str, documents: list[Document]) -> bool:
        """Set a fact's gathered documents; tell whether they changed."""
        key = (dataset.lower(), fact_id)
        with self._lock:
            changed = self._gathered.get(key) != documents
            self._gathered[key] = documents
        return changed

    def datasets(self) -> list[str]:
        """Datasets of the base corpus and of gathered facts."""
        names = set(self.base.datasets()) if self.base is not None else set()
        with self._lock:
            names |= {d for d, _ in self._gathered}
        return sorted(names)

    def fact_ids(self, dataset: str) -> list[str]:
        """Facts with documents in the base corpus or gathered."""
        ids = set(self.base.fact_ids(dataset)) if self.base is not None else set()
        with self._lock:
            ids |= {f for d, f in self._gathered if d == dataset.lower()}
        return sorted(ids)

    def documents(self, dataset: str, fact_id: str) -> list[Document]:
        """Return the base corpus's documents of the fact, then the gathered ones."""
        base = self.base.documents(dataset, fact_id) if self.base is not None else []
        with self._lock:
            return base + list(self._gathered.get((dataset.lower(), fact_id), []))

    def by_link(self, link: str) -> Document | None:
        """Find a document by URL or ``corpus://`` address."""
        found = self.base.by_link(link) if self.base is not None else None
        if found is not None:
            return found
        with self._lock:
            return next((d for docs in self._gathered.values() for d in docs
                         if link in (d.url, d.link)), None)
