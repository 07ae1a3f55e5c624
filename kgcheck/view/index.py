"""The explorer's index of one run's verdicts: a SQLite table built once, then reused.

A run's verdicts (``verdicts.jsonl``, or a sharded run's ``shards/*.jsonl``) may hold
100,000 records or more; the explorer never keeps them in memory. One pass over the
folder's verdict files stores, per fact, what the fact table filters and sorts on (label,
gold, predicate, time, confidence, error type, votes) and which file its last record is in,
where it starts and how long it is, so the fact page reads that one line back. The index is
cached in the run folder (``RUN/.view-index.sqlite``, written whole by a rename) and rebuilt
when the verdict files change size or time; a folder that cannot be written gets its index
in a temporary file instead.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kgcheck.data.atomic import atomic_path
from kgcheck.data.runfolder import VIEW_INDEX, scan_folder, verdicts_stamp
from kgcheck.evals.calibration import verdict_confidence

__all__ = ["SCHEMA_VERSION", "confidence_of", "ensure_index", "index_rows"]

# Bump when the table's columns change: an older cached index is then rebuilt.
SCHEMA_VERSION = 3
BATCH = 5_000
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


def _build(db: Path, folder: Path, stamp: tuple[int, int]) -> None:
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
        conn.executemany("INSERT INTO meta VALUES (?, ?)",
                         [("version", str(SCHEMA_VERSION)), ("size", str(stamp[0])),
                          ("mtime_ns", str(stamp[1]))])
        conn.commit()
    finally:
        conn.close()


def _fresh(db: Path, stamp: tuple[int, int]) -> bool:
    if not db.is_file():
        return False
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        finally:
            conn.close()
    except sqlite3.Error:
        return False  # a torn or foreign file: build it again
    return meta == {"version": str(SCHEMA_VERSION), "size": str(stamp[0]),
                    "mtime_ns": str(stamp[1])}


def ensure_index(folder: Path) -> tuple[Path, bool]:
    """Return a fresh index of the run's verdicts and whether it lives in a temporary file.

    The cached ``RUN/.view-index.sqlite`` is reused while the verdict files are unchanged.
    """
    stamp = verdicts_stamp(folder)
    cached = folder / VIEW_INDEX
    if _fresh(cached, stamp):
        return cached, False
    try:
        with atomic_path(cached) as tmp:
            _build(tmp, folder, stamp)
        return cached, False
    except OSError:
        # A run folder one may read but not write (a colleague's, a read-only mount).
        db = Path(tempfile.mkdtemp(prefix="kgcheck-view-")) / VIEW_INDEX
        _build(db, folder, stamp)
        return db, True
