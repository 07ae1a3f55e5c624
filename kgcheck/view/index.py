"""The explorer's index of one run's verdicts: a SQLite table built once, then reused.

A run's verdicts (``verdicts.jsonl``, or a sharded run's ``shards/*.jsonl``) may hold
100,000 records or more; the explorer never keeps them in memory. One pass over the
folder's verdict files stores, per fact, what the fact table filters and sorts on (label,
gold, predicate, time, confidence, error type, votes) and which file its last record is in,
where it starts and how long it is, so the fact page reads that one line back.

The index is kept where only kgcheck writes, never in the run folder (which others may
write to): ``$KGCHECK_CACHE_DIR/view/<key>.sqlite``, the key a hash of the run folder's
resolved path. It is written whole by a rename and rebuilt when the verdict files'
fingerprint (names, sizes, times, and the bytes at each file's start and end) changes; a
cache folder that cannot be written gets the index in a temporary file instead. What the
index says is still checked when a record is read back (``kgcheck.view.explorer``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgcheck.data.atomic import atomic_path
from kgcheck.data.runfolder import scan_folder, verdict_files
from kgcheck.evals.calibration import verdict_confidence
from kgcheck.providers.cache import default_cache_dir

__all__ = ["SCHEMA_VERSION", "RunIndex", "confidence_of", "ensure_index", "fingerprint",
           "index_dir", "index_path", "index_rows"]

# Bump when the table's columns change: an older cached index is then rebuilt.
SCHEMA_VERSION = 4
BATCH = 5_000
# Bytes read at each end of a verdict file for its fingerprint: a file rewritten to the same
# size within the clock's resolution still differs there (a new run id, a new last fact).
EDGE_BYTES = 64 * 1024
INDEX_FOLDER = "view"
FACT_COLUMNS = ("fact_id", "seq", "label", "gold", "subject", "predicate", "object", "seconds",
                "tokens_in", "tokens_out", "confidence", "error_type", "votes", "file",
                "offset", "length")
SCHEMA = """
CREATE TABLE facts (
    fact_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, label TEXT NOT NULL, gold TEXT,
    subject TEXT, predicate TEXT, object TEXT, seconds REAL, tokens_in INTEGER,
    tokens_out INTEGER, confidence REAL, error_type TEXT, votes TEXT,
    file TEXT NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL);
CREATE INDEX facts_seq ON facts(seq);
CREATE INDEX facts_predicate ON facts(predicate);
CREATE INDEX facts_label ON facts(label);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
"""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def confidence_of(record: Mapping[str, Any]) -> float | None:
    """Return a verdict's confidence in [0, 1], where it records one (top level or details).

    A run's verdicts (those with a ``confidence_source``) give the probability that the fact
    is true; the explorer ranks and calibrates the confidence that the verdict is right.
    """
    raw = record.get("details")
    details: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    value = _number(record.get("confidence", details.get("confidence")))
    if value is not None and record.get("confidence_source"):
        value = verdict_confidence({"label": record.get("label"), "confidence": value})
    return value if value is not None and 0.0 <= value <= 1.0 else None


def index_rows(scanned: Iterable[tuple[Path, int, int, dict[str, Any]]], folder: Path
               ) -> Iterable[tuple[Any, ...]]:
    """Turn ``scan_folder`` output into rows of the ``facts`` table.

    A record's file is kept relative to ``folder`` (the run folder may move).
    """
    for seq, (path, offset, length, record) in enumerate(scanned):
        raw = record.get("details")
        details: dict[str, Any] = raw if isinstance(raw, dict) else {}
        votes = {str(v["model"]): str(v.get("label") or "NA")
                 for v in (details.get("votes") or []) if isinstance(v, dict) and v.get("model")}
        error_type = (str(details.get("error_type") or "Error") if record.get("error")
                      else None)
        gold = record.get("gold")
        yield (str(record["fact_id"]), seq, record["label"],
               gold if gold in ("T", "F") else None, _text(record.get("subject")),
               _text(record.get("predicate")), _text(record.get("object")),
               _number(record.get("seconds")), _count(record.get("tokens_in")),
               _count(record.get("tokens_out")), confidence_of(record), error_type,
               json.dumps(votes) if votes else None, path.relative_to(folder).as_posix(),
               offset, length)


def index_dir() -> Path:
    """Return the folder of the explorer's indexes: ``view/`` in kgcheck's cache folder."""
    return default_cache_dir() / INDEX_FOLDER


def index_path(folder: Path) -> Path:
    """Return where the index of a run folder is kept (keyed by its resolved path)."""
    key = hashlib.sha256(str(Path(folder).resolve()).encode("utf-8", "surrogateescape"))
    return index_dir() / f"{key.hexdigest()[:32]}.sqlite"


def fingerprint(files: Iterable[Path], folder: Path) -> str:
    """Return a fingerprint of a run's verdict files: an index is stale once it changes.

    Each file's name, size, modification time and the bytes at its start and end.
    """
    digest = hashlib.sha256()
    for path in files:
        try:
            stat = path.stat()
            with path.open("rb") as fh:
                head = fh.read(EDGE_BYTES)
                fh.seek(max(0, stat.st_size - EDGE_BYTES))
                tail = fh.read(EDGE_BYTES)
        except FileNotFoundError:
            continue
        digest.update(json.dumps([path.relative_to(folder).as_posix(), stat.st_size,
                                  stat.st_mtime_ns]).encode())
        digest.update(hashlib.sha256(head).digest() + hashlib.sha256(tail).digest())
    return digest.hexdigest()


@dataclass(frozen=True)
class RunIndex:
    """A run's index: where it is, whether it is temporary, the verdict files it covers."""

    path: Path
    temporary: bool
    # The verdict files' names relative to the run folder: the only files a record is read
    # from, whatever the index says.
    files: frozenset[str]


def _meta(folder: Path, stamp: str) -> dict[str, str]:
    return {"version": str(SCHEMA_VERSION), "folder": str(folder.resolve()),
            "fingerprint": stamp}


def _build(db: Path, folder: Path, meta: Mapping[str, str]) -> None:
    conn = sqlite3.connect(db)
    try:
        # Nothing else reads the file until it is renamed into place: no journal needed.
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.executescript(SCHEMA)
        placeholders = ", ".join("?" * len(FACT_COLUMNS))
        updates = ", ".join(f"{c} = excluded.{c}" for c in FACT_COLUMNS
                            if c not in ("fact_id", "seq"))
        # A fact checked again keeps its place (its first line) and takes its last record.
        insert = (f"INSERT INTO facts ({', '.join(FACT_COLUMNS)}) VALUES ({placeholders}) "
                  f"ON CONFLICT(fact_id) DO UPDATE SET {updates}")
        batch: list[tuple[Any, ...]] = []
        for row in index_rows(scan_folder(folder), folder):
            batch.append(row)
            if len(batch) >= BATCH:
                conn.executemany(insert, batch)
                batch.clear()
        conn.executemany(insert, batch)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
        conn.commit()
    finally:
        conn.close()


def _fresh(db: Path, meta: Mapping[str, str]) -> bool:
    if not db.is_file():
        return False
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            found = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        finally:
            conn.close()
    except sqlite3.Error:
        return False  # a torn or foreign file: build it again
    return found == dict(meta)


def ensure_index(folder: Path) -> RunIndex:
    """Return a fresh index of the run's verdicts, built unless the cached one still fits.

    Nothing is written in the run folder: the index is ``index_path(folder)``, or a
    temporary file when the cache folder cannot be written.
    """
    folder = Path(folder)
    files = verdict_files(folder)
    names = frozenset(p.relative_to(folder).as_posix() for p in files)
    meta = _meta(folder, fingerprint(files, folder))
    cached = index_path(folder)
    if _fresh(cached, meta):
        return RunIndex(cached, False, names)
    try:
        # Only its owner may read the cache: the indexes name facts of private runs.
        cached.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with atomic_path(cached) as tmp:
            _build(tmp, folder, meta)
        return RunIndex(cached, False, names)
    except OSError:
        # A cache folder one may not write (a read-only home, a full disk).
        db = Path(tempfile.mkdtemp(prefix="kgcheck-view-")) / cached.name
        _build(db, folder, meta)
        return RunIndex(db, True, names)
