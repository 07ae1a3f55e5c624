"""A review of a run: a queue of its verdicts, each a paused ``review`` graph thread.

``ReviewSession.open(RUN)`` locks the run folder for reviewing and picks the queue (all
verdicts, or ``only`` F / NA / NEI / ties, optionally a seeded sample). Each fact has a thread of
the ``review`` graph in ``RUN/review.sqlite`` (langgraph-checkpoint-sqlite): ``decide``
starts it, where it pauses at ``interrupt()`` with the question, and resumes it with
``Command(resume=...)``; ``undo`` deletes it. Until its first decision a fact shows the
question the graph will ask (the graph's own ``question_for``), so opening a large run
writes nothing. The checkpoints hold the
decisions; after each change ``RUN/labels.csv`` is rewritten from them (atomically), so a
crash loses nothing: on the next open, decisions the checkpoints hold and the labels file
lacks are written to it, and decisions the labels file holds and the checkpoints lack (a
deleted checkpoint file) are replayed into the graph.
"""

from __future__ import annotations

import asyncio
import fcntl
import random
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from kgcheck.arguments import Arg, ArgumentError, literal
from kgcheck.data.facts import Fact
from kgcheck.data.runfolder import (
    LABELS_FILE,
    REVIEW_DB,
    VERDICTS,
    LabelRow,
    checked_facts,
    read_labels,
    read_run_info,
    read_verdicts,
    write_labels,
)
from kgcheck.data.runfolder import parse_only as parse_verdict_filter
from kgcheck.evals.calibration import certainty
from kgcheck.graphs.registry import compile_graph
from kgcheck.graphs.review import DECISIONS, is_tie, question_for, read_answer

CHECKPOINTS = REVIEW_DB
REVIEW_LOCK = ".review.lock"
FILTERS = ("F", "T", "NA", "NEI", "ties")
# Queue orders: the run's, or the least certain verdicts first.
ORDERS = ("run", "uncertainty")
REVIEW_GRAPH = "review"


class ReviewError(ArgumentError):
    """A review that cannot start or a decision that cannot be taken; says why."""


@dataclass
class ReviewItem:
    """One fact of the queue: its question (what the graph paused with) and decision."""

    fact_id: str
    position: int
    question: dict[str, Any]
    verdict: dict[str, Any]
    fact: dict[str, Any]
    review: dict[str, Any] | None = None
    # Whether the fact's review thread exists: threads start at the first decision.
    started: bool = False

    def as_json(self) -> dict[str, Any]:
        """Return what the review page shows of this item."""
        return {"fact_id": self.fact_id, "position": self.position, "question": self.question,
                "review": self.review}


def parse_only(text: str | None) -> tuple[str, ...]:
    """Read ``--only F,NA,ties`` into filters; an unknown one names the known ones."""
    return parse_verdict_filter(text, FILTERS, what="filter", error=ReviewError)


def uncertainty_key(record: Mapping[str, Any]) -> tuple[int, float]:
    """Sort key of the ``uncertainty`` order: least certain first, unscored verdicts last.

    Certainty is ``max(p, 1 - p)`` of the verdict's confidence; an NEI verdict (the model
    abstained) counts as the least certain there is.
    """
    if record.get("label") == "NEI":
        return (0, 0.5)
    sure = certainty(record)
    return (1, 0.0) if sure is None else (0, sure)


def select(records: Sequence[Mapping[str, Any]], only: Sequence[str] = (),
           sample: int | None = None, seed: int = 0,
           order: str = "run") -> list[Mapping[str, Any]]:
    """Pick the verdicts to review: those matching any filter, then a seeded sample.

    The sample keeps the run's order, and the same seed picks the same facts, so a
    review started again with the same options has the same queue. ``order="uncertainty"``
    then puts the least certain verdicts first (``uncertainty_key``; ties keep the run's
    order).
    """
    if order not in ORDERS:
        raise ReviewError(f"--order {order}: expected one of {', '.join(ORDERS)}")
    if sample is not None and sample < 1:
        raise ReviewError("{sample} must be at least 1", sample=Arg("sample", sample))
    chosen = [r for r in records if not only
              or r.get("label") in only or ("ties" in only and is_tie(r))]
    if sample is not None and sample < len(chosen):
        keep = set(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [r for n, r in enumerate(chosen) if n in keep]
    if order == "uncertainty":
        chosen = sorted(chosen, key=uncertainty_key)
    return chosen


def _thread(run_id: str, fact_id: str) -> RunnableConfig:
    # The run id in the thread id: checkpoints copied from another run match no thread.
    return {"configurable": {"thread_id": f"{run_id}:{fact_id}"}}


def queue_design(only: Sequence[str] = (), sample: int | None = None) -> str:
    """Say how a queue chose its facts, as ``labels.csv`` records it per decision.

    ``srs``: a seeded random sample of every verdict; ``queue``: every verdict in the run's
    order (decisions taken from the top are no random sample unless all are decided);
    ``filtered:F,NA``: only verdicts of those kinds (they say nothing about the others).
    """
    if only:
        return "filtered:" + ",".join(only)
    return "srs" if sample is not None else "queue"


def _row(fact_id: str, review: Mapping[str, Any], design: str) -> LabelRow:
    correction = review.get("correction") or {}
    return LabelRow(fact_id=fact_id, label=str(review["label"]), note=review.get("note") or "",
                    reviewer=review.get("reviewer") or "", reviewed_at=review["reviewed_at"],
                    design=design, correction=correction.get("decision") or "",
                    corrected_value=correction.get("value") or "")


@dataclass
class ReviewSession:
    """A run under review: its queue, decisions, labels file and checkpointer."""

    run_dir: Path
    run_id: str
    items: list[ReviewItem]
    graph: Any
    reviewer: str | None = None
    # Decisions of facts outside this queue (another --only / --sample): kept in the file.
    others: dict[str, LabelRow] = field(default_factory=dict)
    # How this queue chose its facts, and how each decided fact was chosen when decided.
    design: str = "queue"
    designs: dict[str, str] = field(default_factory=dict)
    _order: list[str] = field(default_factory=list)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def labels_path(self) -> Path:
        """Where the decisions are written: ``RUN/labels.csv``."""
        return self.run_dir / LABELS_FILE

    @classmethod
    @asynccontextmanager
    async def open(cls, run_dir: str | Path, *, only: Sequence[str] = (),
                   sample: int | None = None, seed: int = 0,
                   reviewer: str | None = None,
                   order: str = "run") -> AsyncIterator[ReviewSession]:
        """Lock ``run_dir`` for reviewing and start (or continue) its review."""
        folder = Path(run_dir)
        info, records = _read_run(folder)
        with _review_lock(folder):
            run_id = str(info.get("run_id") or folder.resolve().name)
            facts = {f.id: f for f in checked_facts(folder, info, error=ReviewError)}
            missing = [str(r["fact_id"]) for r in records if str(r["fact_id"]) not in facts]
            if missing:
                raise ReviewError(f"{folder}: {len(missing)} verdicts are of facts its source "
                                  f"no longer holds (e.g. {', '.join(missing[:3])})")
            labels_path = folder / LABELS_FILE
            stored = (read_labels(labels_path, {str(r["fact_id"]) for r in records})
                      if labels_path.exists() else {})
            queue = select(records, only, sample, seed, order)
            if not queue:
                raise ReviewError(f"{literal(str(folder))}: no verdicts match {{only}}",
                                  only=Arg("only", list(only)))
            async with AsyncSqliteSaver.from_conn_string(str(folder / CHECKPOINTS)) as saver:
                graph = compile_graph(("review", REVIEW_GRAPH), checkpointer=saver)
                session = cls(folder, run_id, [], graph, reviewer,
                              design=queue_design(only, sample))
                await session._start(queue, facts, stored)
                yield session

    async def _start(self, queue: Sequence[Mapping[str, Any]], facts: Mapping[str, Fact],
                     stored: Mapping[str, LabelRow]) -> None:
        for position, record in enumerate(queue):
            fact = facts[str(record["fact_id"])]
            item = ReviewItem(fact.id, position, {}, _verdict_of(record), dict(fact.as_input()))
            await self._load(item)
            self.items.append(item)
            row = stored.get(item.fact_id)
            if item.review is None and row is not None:
                # A decision the labels file kept and the checkpoints lost: replay it.
                await self._resume(item, {"label": row["label"], "note": row["note"],
                                          "reviewer": row["reviewer"] or None,
                                          "reviewed_at": row["reviewed_at"] or None,
                                          **_stored_correction(row)})
        queued = {item.fact_id for item in self.items}
        self.others = {fid: row for fid, row in stored.items() if fid not in queued}
        # A decision keeps the design of the queue it was taken in (unknown: older files).
        self.designs = {fid: row.get("design") or "" for fid, row in stored.items()}
        decided = sorted((i for i in self.items if i.review), key=lambda i: (
            i.review["reviewed_at"] if i.review else "", i.position))
        self._order = [i.fact_id for i in decided]
        self._write()

    async def _load(self, item: ReviewItem) -> None:
        """Read the item's question and decision from its thread, if it has one."""
        state = await self.graph.aget_state(_thread(self.run_id, item.fact_id))
        item.started = bool(state.values)
        if not item.started:
            # What the graph will pause with; its thread starts at the first decision, so
            # opening a large run writes nothing.
            item.question, item.review = question_for(item.fact, item.verdict), None  # type: ignore[arg-type]
        elif state.interrupts:
            item.question, item.review = dict(state.interrupts[0].value), None
        else:
            item.question = dict(state.values.get("question") or {})
            item.review = (state.values.get("verdict") or {}).get("review")

    async def _resume(self, item: ReviewItem, answer: Mapping[str, Any]) -> dict[str, Any]:
        config = _thread(self.run_id, item.fact_id)
        if not item.started:
            await self.graph.ainvoke({"fact": item.fact, "verdict": item.verdict}, config)
            item.started = True
        out = await self.graph.ainvoke(Command(resume=dict(answer)), config)
        if out.get("__interrupt__"):
            # The graph asks again: the answer was malformed (it says how).
            raise ReviewError(f"fact {item.fact_id}: {out['__interrupt__'][0].value['problem']}")
        item.review = dict(out["verdict"]["review"])
        return item.review

    async def _forget(self, item: ReviewItem) -> None:
        """Delete the item's thread: the fact is undecided again, as before its first pause."""
        thread = _thread(self.run_id, item.fact_id)["configurable"]["thread_id"]
        await self.graph.checkpointer.adelete_thread(thread)
        await self._load(item)

    def item(self, fact_id: str) -> ReviewItem:
        """Return the queue's item for a fact; one not in the queue is a ReviewError."""
        for item in self.items:
            if item.fact_id == fact_id:
                return item
        raise ReviewError(f"fact {fact_id!r} is not in this review's queue")

    async def decide(self, fact_id: str, label: str, note: str = "",
                     reviewer: str | None = None, *, correction: str = "",
                     corrected_value: str = "") -> dict[str, Any]:
        """Record a decision (T, F or skip) on a fact; a new one replaces the old.

        ``correction`` says what the person did with the verdict's suggested correction:
        accept it, edit it (``corrected_value`` is the value they accept) or reject it.
        """
        if label not in DECISIONS:
            raise ReviewError(f"label {label!r} is not one of {', '.join(DECISIONS)}")
        answer = {"label": label, "note": note, "reviewer": reviewer or self.reviewer,
                  "correction": correction, "corrected_value": corrected_value}
        async with self._lock:
            item = self.item(fact_id)
            try:
                read_answer(answer, item.verdict.get("correction"))
            except ValueError as exc:
                raise ReviewError(str(exc)) from None
            if item.review is not None:
                await self._forget(item)
                self._order.remove(fact_id)
            review = await self._resume(item, answer)
            self.designs[fact_id] = self.design
            self._order.append(fact_id)
            self._write()
            return review

    async def undo(self, fact_id: str | None = None) -> str | None:
        """Take back a decision (by default the last one made); return its fact id."""
        async with self._lock:
            if fact_id is None:
                if not self._order:
                    return None
                fact_id = self._order[-1]
            item = self.item(fact_id)
            if item.review is None:
                raise ReviewError(f"fact {fact_id} has no decision to undo")
            await self._forget(item)
            self._order.remove(fact_id)
            self._write()
            return fact_id

    def progress(self) -> dict[str, int]:
        """Count the queue's facts and decisions."""
        counts: dict[str, int] = {"total": len(self.items), "decided": 0,
                                  **{d: 0 for d in DECISIONS}}
        for item in self.items:
            if item.review:
                counts["decided"] += 1
                counts[item.review["label"]] += 1
        return counts

    def rows(self) -> list[LabelRow]:
        """Every decision, this queue's and earlier ones outside it, in decision order."""
        ours = {i.fact_id: _row(i.fact_id, i.review, self.designs.get(i.fact_id, self.design))
                for i in self.items if i.review}
        merged = [*self.others.values(), *(ours[f] for f in self._order if f in ours)]
        return sorted(merged, key=lambda r: r["reviewed_at"])

    def _write(self) -> None:
        write_labels(self.labels_path, self.rows())


def _stored_correction(row: Mapping[str, Any]) -> dict[str, str]:
    """Return a labels-file row's correction decision as a resume value's fields."""
    if not row.get("correction"):
        return {}
    return {"correction": row["correction"], "corrected_value": row.get("corrected_value") or ""}


def _verdict_of(record: Mapping[str, Any]) -> dict[str, Any]:
    # The run's bookkeeping (run id, gold label) is not for the person to see.
    return {k: v for k, v in record.items() if k not in ("run_id", "gold", "review")}


def _read_run(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    info = read_run_info(folder, ReviewError)
    records = list(read_verdicts(folder / VERDICTS).values())
    if not records:
        raise ReviewError(f"{folder}: no verdicts to review; run `kgcheck run ... --out "
                          f"{folder}` first")
    return info, records


@contextmanager
def _review_lock(folder: Path) -> Iterator[None]:
    """Hold ``RUN/.review.lock``: one review server per run folder."""
    path = folder / REVIEW_LOCK
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ReviewError(
                f"another kgcheck review is serving {folder} (it holds {path}); open the "
                "address it printed, or stop it first") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
