"""What the run explorer shows, computed on the server: runs, pages of facts, one fact, a diff.

Each run's verdicts are indexed once (``kgcheck.view.index``) and attached to one SQLite
connection as schema ``r<i>``; a person's review labels (``labels.csv``) and an error
analysis's clusters (``kgcheck errors --out DIR``) are small tables beside them. A page of
the fact table is one query with ``LIMIT``/``OFFSET``: a 100,000-verdict run pages as fast
as a small one, and only the verdicts shown are read back from ``verdicts.jsonl``.

A record is read back only from one of the run's own verdict files, within that file, and
only up to ``max_record_bytes()`` (``$KGCHECK_VIEW_MAX_RECORD_BYTES``, 16 MiB by default),
whatever the index says: an index edited by someone else cannot make the explorer read
another file or fill its memory.

The truth a verdict is judged against is the person's review decision where there is one,
else the gold label (``kgcheck.data.truths``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any

from kgcheck.data.input_limits import Cap
from kgcheck.data.runfolder import (
    VERDICTS,
    LabelsError,
    RunFolderError,
    has_verdicts,
    read_run_info,
    read_summary,
    read_verdict_at,
)
from kgcheck.data.truths import review_decisions
from kgcheck.evals.errors.outputs import read_errors
from kgcheck.evals.metrics import classification_report
from kgcheck.view.index import ensure_index

__all__ = ["FILTERS", "MAX_PAGE", "MAX_PAGE_NUMBER", "MAX_RECORD_ENV", "Explorer",
           "ExplorerError", "FactQuery", "ViewRun", "max_record_bytes"]

# What the fact table can keep, by name.
FILTERS = ("wrong", "right", "na", "nei", "failed", "low", "reviewed")
LOW_CONFIDENCE = 0.6
# Most facts on one page, and the highest page number: page * size stays far inside
# SQLite's 64-bit integers.
MAX_PAGE = 500
MAX_PAGE_NUMBER = 10**9
MAX_RECORD_ENV = "KGCHECK_VIEW_MAX_RECORD_BYTES"
# A verdict with its evidence and conversation is kilobytes, rarely a megabyte.
DEFAULT_MAX_RECORD_BYTES = 16 * 2**20
TRUTH = "COALESCE(rv.label, f.gold)"
CONDITIONS = {
    "wrong": f"f.label IN ('T','F') AND {TRUTH} IN ('T','F') AND f.label != {TRUTH}",
    "right": f"f.label = {TRUTH}",
    "na": "f.label = 'NA'",
    # Not enough information: an NEI verdict (the model abstained), or NA without a failure
    # (the model could not tell, or had no evidence), apart from NA after a failed call.
    "nei": "f.label = 'NEI' OR (f.label = 'NA' AND f.error_type IS NULL)",
    "failed": "f.error_type IS NOT NULL",
    # confidence is P(T): a verdict is unsure when neither label is likely, max(p, 1-p) < low.
    "low": "f.confidence IS NOT NULL AND MAX(f.confidence, 1.0 - f.confidence) < :low",
    "reviewed": "rv.label IS NOT NULL",
}


class ExplorerError(ValueError):
    """A run, fact or query the explorer cannot serve; the message says which and why."""


def max_record_bytes() -> int:
    """Return the most bytes one verdict record may take: ``$KGCHECK_VIEW_MAX_RECORD_BYTES``."""
    return Cap(MAX_RECORD_ENV, DEFAULT_MAX_RECORD_BYTES, "bytes").value(ExplorerError)


def _page_slice(page: int, size: int) -> tuple[int, int]:
    """Return (page, size) of a page asked for: size clamped to 1..MAX_PAGE, page checked."""
    if not 0 <= int(page) <= MAX_PAGE_NUMBER:
        raise ExplorerError(f"page {page}: expected 0 to {MAX_PAGE_NUMBER:,}")
    return int(page), max(1, min(int(size), MAX_PAGE))


@dataclass
class ViewRun:
    """One run folder the explorer shows."""

    number: int
    folder: Path
    name: str
    info: dict[str, Any]
    index: Path
    temporary: bool
    # The verdict files (relative to the folder) that records may be read from.
    files: frozenset[str] = frozenset()
    reviews: dict[str, str] = field(default_factory=dict)

    @property
    def schema(self) -> str:
        """The SQLite schema its index is attached as."""
        return f"r{self.number}"


@dataclass
class FactQuery:
    """One page of the fact table: which run, which filters, which slice."""

    run: int = 0
    filters: Sequence[str] = ()
    predicate: str | None = None
    cluster: int | None = None
    disagree_with: int | None = None
    search: str | None = None
    low: float = LOW_CONFIDENCE
    page: int = 0
    size: int = 50


def _run_name(folder: Path, taken: set[str]) -> str:
    name = folder.resolve().name
    base, n = name, 2
    while name in taken:
        name, n = f"{base} ({n})", n + 1
    taken.add(name)
    return name


class Explorer:
    """The explorer's data: open runs, their indexes, reviews and error clusters."""

    def __init__(self, folders: Sequence[Path], errors: Path | None = None) -> None:
        if not folders:
            raise ExplorerError("name at least one run folder")
        self.lock = threading.Lock()
        self.runs: list[ViewRun] = []
        self.max_record = max_record_bytes()
        # The runs do not change while they are shown: each summary is computed once.
        self._summaries: dict[int, dict[str, Any]] = {}
        # URI names on: the run indexes are attached read-only (``file:...?mode=ro``).
        self.conn = sqlite3.connect("file::memory:", uri=True, check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        self.conn.executescript(
            "CREATE TABLE reviews (run INTEGER, fact_id TEXT, label TEXT, "
            "PRIMARY KEY (run, fact_id));"
            "CREATE TABLE clusters (run INTEGER, fact_id TEXT, cluster INTEGER, "
            "cluster_label TEXT, category TEXT, explanation TEXT, PRIMARY KEY (run, fact_id));")
        taken: set[str] = set()
        try:
            for number, folder in enumerate(folders):
                self._open(number, Path(folder), taken)
            if errors is not None:
                self._load_errors(Path(errors))
        except BaseException:
            self.close()
            raise

    def _open(self, number: int, folder: Path, taken: set[str]) -> None:
        info = read_run_info(folder, ExplorerError)
        if not has_verdicts(folder):
            raise ExplorerError(f"{folder}: no {VERDICTS}; the run has not started")
        index = ensure_index(folder)
        run = ViewRun(number, folder, _run_name(folder, taken), info, index.path,
                      index.temporary, index.files)
        self.runs.append(run)
        self.conn.execute(f"ATTACH DATABASE ? AS {run.schema}",
                          (f"file:{index.path}?mode=ro",))
        try:
            run.reviews = review_decisions(folder)
        except LabelsError as exc:
            raise ExplorerError(str(exc)) from None
        if run.reviews:
            self.conn.executemany("INSERT INTO reviews VALUES (?, ?, ?)",
                                  [(number, fid, lab) for fid, lab in run.reviews.items()])

    def _load_errors(self, folder: Path) -> None:
        by_name = {run.name: run.number for run in self.runs}
        by_path = {str(run.folder.resolve()): run.number for run in self.runs}
        rows = []
        for record in read_errors(folder):
            number = by_path.get(str(record.get("run_path") or ""),
                                 by_name.get(str(record["run"])))
            if number is None:
                continue
            rows.append((number, str(record["fact_id"]), int(record["cluster"]),
                         record.get("cluster_label"), record.get("category"),
                         record.get("explanation")))
        self.conn.executemany("INSERT OR REPLACE INTO clusters VALUES (?, ?, ?, ?, ?, ?)", rows)

    def close(self) -> None:
        """Close the connection and drop indexes that live in temporary files."""
        self.conn.close()
        for run in self.runs:
            if run.temporary:
                shutil.rmtree(run.index.parent, ignore_errors=True)

    # -- queries -------------------------------------------------------------------------

    def run(self, number: int) -> ViewRun:
        """Return run ``number`` (0-based, in the order given)."""
        if not 0 <= number < len(self.runs):
            raise ExplorerError(f"no run {number}: the explorer shows runs 0 to "
                                f"{len(self.runs) - 1}")
        return self.runs[number]

    def _rows(self, sql: str, params: dict[str, Any] | Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def _from(self, run: ViewRun) -> str:
        return (f"FROM {run.schema}.facts f "
                f"LEFT JOIN reviews rv ON rv.run = {run.number} AND rv.fact_id = f.fact_id "
                f"LEFT JOIN clusters c ON c.run = {run.number} AND c.fact_id = f.fact_id ")

    def outcomes(self, number: int) -> list[tuple[str, str, str | None, float | None,
                                                  float | None, str | None]]:
        """Every fact's (id, label, truth, seconds, confidence, votes JSON), in run order."""
        run = self.run(number)
        rows = self._rows(f"SELECT f.fact_id, f.label, {TRUTH} AS truth, f.seconds, "
                          f"f.confidence, f.votes {self._from(run)} ORDER BY f.seq")
        return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def confidence_pairs(self, number: int, limit: int | None = None
                         ) -> list[tuple[float, bool]]:
        """Return (confidence, right) of the run's verdicts with a confidence and a truth.

        In run order; ``limit`` keeps the first ones only (1: is there any?).
        """
        run = self.run(number)
        rows = self._rows(f"SELECT f.confidence, f.label = {TRUTH} {self._from(run)}"
                          f"WHERE f.confidence IS NOT NULL AND {TRUTH} IN ('T', 'F') "
                          "ORDER BY f.seq LIMIT ?", (-1 if limit is None else limit,))
        return [(r[0], bool(r[1])) for r in rows]

    def summary(self, number: int) -> dict[str, Any]:
        """Return the counts, scores per class and what the run is, for the runs page."""
        if number not in self._summaries:
            self._summaries[number] = self._summary(number)
        return self._summaries[number]

    def _summary(self, number: int) -> dict[str, Any]:
        run = self.run(number)
        counts = {r[0]: r[1] for r in self._rows(
            f"SELECT f.label, COUNT(*) FROM {run.schema}.facts f GROUP BY f.label")}
        facts = self._rows(f"SELECT f.label, {TRUTH} {self._from(run)}")
        gold = [{"T": True, "F": False}.get(r[1]) for r in facts]
        report = classification_report(gold, [r[0] for r in facts])
        extra = self._rows(
            f"SELECT SUM({CONDITIONS['wrong']}), SUM({CONDITIONS['failed']}), "
            f"SUM(f.confidence IS NOT NULL), SUM(c.cluster IS NOT NULL), "
            f"SUM(f.seconds), SUM(f.tokens_in), SUM(f.tokens_out) {self._from(run)}")[0]
        info = run.info
        return {
            "run": number, "name": run.name, "folder": str(run.folder),
            "dataset": info.get("dataset"), "method": info.get("method"),
            "strategy": info.get("strategy"), "models": info.get("models") or [],
            "judge": info.get("judge"), "run_id": info.get("run_id"),
            "facts": sum(counts.values()), "labels": counts, "wrong": extra[0] or 0,
            "failed": extra[1] or 0, "with_confidence": extra[2] or 0,
            "clustered": extra[3] or 0, "reviewed": len(run.reviews),
            "seconds": extra[4], "tokens_in": extra[5], "tokens_out": extra[6],
            "scores": {k: report[k] for k in (
                "n", "precision_true", "recall_true", "f1_true", "precision_false",
                "recall_false", "f1_false", "accuracy", "macro_f1", "invalid")},
            "summary": read_summary(run.folder),
        }

    def predicates(self, number: int) -> list[dict[str, Any]]:
        """List the run's predicates, most facts first."""
        run = self.run(number)
        rows = self._rows(f"SELECT predicate, COUNT(*) AS n FROM {run.schema}.facts "
                          "GROUP BY predicate ORDER BY n DESC, predicate")
        return [{"predicate": r[0], "facts": r[1]} for r in rows]

    def clusters(self, number: int) -> list[dict[str, Any]]:
        """List the error clusters of the run's facts, if an error analysis was loaded."""
        rows = self._rows("SELECT cluster, MAX(cluster_label), COUNT(*) FROM clusters "
                          "WHERE run = ? GROUP BY cluster ORDER BY cluster", (number,))
        return [{"cluster": r[0], "label": r[1], "facts": r[2]} for r in rows]

    def facts(self, query: FactQuery) -> dict[str, Any]:
        """Return one page of the fact table and how many facts the filters keep."""
        run = self.run(query.run)
        unknown = [f for f in query.filters if f not in CONDITIONS]
        if unknown:
            raise ExplorerError(f"unknown filter {', '.join(unknown)}: expected "
                                f"{', '.join(FILTERS)}")
        page, size = _page_slice(query.page, query.size)
        where = [CONDITIONS[f] for f in query.filters]
        params: dict[str, Any] = {"low": float(query.low), "limit": size,
                                  "offset": page * size}
        join = ""
        other_label = "NULL"
        if query.disagree_with is not None:
            other = self.run(query.disagree_with)
            if other.number == run.number:
                raise ExplorerError("compare a run with another run, not with itself")
            join = f"JOIN {other.schema}.facts g ON g.fact_id = f.fact_id "
            where.append("g.label != f.label")
            other_label = "g.label"
        if query.predicate:
            where.append("f.predicate = :predicate")
            params["predicate"] = query.predicate
        if query.cluster is not None:
            where.append("c.cluster = :cluster")
            params["cluster"] = int(query.cluster)
        if query.search:
            where.append("(f.fact_id LIKE :q OR f.subject LIKE :q OR f.object LIKE :q "
                         "OR f.predicate LIKE :q)")
            params["q"] = f"%{query.search}%"
        body = self._from(run) + join + (f"WHERE {' AND '.join(where)} " if where else "")
        total = self._rows(f"SELECT COUNT(*) {body}", params)[0][0]
        rows = self._rows(
            f"SELECT f.fact_id, f.label, f.gold, rv.label AS review, {TRUTH} AS truth, "
            f"f.subject, f.predicate, f.object, f.seconds, f.confidence, f.error_type, "
            f"c.cluster, c.cluster_label, {other_label} AS other_label {body}"
            "ORDER BY f.seq LIMIT :limit OFFSET :offset", params)
        return {"run": run.number, "total": total, "page": page, "size": size,
                "rows": [dict(r) for r in rows]}

    def record(self, number: int, fact_id: str) -> dict[str, Any]:
        """Read a fact's verdict record back from its verdict file (its last line).

        Only from one of the run's verdict files, within the file and at most
        ``max_record_bytes()`` long: what the index says is checked, not trusted.
        """
        run = self.run(number)
        found = self._rows(f"SELECT file, offset, length FROM {run.schema}.facts "
                           "WHERE fact_id = ?", (fact_id,))
        if not found:
            raise ExplorerError(f"run {run.name} has no verdict for fact {fact_id!r}")
        name, offset, length = found[0]
        path = self._located(run, fact_id, name, offset, length)
        try:
            return read_verdict_at(path, offset, length)
        except RunFolderError as exc:
            raise ExplorerError(f"{exc}; restart kgcheck view to index it again") from None

    def _located(self, run: ViewRun, fact_id: str, name: Any, offset: Any, length: Any
                 ) -> Path:
        """Return the verdict file an index row names, once the row is found to fit in it."""
        where = f"run {run.name}, fact {fact_id!r}: the index"
        # A restart reuses an index whose verdict files are unchanged: say to delete it.
        again = ("restart kgcheck view to index the run again" if run.temporary else
                 f"delete {run.index} and restart kgcheck view to index the run again")
        if not isinstance(name, str) or name not in run.files:
            raise ExplorerError(f"{where} names {str(name)[:200]!r}, not one of the run's "
                                f"verdict files; {again}")
        if not (isinstance(offset, int) and isinstance(length, int) and offset >= 0
                and 0 < length <= self.max_record):
            raise ExplorerError(f"{where} gives a record of {length!r} bytes at byte "
                                f"{offset!r}; expected at most {self.max_record:,} bytes "
                                f"(${MAX_RECORD_ENV}); {again}")
        path = run.folder / name
        try:
            stat = path.stat()
        except OSError as exc:
            raise ExplorerError(f"{path}: {exc.strerror or exc}") from None
        if not S_ISREG(stat.st_mode) or offset + length > stat.st_size:
            raise ExplorerError(f"{where} points past the end of {path} (was the file "
                                f"replaced since it was indexed?); {again}")
        return path

    def fact(self, number: int, fact_id: str) -> dict[str, Any]:
        """Everything the fact page shows: the record, its truth, review, cluster, other runs."""
        run = self.run(number)
        record = self.record(number, fact_id)
        meta = self._rows(f"SELECT {TRUTH} AS truth, rv.label AS review, c.cluster, "
                          f"c.cluster_label, c.category, c.explanation {self._from(run)} "
                          "WHERE f.fact_id = ?", (fact_id,))[0]
        others = []
        for other in self.runs:
            if other.number == number:
                continue
            hit = self._rows(f"SELECT label FROM {other.schema}.facts WHERE fact_id = ?",
                             (fact_id,))
            if hit:
                others.append({"run": other.number, "name": other.name, "label": hit[0][0]})
        return {"run": number, "name": run.name, "strategy": run.info.get("strategy"),
                "dataset": run.info.get("dataset"), "record": record, **dict(meta),
                "others": others}

    def diff(self, a: int, b: int, *, only_disagree: bool = True, page: int = 0,
             size: int = 50) -> dict[str, Any]:
        """Two runs fact by fact (facts both checked), with McNemar's test on who was right.

        The test is ``kgcheck.evals.stats.paired``'s (exact, as statsmodels' ``mcnemar``),
        over the facts both runs checked that carry a review or gold label.
        """
        from kgcheck.evals.stats.errors import StatsInputError
        from kgcheck.evals.stats.paired import mcnemar_counts, mcnemar_exact

        run_a, run_b = self.run(a), self.run(b)
        if a == b:
            raise ExplorerError("compare a run with another run, not with itself")
        page, size = _page_slice(page, size)
        body = (f"FROM {run_a.schema}.facts f JOIN {run_b.schema}.facts g USING (fact_id) "
                f"LEFT JOIN reviews rv ON rv.run = {a} AND rv.fact_id = f.fact_id ")
        pairs = self._rows(f"SELECT f.label, g.label, {TRUTH} {body}")
        scored = [(t, la, lb) for la, lb, t in pairs if t in ("T", "F")]
        only_a, only_b = mcnemar_counts([t for t, _, _ in scored], [x for _, x, _ in scored],
                                        [y for _, _, y in scored])
        both = sum(1 for t, x, y in scored if x == t and y == t)
        test: dict[str, Any] = {
            "n": len(scored), "only_a": only_a, "only_b": only_b, "exact": True,
            "table": [[both, only_a], [only_b, len(scored) - both - only_a - only_b]],
            "p_value": None}
        if only_a + only_b:
            try:
                test["p_value"] = mcnemar_exact(only_a, only_b)
            except StatsInputError as exc:  # the optional statistics extra is missing
                test["missing"] = str(exc)
        where = "WHERE f.label != g.label " if only_disagree else ""
        total = self._rows(f"SELECT COUNT(*) {body}{where}")[0][0]
        rows = self._rows(
            f"SELECT f.fact_id, f.subject, f.predicate, f.object, f.label AS label_a, "
            f"g.label AS label_b, {TRUTH} AS truth, f.seconds AS seconds_a, "
            f"g.seconds AS seconds_b {body}{where}ORDER BY f.seq LIMIT ? OFFSET ?",
            (size, page * size))
        return {"a": a, "b": b, "name_a": run_a.name, "name_b": run_b.name,
                "common": len(pairs), "disagree": sum(1 for la, lb, _ in pairs if la != lb),
                "mcnemar": test, "total": total, "page": page, "size": size,
                "rows": [dict(r) for r in rows]}

    def runs_json(self) -> list[dict[str, Any]]:
        """Return the runs page's data."""
        return [self.summary(run.number) for run in self.runs]

    def dump(self) -> str:
        """Describe the open runs in one line each (for the terminal)."""
        return "\n".join(f"run {r.number}: {r.name} ({r.info.get('method')}, "
                         f"{json.dumps(r.info.get('models'))})" for r in self.runs)
