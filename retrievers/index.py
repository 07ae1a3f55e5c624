"""Chunk vectors: a Chroma collection per dataset and embedder, or an in-memory table.

Chroma is the default store (``PersistentClient`` under ``.kgcheck/chroma``, or a server by
URL); vectors are always computed here and passed in, never by Chroma's own embedding
function (which would download a model). Records carry dataset, fact, document and
sentence index, so a chunk embedded once is reused by every later run and model.
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import numpy as np

from kgcheck.data.paths import kgcheck_home
from kgcheck.registry import Registry, UnknownNameError
from kgcheck.retrievers.chunking import Chunk
from kgcheck.retrievers.embeddings import slug


class VectorIndexError(ValueError):
    """A vector index that cannot be opened (bad URL, unreachable server, bad path)."""


@dataclass(frozen=True)
class ChunkHit:
    """A chunk found by vector search, with its cosine similarity."""

    chunk_id: str
    doc_id: str
    similarity: float


class ChunkIndex(Protocol):
    """Where chunk vectors live."""

    location: str

    def missing(self, ids: Sequence[str]) -> list[str]:
        """Ids among ``ids`` that have no vector yet."""
        ...

    def add(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Store vectors for chunks (replacing any stored under the same ids)."""
        ...

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Return stored vectors by id (ids without one are left out)."""
        ...

    def query(self, vector: np.ndarray, *, fact_id: str, doc_ids: Sequence[str],
              k: int) -> list[ChunkHit]:
        """Find the ``k`` chunks of ``doc_ids`` of a fact closest to ``vector``."""
        ...

    def indexed_facts(self, fact_ids: Sequence[str]) -> set[str]:
        """Facts among ``fact_ids`` with at least one stored chunk."""
        ...


class MemoryIndex:
    """Vectors in a dict: for tests, one-off runs, and when no Chroma is wanted."""

    def __init__(self) -> None:
        self.location = "memory"
        self._vectors: dict[str, np.ndarray] = {}
        self._meta: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def missing(self, ids: Sequence[str]) -> list[str]:
        """Ids not stored."""
        with self._lock:
            return [i for i in ids if i not in self._vectors]

    def add(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Store vectors."""
        with self._lock:
            for chunk, vector in zip(chunks, vectors, strict=True):
                self._vectors[chunk.id] = np.asarray(vector, dtype=np.float32)
                self._meta[chunk.id] = (chunk.fact_id, chunk.doc_id)

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Return stored vectors by id."""
        with self._lock:
            return {i: self._vectors[i] for i in ids if i in self._vectors}

    def query(self, vector: np.ndarray, *, fact_id: str, doc_ids: Sequence[str],
              k: int) -> list[ChunkHit]:
        """Exact search over the fact's stored chunks."""
        wanted = set(doc_ids)
        with self._lock:
            ids = [i for i, (f, d) in self._meta.items() if f == fact_id and d in wanted]
            if not ids:
                return []
            matrix = np.stack([self._vectors[i] for i in ids])
        sims = matrix @ np.asarray(vector, dtype=np.float32)
        order = np.lexsort((np.arange(len(ids)), -sims))[:k]
        return [ChunkHit(ids[i], self._meta[ids[i]][1], float(sims[i])) for i in order]

    def indexed_facts(self, fact_ids: Sequence[str]) -> set[str]:
        """Facts with stored chunks."""
        with self._lock:
            have = {f for f, _ in self._meta.values()}
        return {f for f in fact_ids if f in have}


INDEX_LOCK = ".kgcheck-index.lock"


class IndexBusyError(VectorIndexError):
    """Another process is building the same Chroma index."""


@contextmanager
def index_lock(path: str = "") -> Iterator[None]:
    """Hold a Chroma folder's build lock, so that two index builds never write it at once.

    Chroma's persistent folder is not safe for two writing processes; the second build
    gets a clear error instead of a crash halfway.
    """
    folder = Path(path or default_chroma_path()).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = (folder / INDEX_LOCK).open("w")
    except OSError as exc:
        raise VectorIndexError(f"{folder}: cannot use it as a Chroma folder "
                               f"({exc.strerror or exc})") from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexBusyError(f"another `kgcheck index` is building the index in {folder}; "
                                 "wait for it to end (then run again: finished facts are "
                                 "skipped), or pass another --chroma-path") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def default_chroma_path() -> Path:
    """``.kgcheck/chroma`` in the project (or ``$KGCHECK_HOME/chroma``)."""
    return kgcheck_home() / "chroma"


@lru_cache(maxsize=8)
def chroma_client(path: str = "", url: str = "") -> Any:
    """Open a Chroma client: HTTP to ``url`` when given, else persistent at ``path``."""
    import chromadb

    settings = chromadb.Settings(anonymized_telemetry=False)
    if url:
        parsed = urlparse(url if "://" in url else f"http://{url}")
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise VectorIndexError(f"--chroma-url {url!r}: expected http(s)://HOST:PORT")
        port = parsed.port or (443 if parsed.scheme == "https" else 8000)
        try:
            return chromadb.HttpClient(host=parsed.hostname, port=port,
                                       ssl=parsed.scheme == "https", settings=settings)
        except Exception as exc:  # noqa: BLE001 - the client raises several kinds
            raise VectorIndexError(f"Chroma server at {url}: not reachable ({exc})") from None
    folder = Path(path or default_chroma_path()).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(folder), settings=settings)


def collection_name(dataset: str, embedder_name: str) -> str:
    """Name the collection of one dataset's chunks for one embedder."""
    return f"kgcheck-{slug(dataset)}-{slug(embedder_name)}"[:500]


class ChromaIndex:
    """Chunk vectors in a Chroma collection (cosine space)."""

    def __init__(self, dataset: str, embedder_name: str, *, path: str = "",
                 url: str = "") -> None:
        self.client = chroma_client(path, url)
        self.name = collection_name(dataset, embedder_name)
        self.location = f"{url or path or default_chroma_path()}#{self.name}"
        self.collection = self.client.get_or_create_collection(
            self.name, embedding_function=None,
            configuration={"hnsw": {"space": "cosine"}},
            metadata={"dataset": dataset.lower(), "embedder": embedder_name},
        )
        self._lock = threading.Lock()

    def missing(self, ids: Sequence[str]) -> list[str]:
        """Ids not stored yet."""
        if not ids:
            return []
        with self._lock:
            found = set(self.collection.get(ids=list(ids), include=[])["ids"])
        return [i for i in ids if i not in found]

    def add(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Upsert chunk vectors with their metadata and sentence text."""
        if not chunks:
            return
        with self._lock:
            self.collection.upsert(
                ids=[c.id for c in chunks],
                embeddings=np.asarray(vectors, dtype=np.float32),
                documents=[c.sentence for c in chunks],
                metadatas=[{"dataset": c.dataset, "fact_id": c.fact_id, "doc_id": c.doc_id,
                            "index": c.index} for c in chunks],
            )

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Return stored vectors by id."""
        if not ids:
            return {}
        with self._lock:
            got = self.collection.get(ids=list(ids), include=["embeddings"])
        return {i: np.asarray(v, dtype=np.float32)
                for i, v in zip(got["ids"], got["embeddings"], strict=True)}

    def query(self, vector: np.ndarray, *, fact_id: str, doc_ids: Sequence[str],
              k: int) -> list[ChunkHit]:
        """Nearest chunks of the fact's documents, by Chroma's cosine distance."""
        if not doc_ids or k <= 0:
            return []
        where = {"$and": [{"fact_id": fact_id}, {"doc_id": {"$in": list(doc_ids)}}]}
        with self._lock:
            found = self.collection.query(query_embeddings=[np.asarray(vector).tolist()],
                                          n_results=k, where=where, include=["metadatas",
                                                                              "distances"])
        return [ChunkHit(i, str(m["doc_id"]), 1.0 - float(d)) for i, m, d in zip(
            found["ids"][0], found["metadatas"][0], found["distances"][0], strict=True)]

    def indexed_facts(self, fact_ids: Sequence[str]) -> set[str]:
        """Facts with at least one stored chunk (asked in batches)."""
        done: set[str] = set()
        ids = list(fact_ids)
        for start in range(0, len(ids), 200):
            batch = ids[start:start + 200]
            with self._lock:
                got = self.collection.get(where={"fact_id": {"$in": batch}},
                                          include=["metadatas"])
            done |= {str(m["fact_id"]) for m in got["metadatas"]}
        return done


def memory(argument: str = "", **_: str) -> ChunkIndex:
    """``memory``: vectors in this process only, gone when it ends."""
    return MemoryIndex()


def chroma(argument: str = "", *, dataset: str, embedder_name: str, path: str = "",
           url: str = "") -> ChunkIndex:
    """``chroma``: a Chroma collection, in a folder (``path``) or on a server (``url``)."""
    return ChromaIndex(dataset, embedder_name, path=path, url=url)


class UnknownIndexError(VectorIndexError, UnknownNameError):
    """No index backend is registered under that name."""


INDEXES: Registry[Callable[..., ChunkIndex]] = Registry(
    "index backend", group="kgcheck.indexes", unknown=UnknownIndexError)
INDEXES.register("chroma", chroma)
INDEXES.register("memory", memory)


def open_index(kind: str, dataset: str, embedder_name: str, *, path: str = "",
               url: str = "") -> ChunkIndex:
    """Open (once per process) the chunk index: ``chroma``, ``memory`` or a plugin's."""
    return INDEXES.create(kind or "chroma", dataset=dataset.lower(),
                          embedder_name=embedder_name, path=str(path), url=url)
