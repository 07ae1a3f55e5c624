"""A persistent cache of model answers, so that no run pays twice for the same call.

An answer is keyed by the model (``provider:model`` and the server URL), the full message
list, the sampling settings and a draw index. The draw index keeps self-consistency honest:
the k samples of one fact at temperature > 0 are k different keys, so each gets its own
answer, while a re-run, a resumed run or a sweep cell asking the same call again is served
from the cache. A run with repeats adds the repeat index, so repeats never share an
answer. Replay needs no cache: it already serves recorded answers.

The cache is one SQLite file (WAL mode: readers never wait for a writer, and several
processes of one run may share it). A run turns it on with ``use_cache(...)``; the calls of
every graph it runs (subgraphs included, and on every task the run starts) see it through a
context variable. A corrupt file is moved aside with a warning and the run goes on uncached.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from kgcheck.providers.transports import redact_url

# The settings that change what a model answers; timeouts and retries do not.
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_tokens", "repeat_penalty", "base_url",
                 "constraint")
# A local model's answer also depends on whether llama.cpp reused a computed prefix.
LOCAL_KEYS = ("local_prefix_reuse",)
# Raised whenever what kgcheck sends for the same settings changes (2: a call held to an
# answer format asks for more alternatives and no repeat penalty), so that no answer to an
# older request is served for a newer one.
KEY_VERSION = 2
CACHE_FILE = "answers.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    tokens_in INTEGER,
    tokens_out INTEGER,
    seconds REAL,
    created REAL NOT NULL,
    logprobs TEXT
)
"""
# Caches written before answers kept their log-probabilities lack the column.
ADD_LOGPROBS = "ALTER TABLE answers ADD COLUMN logprobs TEXT"


class CacheWarning(UserWarning):
    """The answer cache could not be used; the run goes on without it."""


def default_cache_dir() -> Path:
    """Return where answers are cached: ``$KGCHECK_CACHE_DIR``, else the user cache folder."""
    if os.environ.get("KGCHECK_CACHE_DIR"):
        return Path(os.environ["KGCHECK_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kgcheck"


def default_cache_path() -> Path:
    """Return the default answer cache file."""
    return default_cache_dir() / CACHE_FILE


@dataclass(frozen=True)
class CachedAnswer:
    """An answer as the cache keeps it."""

    text: str
    tokens_in: int | None
    tokens_out: int | None
    seconds: float | None
    # The answer tokens' log-probabilities, when the server gave them (JSON-plain).
    logprobs: list[dict[str, Any]] | None = None


def answer_key(model: str, messages: Sequence[BaseMessage], settings: Mapping[str, Any],
               draw: int = 0, repeat: int | None = None) -> str:
    """Return the cache key of a call: a SHA-256 over everything that shapes its answer.

    ``repeat`` is the repeat index of a run with repeats: each repeat asks anew, so no
    answer is shared between two repeats (nor with a run without repeats).
    """
    keys = SAMPLING_KEYS + LOCAL_KEYS if model.startswith("local:") else SAMPLING_KEYS
    payload: dict[str, Any] = {
        "version": KEY_VERSION,
        "model": model,
        "messages": [[m.type, m.content] for m in messages],
        "settings": {k: (redact_url(str(settings[k])) if k == "base_url" else settings[k])
                     for k in keys if k in settings},
        "draw": int(draw),
    }
    if repeat is not None:
        payload["repeat"] = int(repeat)
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_logprobs(text: str | None) -> list[dict[str, Any]] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None  # a damaged entry loses its confidence, not its answer
    return value if isinstance(value, list) else None


class AnswerCache:
    """Model answers in one SQLite file, with hit and miss counts for the run's summary."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = self._open()

    def _open(self) -> sqlite3.Connection | None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = self._connect()
            db.execute("SELECT count(*) FROM answers").fetchone()
            return db
        except sqlite3.DatabaseError as exc:
            self._set_aside(exc)
            return None
        except OSError as exc:
            warnings.warn(f"answer cache {self.path} cannot be opened ({exc}); running "
                          "without it", CacheWarning, stacklevel=3)
            return None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, check_same_thread=False,
                             isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(SCHEMA)
        columns = {row[1] for row in db.execute("PRAGMA table_info(answers)")}
        if "logprobs" not in columns:
            db.execute(ADD_LOGPROBS)
        return db

    def _set_aside(self, exc: Exception) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        try:
            os.replace(self.path, aside)
            where = f"moved it to {aside}"
        except OSError:
            where = "could not move it aside"
        warnings.warn(f"answer cache {self.path} is not a readable cache ({exc}); {where}, "
                      "running without a cache", CacheWarning, stacklevel=4)
        return None

    @property
    def enabled(self) -> bool:
        """Whether answers are read and written (False after a failure to open)."""
        return self._db is not None

    def get(self, key: str) -> CachedAnswer | None:
        """Return the cached answer for ``key``, counting a hit or a miss."""
        if self._db is None:
            return None
        with self._lock:
            try:
                row = self._db.execute(
                    "SELECT text, tokens_in, tokens_out, seconds, logprobs FROM answers "
                    "WHERE key = ?",
                    (key,)).fetchone()
            except sqlite3.DatabaseError as exc:
                self._disable(exc)
                return None
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
            text, tokens_in, tokens_out, seconds, logprobs = row
            return CachedAnswer(text, tokens_in, tokens_out, seconds,
                                _read_logprobs(logprobs))

    def put(self, key: str, model: str, answer: CachedAnswer) -> None:
        """Store an answer (the first one stored for a key stays)."""
        if self._db is None:
            return
        with self._lock:
            try:
                self._db.execute(
                    "INSERT OR IGNORE INTO answers (key, model, text, tokens_in, tokens_out, "
                    "seconds, created, logprobs) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (key, model, answer.text, answer.tokens_in, answer.tokens_out,
                     answer.seconds, time.time(),
                     None if answer.logprobs is None else json.dumps(answer.logprobs)))
                self.writes += 1
            except sqlite3.DatabaseError as exc:
                self._disable(exc)

    def _disable(self, exc: Exception) -> None:
        warnings.warn(f"answer cache {self.path} failed ({exc}); going on without it",
                      CacheWarning, stacklevel=4)
        db, self._db = self._db, None
        if db is not None:
            db.close()

    async def aget(self, key: str) -> CachedAnswer | None:
        """Look ``key`` up off the event loop (async nodes do no blocking I/O)."""
        return await asyncio.to_thread(self.get, key)

    async def aput(self, key: str, model: str, answer: CachedAnswer) -> None:
        """Store an answer off the event loop."""
        await asyncio.to_thread(self.put, key, model, answer)

    def stats(self) -> dict[str, Any]:
        """Return the counts a run's summary reports."""
        asked = self.hits + self.misses
        return {"path": str(self.path), "hits": self.hits, "misses": self.misses,
                "hit_rate": round(self.hits / asked, 4) if asked else None}

    def close(self) -> None:
        """Close the database file."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


_ACTIVE: contextvars.ContextVar[AnswerCache | None] = contextvars.ContextVar(
    "kgcheck_answer_cache", default=None)


def active_cache() -> AnswerCache | None:
    """Return the cache of the run this call belongs to, if it has one."""
    return _ACTIVE.get()


@contextmanager
def serving(cache: AnswerCache | None) -> Iterator[None]:
    """Serve the calls made inside this block from an open cache (kept open after it)."""
    token = _ACTIVE.set(cache)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


@contextmanager
def use_cache(path: str | Path | None) -> Iterator[AnswerCache | None]:
    """Serve the model calls made inside this block from (and into) the cache at ``path``.

    ``None`` turns caching off for the block.
    """
    cache = AnswerCache(path) if path is not None else None
    token = _ACTIVE.set(cache)
    try:
        yield cache
    finally:
        _ACTIVE.reset(token)
        if cache is not None:
            cache.close()
