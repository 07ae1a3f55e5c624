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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from kgcheck.arguments import Arg, ArgumentError, literal
from kgcheck.data import labels as drawn_labels
from kgcheck.data.facts import Fact
from kgcheck.data.runfolder import (
    REVIEW_DB,
    LabelRow,
    LabelsError,
    annotator_label_files,
    checked_facts,
    labels_file_name,
    read_labels,
    read_run_info,
    read_verdicts,
    write_labels,
)
from kgcheck.data.runfolder import parse_only as parse_verdict_filter
from kgcheck.evals.accuracy.designs import Unit, draw, pooled_strata
from kgcheck.evals.accuracy.estimators import EstimateError, Labeled
from kgcheck.evals.accuracy.support import needs_support_check, supporting_rows
from kgcheck.evals.calibration import certainty
from kgcheck.evals.stats.precision import running_estimate
from kgcheck.graphs.registry import compile_graph
from kgcheck.graphs.review import DECISIONS, is_tie, question_for, read_answer

__all__ = ["CHECKPOINTS", "FILTERS", "REVIEW_GRAPH", "REVIEW_LOCK", "ReviewError", "ReviewItem",
           "ReviewSession", "parse_only", "select"]

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
    # In an adjudication: each annotator's label of the fact.
    annotations: dict[str, str] | None = None

    def as_json(self) -> dict[str, Any]:
        """Return what the review page shows of this item."""
        return {"fact_id": self.fact_id, "position": self.position, "question": self.question,
                "review": self.review, "annotations": self.annotations}


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


STRATA_KEYS = ("predicate", "verdict")


def stratum_of(record: Mapping[str, Any], key: str) -> str:
    """Return a verdict record's stratum by ``key``: its predicate or the model's label."""
    if key == "verdict":
        return str(record.get("label") or "NA")
    return str(record.get("predicate") or "")


def stratified(records: Sequence[Mapping[str, Any]], key: str, n: int, seed: int = 0
               ) -> tuple[list[Mapping[str, Any]], dict[str, str]]:
    """Draw ``n`` verdicts stratified by ``key`` (proportional allocation, small strata pooled).

    Returns the drawn records and every record's (pooled) stratum, for the estimate.
    """
    if key not in STRATA_KEYS:
        raise ReviewError("{stratify}: use one of " + ", ".join(STRATA_KEYS),
                          stratify=Arg("stratify", key))
    if n < 1:
        raise ReviewError("{sample} must be at least 1", sample=Arg("sample", n))
    n = min(n, len(records))
    raw = {str(r["fact_id"]): stratum_of(r, key) for r in records}
    sizes: dict[str, int] = {}
    for h in raw.values():
        sizes[h] = sizes.get(h, 0) + 1
    pool = pooled_strata(sizes, n)
    strata = {fid: pool[h] for fid, h in raw.items()}
    drawn = {d.fact_id for d in draw([Unit(fid, h) for fid, h in raw.items()], n,
                                     "stratified", seed)}
    return [r for r in records if str(r["fact_id"]) in drawn], strata


def assigned(fact_ids: Sequence[str], team: Sequence[str], overlap: float,
             seed: int = 0) -> dict[str, list[str]]:
    """Share facts among a team: ``overlap`` of them to everyone, the rest to one person each.

    The shared facts (a seeded random share) are what agreement is measured on; the rest
    are dealt out in turn over a seeded shuffle, so each person gets about the same number.
    """
    names = list(dict.fromkeys(n.strip() for n in team if n.strip()))
    if len(names) < 2:
        raise ReviewError("{team} needs two or more names", team=Arg("team", list(team)))
    if not 0 <= overlap <= 1:
        raise ReviewError("{overlap} must be between 0 and 1", overlap=Arg("overlap", overlap))
    order = list(fact_ids)
    random.Random(seed).shuffle(order)
    shared = set(order[:round(overlap * len(order))])
    out: dict[str, list[str]] = {name: [] for name in names}
    rest = [f for f in order if f not in shared]
    owner = {f: names[i % len(names)] for i, f in enumerate(rest)}
    for fid in fact_ids:
        for name in (names if fid in shared else [owner[fid]]):
            out[name].append(fid)
    return out


def _thread(run_id: str, fact_id: str, annotator: str | None = None) -> RunnableConfig:
    # The run id in the thread id: checkpoints copied from another run match no thread. An
    # annotator's decisions are threads of their own.
    who = f"{annotator}:" if annotator else ""
    return {"configurable": {"thread_id": f"{run_id}:{who}{fact_id}"}}



def queue_design(only: Sequence[str] = (), sample: int | None = None) -> str:
    """Say how a queue chose its facts, as ``labels.csv`` records it per decision.

    ``srs``: a seeded random sample of every verdict; ``queue``: every verdict in the run's
    order (decisions taken from the top are no random sample unless all are decided);
    ``filtered:F,NA``: only verdicts of those kinds (they say nothing about the others).
    """
    if only:
        return "filtered:" + ",".join(only)
    return "srs" if sample is not None else "queue"


def _row(fact_id: str, review: Mapping[str, Any], design: str,
         annotator: str | None = None) -> LabelRow:
    correction = review.get("correction") or {}
    return LabelRow(fact_id=fact_id, label=str(review["label"]), note=review.get("note") or "",
                    reviewer=review.get("reviewer") or "", reviewed_at=review["reviewed_at"],
                    design=design, annotator=annotator or "",
                    correction=correction.get("decision") or "",
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
    # Whose queue this is (``labels-<annotator>.csv``); None: the run's one review.
    annotator: str | None = None
    # Every verdict of the run by fact id, for the running accuracy estimate.
    verdicts: dict[str, str] = field(default_factory=dict)
    # Every fact's stratum when the queue is a stratified sample.
    strata: dict[str, str] | None = None
    # The margin of error to reach (until_moe), and what to call when it is reached.
    until_moe: float | None = None
    on_reached: Callable[[dict[str, Any]], None] | None = None
    confidence: float = 0.95
    _reached: bool = False
    _order: list[str] = field(default_factory=list)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def labels_path(self) -> Path:
        """Where the decisions are written: ``RUN/labels.csv`` (``labels-<name>.csv``)."""
        return self.run_dir / labels_file_name(self.annotator)

    @classmethod
    @asynccontextmanager
    async def open(cls, run_dir: str | Path, *, only: Sequence[str] = (),
                   sample: int | None = None, seed: int = 0,
                   reviewer: str | None = None, annotator: str | None = None,
                   team: Sequence[str] = (), overlap: float = 0.0,
                   adjudicate: bool = False, stratify: str | None = None,
                   until_moe: float | None = None,
                   on_reached: Callable[[dict[str, Any]], None] | None = None,
                   order: str = "run") -> AsyncIterator[ReviewSession]:
        """Lock ``run_dir`` for reviewing and start (or continue) its review.

        ``annotator`` names whose review this is (several people review one run, each into
        ``labels-<name>.csv``); with ``team`` and ``overlap`` the queue is that person's
        share (``assigned``). ``adjudicate`` queues the facts the annotators' files label
        differently, for the final ``labels.csv``. ``stratify`` (predicate or verdict) draws
        the ``sample`` per stratum. ``until_moe`` is the margin of error of the running
        accuracy estimate to reach; ``on_reached`` hears of it once. ``order="uncertainty"``
        puts the least certain verdicts first (``uncertainty_key``).
        """
        folder = Path(run_dir)
        info, records = _read_run(folder)
        _check_options(annotator=annotator, team=team, adjudicate=adjudicate,
                       stratify=stratify, sample=sample, until_moe=until_moe)
        with _review_lock(folder, annotator):
            run_id = str(info.get("run_id") or folder.resolve().name)
            facts = {f.id: f for f in checked_facts(folder, info, error=ReviewError)}
            missing = [str(r["fact_id"]) for r in records if str(r["fact_id"]) not in facts]
            if missing:
                raise ReviewError(f"{folder}: {len(missing)} verdicts are of facts its source "
                                  f"no longer holds (e.g. {', '.join(missing[:3])})")
            run_ids = {str(r["fact_id"]) for r in records}
            labels_path = folder / labels_file_name(annotator)
            stored = read_labels(labels_path, run_ids) if labels_path.exists() else {}
            strata = None
            if stratify:
                chosen = select(records, only)
                queue, strata = stratified(chosen, stratify, sample or len(chosen), seed)
            else:
                queue = select(records, only, sample, seed)
            if order != "run":
                queue = select(queue, order=order)
            if not queue:
                raise ReviewError(f"{literal(str(folder))}: no verdicts match {{only}}",
                                  only=Arg("only", list(only)))
            if team:
                mine = set(assigned([str(r["fact_id"]) for r in queue], team, overlap,
                                    seed)[str(annotator)])
                queue = [r for r in queue if str(r["fact_id"]) in mine]
            annotations: dict[str, dict[str, str]] = {}
            if adjudicate:
                queue, annotations = _disagreements(folder, queue, run_ids)
            if until_moe is not None:
                # Labelled in this order, every prefix of the queue is a random sample.
                queue = list(queue)
                random.Random(seed).shuffle(queue)
            design = queue_design(only, sample)
            if stratify:
                design = f"stratified:{stratify}"
            elif until_moe is not None and not only:
                design = "srs"
            if adjudicate:
                # The facts people disagreed on: no sample of the run.
                design = "filtered:disagreements"
            async with AsyncSqliteSaver.from_conn_string(str(folder / CHECKPOINTS)) as saver:
                graph = compile_graph(("review", REVIEW_GRAPH), checkpointer=saver)
                session = cls(folder, run_id, [], graph, reviewer, annotator=annotator,
                              design=design,
                              verdicts={str(r["fact_id"]): str(r.get("label", "NA"))
                                        for r in records},
                              strata=strata, until_moe=until_moe, on_reached=on_reached)
                await session._start(queue, facts, stored)
                for item in session.items:
                    item.annotations = annotations.get(item.fact_id)
                session._reached = bool(session.estimate()["reached"])
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
        state = await self.graph.aget_state(_thread(self.run_id, item.fact_id, self.annotator))
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
        config = _thread(self.run_id, item.fact_id, self.annotator)
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
        thread = _thread(self.run_id, item.fact_id, self.annotator)["configurable"]["thread_id"]
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
            self._check_margin()
            return review

    def estimate(self) -> dict[str, Any]:
        """Return the running accuracy estimate from this queue's T/F decisions.

        The labels must support one (``kgcheck.evals.accuracy.support``, the rule
        ``kgcheck estimate`` applies): a queue of chosen verdicts only (``--only``) gives an
        ``error`` instead of figures; decisions in the run's order, ``warnings``.
        """
        decided = {i.fact_id: i.review["label"] for i in self.items if i.review}
        rows = [drawn_labels.LabelRow(fid, label == "T", "the review page",
                                      stratum=(self.strata or {}).get(fid, ""),
                                      design=self.designs.get(fid) or self.design)
                for fid, label in decided.items() if label in ("T", "F")]
        warnings: list[str] = []
        try:
            if needs_support_check(rows):
                rows = supporting_rows(str(self.labels_path), rows, len(decided) - len(rows),
                                       len(self.verdicts), warnings)
            labels = [Labeled(r.fact_id, r.true, r.stratum) for r in rows]
            found = running_estimate(self.verdicts, labels, confidence=self.confidence,
                                     strata=self.strata, target=self.until_moe)
        except EstimateError as exc:
            return {"labels": len(rows), "error": str(exc), "reached": False, "warnings": []}
        return {**found, "warnings": warnings}

    def _check_margin(self) -> None:
        if self.until_moe is None:
            return
        found = self.estimate()
        if found["reached"] and not self._reached and self.on_reached is not None:
            self.on_reached(found)
        self._reached = bool(found["reached"])

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
            self._check_margin()
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
        ours = {i.fact_id: _row(i.fact_id, i.review, self.designs.get(i.fact_id, self.design),
                                self.annotator)
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
    records = list(read_verdicts(folder).values())
    if not records:
        raise ReviewError(f"{folder}: no verdicts to review; run `kgcheck run ... --out "
                          f"{folder}` first")
    return info, records


def _check_options(*, annotator: str | None, team: Sequence[str], adjudicate: bool,
                   stratify: str | None, sample: int | None, until_moe: float | None) -> None:
    """Refuse review options that do not go together, naming them."""
    if adjudicate and annotator:
        raise ReviewError("{adjudicate} writes the final labels.csv: leave out {annotator}",
                          adjudicate=Arg("adjudicate", True), annotator=Arg("annotator"))
    if team and not annotator:
        raise ReviewError("{team} shares the facts among people: say who you are with "
                          "{annotator}", team=Arg("team", list(team)), annotator=Arg("annotator"))
    if team and annotator not in team:
        raise ReviewError("{annotator} is not in {team}", annotator=Arg("annotator", annotator),
                          team=Arg("team", list(team)))
    if stratify and sample is None:
        raise ReviewError("{stratify} draws a sample per stratum: give {sample}",
                          stratify=Arg("stratify", stratify), sample=Arg("sample"))
    if until_moe is not None and not 0 < until_moe < 1:
        raise ReviewError("{until_moe} must be between 0 and 1 (e.g. 0.05)",
                          until_moe=Arg("until_moe", until_moe))


def _disagreements(folder: Path, queue: Sequence[Mapping[str, Any]], run_ids: set[str]
                   ) -> tuple[list[Mapping[str, Any]], dict[str, dict[str, str]]]:
    """Keep the queue's facts the annotators' labels files label differently (T against F)."""
    files = annotator_label_files(folder)
    if len(files) < 2:
        raise ReviewError(f"{literal(str(folder))}: {{adjudicate}} needs the labels of two or "
                          f"more annotators (labels-<name>.csv), found {len(files)}",
                          adjudicate=Arg("adjudicate", True))
    given: dict[str, dict[str, str]] = {}
    for path in files:
        try:
            rows = read_labels(path, run_ids)
        except LabelsError as exc:
            raise ReviewError(str(exc)) from None
        name = path.stem.removeprefix("labels-")
        for fid, row in rows.items():
            if row["label"] in ("T", "F"):
                given.setdefault(fid, {})[row["annotator"] or name] = row["label"]
    split = {fid: labels for fid, labels in given.items() if len(set(labels.values())) > 1}
    kept = [r for r in queue if str(r["fact_id"]) in split]
    if not kept:
        raise ReviewError(f"{folder}: the annotators ({len(files)} files) agree on every fact "
                          "two of them labelled: nothing to adjudicate")
    return kept, split


@contextmanager
def _review_lock(folder: Path, annotator: str | None = None) -> Iterator[None]:
    """Hold ``RUN/.review.lock`` (``.review-<name>.lock``): one server per labels file."""
    name = labels_file_name(annotator).removeprefix("labels").removesuffix(".csv")
    path = folder / (REVIEW_LOCK if not annotator else f".review{name}.lock")
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
