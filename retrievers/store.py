"""Where evidence documents are kept: an imported SQLite store, a folder, or a search API.

``kgcheck corpus import`` copies a corpus into ``.kgcheck/corpus.sqlite`` (under
``$KGCHECK_HOME`` when set), so runs read one fact's documents with one indexed query
instead of re-reading a tarball. Every source answers the same small protocol.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# HOME_ENV is named here too: the CLI reads it from this module.
from kgcheck.data.paths import HOME_ENV as HOME_ENV
from kgcheck.data.paths import kgcheck_home
from kgcheck.registry import Registry, UnknownNameError
from kgcheck.retrievers.corpus import (
    LAYOUT_ROOT,
    CorpusError,
    Document,
    fact_documents,
    is_tarball,
    iter_documents,
    parse_corpus_link,
)
from kgcheck.retrievers.search.client import RemoteSource
from kgcheck.vendored import SAMPLE_CORPUS

CORPUS_ENV = "KGCHECK_CORPUS"


def default_store_path() -> Path:
    """Where ``kgcheck corpus import`` stores documents."""
    return kgcheck_home() / "corpus.sqlite"


class DocumentSource(Protocol):
    """Evidence documents by dataset and fact: what a search engine's stored results are."""

    location: str

    def datasets(self) -> list[str]:
        """Lower-case names of the datasets the source holds."""
        ...

    def fact_ids(self, dataset: str) -> list[str]:
        """Ids of the facts that have documents, sorted."""
        ...

    def documents(self, dataset: str, fact_id: str) -> list[Document]:
        """Return the documents of one fact, by document number; empty when it has none."""
        ...

    def by_link(self, link: str) -> Document | None:
        """Find the document at a source URL or ``corpus://`` address, if the source has it."""
        ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    dataset TEXT NOT NULL,
    fact_id TEXT NOT NULL,
    doc_no INTEGER NOT NULL,
    url TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    PRIMARY KEY (dataset, fact_id, doc_no)
);
CREATE INDEX IF NOT EXISTS documents_url ON documents (url);
CREATE TABLE IF NOT EXISTS fetches (
    source TEXT NOT NULL,
    key TEXT NOT NULL,
    fetched_at TEXT NOT NULL,
    PRIMARY KEY (source, key)
);
CREATE TABLE IF NOT EXISTS fetched (
    source TEXT NOT NULL,
    key TEXT NOT NULL,
    rank INTEGER NOT NULL,
    url TEXT NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    fetched_at TEXT NOT NULL,
    PRIMARY KEY (source, key, rank)
);
CREATE TABLE IF NOT EXISTS fact_queries (
    fact_key TEXT NOT NULL,
    sources TEXT NOT NULL,
    queries TEXT NOT NULL,
    PRIMARY KEY (fact_key, sources)
);
"""


@dataclass(frozen=True)
class Fetched:
    """One result or page an evidence source fetched, with its provenance."""

    source: str
    url: str
    title: str
    text: str
    fetched_at: str


class CorpusStore:
    """Documents in a SQLite file (or in memory): the imported corpus."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        self.location = self.path
        self._lock = threading.Lock()
        try:
            if self.path != ":memory:":
                if Path(self.path).is_dir():
                    raise CorpusError(f"{self.path}: is a folder; the corpus store is a "
                                      "SQLite file (pass --store FILE.sqlite)")
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            # Graph nodes read from worker threads; one connection behind a lock serves them.
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            with self._lock:
                self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise CorpusError(f"{self.path}: cannot open the corpus store ({reason}); pass "
                              "--store with a writable SQLite file, or set $KGCHECK_HOME"
                              ) from None

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def add(self, documents: Iterable[Document], batch: int = 500) -> int:
        """Insert or replace documents; returns how many were written."""
        count = 0
        rows: list[tuple[str, str, int, str, str, str]] = []

        def flush() -> None:
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?)", rows)
                self._db.commit()
            rows.clear()

        for doc in documents:
            rows.append((doc.dataset, doc.fact_id, doc.doc_no, doc.url, doc.title, doc.text))
            count += 1
            if len(rows) >= batch:
                flush()
        if rows:
            flush()
        return count

    def import_documents(self, documents: Iterable[Document], *, clear: str | None = None,
                         batch: int = 500) -> int:
        """Insert documents in one transaction: all of them, or none if reading them fails.

        ``clear`` names a dataset whose stored documents are deleted first, in the same
        transaction. Returns how many documents were written.
        """
        count = 0
        rows: list[tuple[str, str, int, str, str, str]] = []
        insert = "INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?)"
        with self._lock:
            try:
                if clear is not None:
                    self._db.execute("DELETE FROM documents WHERE dataset = ?", (clear,))
                for doc in documents:
                    rows.append((doc.dataset, doc.fact_id, doc.doc_no, doc.url, doc.title,
                                 doc.text))
                    count += 1
                    if len(rows) >= batch:
                        self._db.executemany(insert, rows)
                        rows.clear()
                if rows:
                    self._db.executemany(insert, rows)
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise
        return count

    def _rows(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def datasets(self) -> list[str]:
        """Datasets with at least one document."""
        return [str(r[0]) for r in self._rows("SELECT DISTINCT dataset FROM documents ORDER BY 1")]

    def fact_ids(self, dataset: str) -> list[str]:
        """Facts of ``dataset`` that have documents."""
        rows = self._rows("SELECT DISTINCT fact_id FROM documents WHERE dataset = ? ORDER BY 1",
                          (dataset.lower(),))
        return [str(r[0]) for r in rows]

    def counts(self) -> dict[str, tuple[int, int]]:
        """Per dataset: (facts, documents)."""
        rows = self._rows("SELECT dataset, COUNT(DISTINCT fact_id), COUNT(*) FROM documents "
                          "GROUP BY dataset ORDER BY dataset")
        return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}  # type: ignore[call-overload]

    @staticmethod
    def _doc(row: tuple[object, ...]) -> Document:
        dataset, fact_id, doc_no, url, title, text = row
        return Document(dataset=str(dataset), fact_id=str(fact_id), doc_no=int(doc_no),  # type: ignore[call-overload]
                        text=str(text), url=str(url), title=str(title))

    def documents(self, dataset: str, fact_id: str) -> list[Document]:
        """Return the documents of one fact."""
        rows = self._rows(
            "SELECT dataset, fact_id, doc_no, url, title, text FROM documents "
            "WHERE dataset = ? AND fact_id = ? ORDER BY doc_no", (dataset.lower(), fact_id))
        return [self._doc(r) for r in rows]

    def by_link(self, link: str) -> Document | None:
        """Find the document at a URL or ``corpus://`` address."""
        parts = parse_corpus_link(link)
        if parts:
            rows = self._rows(
                "SELECT dataset, fact_id, doc_no, url, title, text FROM documents "
                "WHERE dataset = ? AND fact_id = ? AND doc_no = ?", parts)
        else:
            rows = self._rows("SELECT dataset, fact_id, doc_no, url, title, text FROM documents "
                              "WHERE url = ? LIMIT 1", (link,))
        return self._doc(rows[0]) if rows else None

    def cached(self, source: str, key: str) -> list[Fetched] | None:
        """Return what ``source`` fetched for ``key`` before (None: never fetched)."""
        if not self._rows("SELECT 1 FROM fetches WHERE source = ? AND key = ?", (source, key)):
            return None
        rows = self._rows("SELECT source, url, title, text, fetched_at FROM fetched "
                          "WHERE source = ? AND key = ? ORDER BY rank", (source, key))
        return [Fetched(*map(str, r)) for r in rows]

    def save(self, source: str, key: str, items: Iterable[Fetched], fetched_at: str) -> None:
        """Record what ``source`` fetched for ``key`` (an empty answer is an answer too)."""
        rows = [(source, key, n, i.url, i.title, i.text, i.fetched_at)
                for n, i in enumerate(items)]
        with self._lock:
            self._db.execute("DELETE FROM fetched WHERE source = ? AND key = ?", (source, key))
            self._db.executemany("INSERT INTO fetched VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            self._db.execute("INSERT OR REPLACE INTO fetches VALUES (?, ?, ?)",
                             (source, key, fetched_at))
            self._db.commit()

    def fetched_counts(self) -> dict[str, tuple[int, int, str]]:
        """Per source: (requests, results or pages, last fetch time)."""
        rows = self._rows(
            "SELECT f.source, COUNT(*), (SELECT COUNT(*) FROM fetched d WHERE d.source = "
            "f.source), MAX(f.fetched_at) FROM fetches f GROUP BY f.source ORDER BY f.source")
        return {str(r[0]): (int(r[1]), int(r[2]), str(r[3]))  # type: ignore[call-overload]
                for r in rows}

    def fetched_items(self, source: str = "", limit: int = 1000) -> list[Fetched]:
        """List fetched results and pages (newest first), of one source or all."""
        rows = self._rows(
            "SELECT DISTINCT source, url, title, '', fetched_at FROM fetched "
            "WHERE (? = '' OR source = ?) ORDER BY fetched_at DESC, url LIMIT ?",
            (source, source, limit))
        return [Fetched(*map(str, r)) for r in rows]

    def recall_queries(self, fact_key: str, sources: str) -> list[str] | None:
        """Return the queries an earlier run searched for this fact with these sources."""
        rows = self._rows("SELECT queries FROM fact_queries WHERE fact_key = ? AND sources = ?",
                          (fact_key, sources))
        return [str(q) for q in json.loads(str(rows[0][0]))] if rows else None

    def remember_queries(self, fact_key: str, sources: str, queries: list[str]) -> None:
        """Keep the queries searched for a fact, so a re-run asks (and finds) the same."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO fact_queries VALUES (?, ?, ?)",
                             (fact_key, sources, json.dumps(queries)))
            self._db.commit()


class FolderSource:
    """A folder in the upstream layout, read one fact at a time (nothing is imported)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self.location = str(self.root)
        if not self.root.is_dir():
            raise CorpusError(f"{self.root}: corpus folder not found")
        self._base = self.root / LAYOUT_ROOT if (self.root / LAYOUT_ROOT).is_dir() else self.root
        self._urls: dict[str, Document] | None = None

    def _dataset_dir(self, dataset: str) -> Path | None:
        for child in self._base.iterdir():
            if child.is_dir() and child.name.lower() == dataset.lower():
                return child
        return None

    def datasets(self) -> list[str]:
        """Sub-folders of the layout root."""
        return sorted(c.name.lower() for c in self._base.iterdir()
                      if c.is_dir() and not c.name.startswith("."))

    def fact_ids(self, dataset: str) -> list[str]:
        """Fact folders of a dataset."""
        folder = self._dataset_dir(dataset)
        if folder is None:
            return []
        return sorted(c.name for c in folder.iterdir() if c.is_dir())

    def documents(self, dataset: str, fact_id: str) -> list[Document]:
        """Read a fact folder's documents."""
        folder = self._dataset_dir(dataset)
        if folder is None or "/" in fact_id or fact_id in ("", ".", ".."):
            return []
        fact_dir = folder / fact_id
        if not fact_dir.is_dir():
            return []
        return fact_documents(fact_dir, folder.name, self.root)

    def by_link(self, link: str) -> Document | None:
        """Find a document by ``corpus://`` address or (after one scan) by source URL."""
        parts = parse_corpus_link(link)
        if parts:
            dataset, fact_id, number = parts
            return next((d for d in self.documents(dataset, fact_id) if d.doc_no == number), None)
        if self._urls is None:
            self._urls = {d.url: d for d in iter_documents(self.root) if d.url}
        return self._urls.get(link)


def folder(path: str, **_: Hashable) -> DocumentSource:
    """``folder:<path>``: a folder in the ``rag_dataset/<dataset>/<fact id>/<n>.txt`` layout."""
    return FolderSource(path)


def tarball(path: str, **_: Hashable) -> DocumentSource:
    """``tarball:<path>``: a ``.tar.gz`` of that layout, read once into memory (streamed)."""
    store = CorpusStore(":memory:")
    store.add(iter_documents(path))
    store.location = path
    return store


def sqlite_store(path: str, **_: Hashable) -> DocumentSource:
    """``store:<path>``: a SQLite corpus that ``kgcheck corpus import`` wrote."""
    return CorpusStore(path)


def search_api(url: str, *, api_key: str = "", **_: Hashable) -> DocumentSource:
    """``search-api:<url>``: a search API compatible with FactCheck's (X-API-Key)."""
    return RemoteSource(url, api_key)


class UnknownSourceError(CorpusError, UnknownNameError):
    """No evidence source is registered under that name."""


SOURCES: Registry[Callable[..., DocumentSource]] = Registry(
    "evidence source", group="kgcheck.sources", unknown=UnknownSourceError)
SOURCES.register("folder", folder)
SOURCES.register("tarball", tarball)
SOURCES.register("store", sqlite_store)
SOURCES.register("search-api", search_api)


def _kind_of(spec: str) -> tuple[str, str, Hashable]:
    """Tell which source a corpus setting names by its shape: (kind, location, version)."""
    if spec.startswith(("http://", "https://")):
        return "search-api", spec, ""
    path = Path(spec).expanduser()
    if path.is_dir():
        return "folder", str(path.resolve()), ""
    if is_tarball(path):
        # Its modification time is part of the key: an edited tarball is read again.
        return "tarball", str(path.resolve()), path.stat().st_mtime
    if path.is_file() and path.suffix in (".sqlite", ".db"):
        return "store", str(path.resolve()), ""
    raise CorpusError(f"corpus {spec!r}: not a folder, .tar.gz, .sqlite store or http(s) URL")


def open_source(spec: str = "", *, api_key: str = "", dataset: str = "") -> DocumentSource:
    """Open where evidence comes from.

    ``spec`` is a search API base URL (``http://...``; ``api_key`` or
    ``$KGCHECK_SEARCH_API_KEY``), a folder or ``.tar.gz`` in the upstream layout, a
    ``.sqlite`` store, or ``<source>:<argument>`` for a registered source. Empty means
    ``$KGCHECK_CORPUS``, else the imported store when it holds ``dataset``, else the small
    sample corpus shipped with the project.
    """
    spec = spec.strip() or os.environ.get(CORPUS_ENV, "").strip()
    if not spec:
        store_path = default_store_path()
        if store_path.is_file():
            store = SOURCES.create(f"store:{store_path}")
            if not dataset or dataset.lower() in store.datasets():
                return store
        if SAMPLE_CORPUS.is_dir():
            return SOURCES.create(f"folder:{SAMPLE_CORPUS}")
        raise CorpusError("no evidence corpus: import one with `kgcheck corpus import --dataset "
                          "NAME --from PATH` or set the corpus setting to a folder, .tar.gz or URL")
    name, sep, argument = spec.partition(":")
    if sep and not argument.startswith("//") and name.lower() in SOURCES:
        return SOURCES.create(spec, api_key=api_key)
    kind, location, version = _kind_of(spec)
    return SOURCES.create(f"{kind}:{location}", api_key=api_key if kind == "search-api" else "",
                          version=version)


def import_corpus(source: str | Path, dataset: str, store_path: str | Path | None = None,
                  *, replace: bool = False) -> tuple[CorpusStore, int]:
    """Copy one dataset's documents from a folder or tarball into the SQLite store.

    All or nothing: a source that fails part way (over a size cap, unreadable) leaves the
    store as it was, and a store this import created is removed.
    """
    path = Path(store_path or default_store_path())
    created = not path.exists()
    store = CorpusStore(path)
    try:
        count = store.import_documents(iter_documents(source, dataset),
                                       clear=dataset.lower() if replace else None)
        if count == 0:
            raise CorpusError(
                f"{source}: no documents for dataset {dataset!r} (expected {LAYOUT_ROOT}/"
                f"{dataset.lower()}/<fact id>/<n>.txt)")
    except BaseException:
        store.close()
        if created:
            for leftover in (path, path.with_name(path.name + "-journal")):
                leftover.unlink(missing_ok=True)
        raise
    return store, count
