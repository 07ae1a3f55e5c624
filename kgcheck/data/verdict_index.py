"""An on-disk index of a run folder's verdicts: which facts are done, with which digest.

A resume of a whole KG must know which of millions of facts already have a verdict without
holding the verdicts, or even their ids, in memory. ``VerdictIndex.build`` reads
``verdicts.jsonl`` once, as a stream, into a SQLite file beside it (``RESUME_INDEX``): per
fact the last valid record's place in the file, its ``fact_sha`` and whether a resume keeps
it. The runner asks it about the facts of the input in batches while they stream past, and
``rewrite`` leaves only the kept records in the verdicts file, in the order the facts first
appeared, through one atomic replace. The index is derived data: it is rebuilt at every
resume and removed when the run ends.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kgcheck.data.atomic import atomic_output
from kgcheck.data.runfolder import RESUME_INDEX, Warn, problem_note, verdict_lines

__all__ = ["VerdictIndex"]

# Ids asked about in one query (SQLite allows 32,766 parameters; smaller batches stay fast).
_BATCH = 500
_SCHEMA = """
CREATE TABLE verdicts (
    fact_id TEXT PRIMARY KEY,
    first INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL,
    sha TEXT,
    kept INTEGER NOT NULL
);
"""


class VerdictIndex:
    """The verdicts of one run folder by fact id, in a SQLite file (see the module)."""

    def __init__(self, verdicts: Path, db: sqlite3.Connection, path: Path) -> None:
        self.verdicts = verdicts
        self.path = path
        self._db = db

    @classmethod
    def build(cls, verdicts: Path, keep: Callable[[Mapping[str, Any]], bool],
              warn: Warn | None = None, path: Path | None = None) -> VerdictIndex:
        """Index ``verdicts`` (last valid record per fact); ``keep`` says what a resume keeps.

        Lines that are not verdicts are skipped and reported to ``warn`` once, as
        ``read_verdicts`` reports them. The index goes to ``path`` (default: the folder's
        ``RESUME_INDEX``; a shard's verdicts have one each).
        """
        path = path or verdicts.parent / RESUME_INDEX
        path.unlink(missing_ok=True)
        db = sqlite3.connect(path, isolation_level=None)
        # Derived data, rebuilt from verdicts.jsonl whenever needed: no journal, no fsync.
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        db.executescript(_SCHEMA)
        problems: list[str] = []
        rows: list[tuple[str, int, int, int, str | None, int]] = []
        upsert = ("INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(fact_id) DO "
                  "UPDATE SET offset=excluded.offset, length=excluded.length, "
                  "sha=excluded.sha, kept=excluded.kept")
        db.execute("BEGIN")
        for n, offset, length, record, problem in verdict_lines(verdicts):
            if record is None:
                problems.append(f"line {n}: {problem}")
                continue
            sha = record.get("fact_sha")
            rows.append((str(record["fact_id"]), n, offset, length,
                         sha if isinstance(sha, str) else None, int(keep(record))))
            if len(rows) >= 10_000:
                db.executemany(upsert, rows)
                rows.clear()
        db.executemany(upsert, rows)
        db.execute("COMMIT")
        if problems and warn is not None:
            warn(problem_note(verdicts, problems))
        return cls(verdicts, db, path)

    def __len__(self) -> int:
        """Return how many facts have a verdict a resume keeps."""
        return int(self._db.execute("SELECT count(*) FROM verdicts WHERE kept").fetchone()[0])

    def total(self) -> int:
        """Return how many facts have a verdict, kept or not."""
        return int(self._db.execute("SELECT count(*) FROM verdicts").fetchone()[0])

    def kept_among(self, ids: Sequence[str]) -> set[str]:
        """Return those of ``ids`` whose verdict a resume keeps."""
        return set(self.digests(ids))

    def digests(self, ids: Sequence[str]) -> dict[str, str | None]:
        """Return the ``fact_sha`` of the kept verdicts among ``ids`` (by id)."""
        found: dict[str, str | None] = {}
        for start in range(0, len(ids), _BATCH):
            part = ids[start:start + _BATCH]
            marks = ",".join("?" * len(part))
            found.update(self._db.execute(
                f"SELECT fact_id, sha FROM verdicts WHERE kept AND fact_id IN ({marks})", part))
        return found

    def rewrite(self) -> None:
        """Replace the verdicts file with its kept records: one per fact, first-seen order."""
        if not self.verdicts.exists():
            with atomic_output(self.verdicts):
                return  # a new run: an empty file to append to
        rows = self._db.execute(
            "SELECT offset, length FROM verdicts WHERE kept ORDER BY first")
        with self.verdicts.open("rb") as source, atomic_output(self.verdicts) as out:
            for offset, length in rows:
                source.seek(offset)
                line = source.read(length)
                out.write(line if line.endswith(b"\n") else line + b"\n")

    def close(self) -> None:
        """Close and remove the index file."""
        self._db.close()
        self.path.unlink(missing_ok=True)

