"""Run a strategy graph over many facts: bounded concurrency, progress, resumable output.

Every verdict is appended to ``OUT/verdicts.jsonl`` the moment it completes, so a killed run
loses nothing; ``--resume`` keeps the finished verdicts (the last record per fact), retries
the ones that ended in an error, and runs the rest. ``OUT/summary.json`` is written at the
end, and ``OUT/run.json`` records what the run was so a resume cannot mix two runs.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from kgcheck.data.facts import Fact
from kgcheck.evals.concurrency import OVERLOAD_ERRORS, AdaptiveLimit, FixedLimit, Limit
from kgcheck.evals.cost import Pricing, cost_summary
from kgcheck.evals.metrics import score_summary
from kgcheck.evals.records import verdict_record
from kgcheck.graphs import verdicts
from kgcheck.providers import pressure

VERDICTS = "verdicts.jsonl"
SUMMARY = "summary.json"
RUN_INFO = "run.json"
LOCK = ".lock"
# Identity of a run: a resume must match these fields of run.json.
IDENTITY_KEYS = ("dataset", "strategy", "method", "models", "judge", "source")
RECURSION_LIMIT = 50
# Errors that mean the model server cannot be reached at all, not that one fact failed.
UNREACHABLE_ERRORS = {
    "ConnectError", "ConnectTimeout", "ConnectionError", "ConnectionRefusedError",
    "APIConnectionError", "APITimeoutError", "ReadTimeout", "TimeoutError", "TimeoutException",
    "AuthenticationError", "OpenAIConnectionError", "OpenAITimeoutError",
    "OpenAIAuthenticationError", "ModelConnectionError", "ModelTimeoutError",
}

# Errors that no other fact will escape: a bad prompt file, model spec or strategy.
CONFIG_ERRORS = {"PromptError", "UnknownModelError", "UnknownStrategyError"}

Invoke = Callable[[Fact], Awaitable[dict[str, Any]]]


class RunError(RuntimeError):
    """The run cannot start or go on; the message says why and what to do."""


@dataclass
class RunResult:
    """What a finished (or stopped) run leaves: its folder, verdicts and summary."""

    out_dir: Path
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    aborted: str | None = None


@dataclass
class RunInfo:
    """The identity and settings of a run, kept in ``run.json``.

    ``strategy`` is the strategy's name (``dka-sc``), ``method`` the label its verdicts
    carry (``DKA-SC``).
    """

    dataset: str
    strategy: str
    method: str
    models: list[str]
    judge: str | None = None
    source: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    # Prices for the summary's cost (None: the shipped pricing file); not part of the identity.
    pricing: Pricing | None = None

    def identity(self) -> dict[str, Any]:
        """Return the fields a resumed run must share with the stored one."""
        return {k: getattr(self, k) for k in IDENTITY_KEYS}


def gold_mark(fact: Fact) -> str | None:
    """Return the gold label as ``T``/``F`` (None when unknown)."""
    return None if fact.label is None else ("T" if fact.label else "F")


def read_verdicts(path: Path) -> dict[str, dict[str, Any]]:
    """Read a verdicts file, last record per fact; a torn last line (a crash) is skipped."""
    records: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return records
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            records[str(record["fact_id"])] = record
    return records


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def prepare_out_dir(out_dir: Path, info: RunInfo, *, resume: bool,
                    fresh: bool) -> dict[str, dict[str, Any]]:
    """Check or create the run folder; return the finished verdicts a resume keeps."""
    out_dir.mkdir(parents=True, exist_ok=True)
    verdicts_path = out_dir / VERDICTS
    info_path = out_dir / RUN_INFO
    foreign = sorted(p.name for p in out_dir.iterdir()
                     if p.is_file() and p.name not in (VERDICTS, SUMMARY, RUN_INFO, LOCK))
    if foreign and not info_path.exists():
        raise RunError(
            f"{out_dir} is not a kgcheck run folder (it holds {', '.join(foreign[:3])} but no "
            f"{RUN_INFO}); pick another --out"
        )
    if fresh:
        for name in (VERDICTS, SUMMARY, RUN_INFO):
            (out_dir / name).unlink(missing_ok=True)
    existing = read_verdicts(verdicts_path)
    if existing and not resume:
        raise RunError(
            f"{out_dir} already holds {len(existing)} verdicts: pass --resume to continue "
            "that run, --fresh to start over, or another --out"
        )
    if info_path.exists() and resume:
        stored = json.loads(info_path.read_text(encoding="utf-8"))
        mismatched = {k: (stored.get(k), v) for k, v in info.identity().items()
                      if stored.get(k) != v}
        if mismatched:
            detail = "; ".join(
                f"{k}: stored {a!r}, asked {b!r}" for k, (a, b) in mismatched.items()
            )
            raise RunError(f"{out_dir} holds a different run ({detail}); use another --out")
        info.run_id = stored.get("run_id", info.run_id)
    finished = {fid: r for fid, r in existing.items() if not r.get("error")}
    # Rewrite without duplicates or errored records, which are retried below.
    _write_atomic(verdicts_path, "".join(json.dumps(r) + "\n" for r in finished.values()))
    _write_atomic(info_path, json.dumps({**info.identity(), "run_id": info.run_id,
                                         "settings": info.settings}, indent=1) + "\n")
    return finished


def _record(fact: Fact, verdict: dict[str, Any], run_id: str) -> dict[str, Any]:
    return verdict_record(fact, verdict, run_id, gold_mark(fact))


async def verdict_of(invoke: Invoke, fact: Fact, method: str, model: str) -> dict[str, Any]:
    """Run one fact; any failure becomes the fact's NA verdict with the error, not a crash."""
    try:
        out = await invoke(fact)
    except Exception as exc:  # noqa: BLE001 - one fact's failure must not end the run
        # GraphRecursionError included: a loop that did not end is this fact's failure.
        return dict(verdicts.failed(fact.id, method, model, exc))
    verdict = out.get("verdict")
    if not verdict:
        return dict(verdicts.failed(fact.id, method, model, "the graph returned no verdict",
                                    error_type="NoVerdict"))
    return dict(verdict)


def _progress(disable: bool, adaptive: bool = False) -> Progress:
    """Build a progress bar that fits 80 columns (a consensus phase's name and ties too)."""
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=8),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:.1f}/s"),
        TextColumn("{task.fields[tally]}"),
    ]
    if adaptive:
        columns.append(TextColumn("at once {task.fields[level]}"))
    return Progress(*columns, TimeRemainingColumn(elapsed_when_finished=True), disable=disable)


def as_limit(concurrency: int | Limit) -> Limit:
    """Accept a number of facts at once or a limit object (``AdaptiveLimit``)."""
    if isinstance(concurrency, FixedLimit | AdaptiveLimit):
        return concurrency
    if concurrency < 1:
        raise RunError(f"--concurrency must be at least 1, got {concurrency}")
    return FixedLimit(concurrency)


async def run_facts(
    facts: Sequence[Fact],
    invoke: Invoke,
    info: RunInfo,
    out_dir: Path,
    *,
    concurrency: int | Limit = 4,
    resume: bool = False,
    fresh: bool = False,
    show_progress: bool = True,
    max_consecutive_unreachable: int | None = None,
    summary_extras: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
    phase: str | None = None,
) -> RunResult:
    """Invoke a graph on every fact, appending each verdict as it completes.

    ``invoke`` runs one fact and returns the graph output (with ``verdict``). Stops early,
    with verdicts kept, when the model server is unreachable for many facts in a row.
    ``concurrency`` is a number of facts at once or an ``AdaptiveLimit``. ``phase`` names a
    consensus phase in the progress bar, which then counts ties apart from NA answers.
    """
    concurrency = as_limit(concurrency)
    out_dir = Path(out_dir)
    with _exclusive(out_dir):
        return await _run_locked(
            facts, invoke, info, out_dir, concurrency=concurrency, resume=resume, fresh=fresh,
            show_progress=show_progress, max_consecutive_unreachable=max_consecutive_unreachable,
            summary_extras=summary_extras, phase=phase,
        )


def _tally(state: dict[str, int], phase: str | None) -> str:
    """Format the progress counts: NA and errors, and ties in a consensus phase."""
    ties = f"ties {state['ties']} " if phase else ""
    return f"{ties}NA {state['na']} errors {state['errors']}"


@contextmanager
def _exclusive(out_dir: Path) -> Iterator[None]:
    """Hold the run folder's lock, so that two runs never write one folder at once."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / LOCK).open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunError(f"another kgcheck run is writing to {out_dir}; wait for it to end "
                           "or pick another --out") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


async def _run_locked(
    facts: Sequence[Fact],
    invoke: Invoke,
    info: RunInfo,
    out_dir: Path,
    *,
    concurrency: Limit,
    resume: bool,
    fresh: bool,
    show_progress: bool,
    max_consecutive_unreachable: int | None,
    summary_extras: Callable[[list[dict[str, Any]]], dict[str, Any]] | None,
    phase: str | None = None,
) -> RunResult:
    finished = prepare_out_dir(out_dir, info, resume=resume, fresh=fresh)
    todo = [f for f in facts if f.id not in finished]
    model_label = ",".join(info.models)
    limit = max_consecutive_unreachable or max(5, 2 * concurrency.maximum)
    adaptive = isinstance(concurrency, AdaptiveLimit)
    queue: asyncio.Queue[Fact] = asyncio.Queue()
    for fact in todo:
        queue.put_nowait(fact)
    state = {"done": 0, "na": 0, "ties": 0, "errors": 0, "unreachable_streak": 0}
    aborted: list[str] = []
    started = time.perf_counter()

    with (out_dir / VERDICTS).open("a", encoding="utf-8") as sink, \
            _progress(not show_progress, adaptive) as progress, \
            pressure.listening(concurrency.signal):
        title = f"{info.method} {info.dataset}" + (f" {phase}" if phase else "")
        task = progress.add_task(title, total=len(todo), rate=0.0, tally=_tally(state, phase),
                                 level=concurrency.current)

        async def worker() -> None:
            while not aborted:
                try:
                    fact = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                async with concurrency.slot():
                    asked = time.perf_counter()
                    verdict = await verdict_of(invoke, fact, info.method, model_label)
                concurrency.done(time.perf_counter() - asked, overloaded=(
                    (verdict.get("details") or {}).get("error_type") in OVERLOAD_ERRORS))
                record = _record(fact, verdict, info.run_id)
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                state["done"] += 1
                tie = (record.get("details") or {}).get("decision") == "tie"
                state["ties"] += tie
                # A tie left undecided is NA too; in a consensus phase it is counted as a tie.
                state["na"] += record["label"] == "NA" and not (tie and phase)
                error_type = (record.get("details") or {}).get("error_type")
                if record.get("error"):
                    state["errors"] += 1
                if error_type in CONFIG_ERRORS and not aborted:
                    aborted.append(record["error"])
                elif error_type in UNREACHABLE_ERRORS:
                    state["unreachable_streak"] += 1
                    if state["unreachable_streak"] >= limit and not aborted:
                        aborted.append(record["error"])
                else:
                    state["unreachable_streak"] = 0
                elapsed = time.perf_counter() - started
                progress.update(task, advance=1, rate=state["done"] / max(elapsed, 1e-9),
                                tally=_tally(state, phase), level=concurrency.current)

        workers = min(concurrency.maximum, max(1, len(todo)))
        await asyncio.gather(*(worker() for _ in range(workers)))

    seconds = time.perf_counter() - started
    records_by_id = read_verdicts(out_dir / VERDICTS)
    wanted = {f.id for f in facts}
    records = [r for fid, r in records_by_id.items() if fid in wanted]
    summary = summarize(records, info, seconds=seconds, ran=state["done"])
    if isinstance(concurrency, AdaptiveLimit):
        summary["concurrency"] = {"mode": "auto", "max": concurrency.maximum,
                                  "final": concurrency.current, "peak": concurrency.peak,
                                  "backoffs": concurrency.cuts}
    if summary_extras:
        summary.update(summary_extras(records))
    if aborted:
        summary["aborted_because"] = (
            "unreachable" if state["unreachable_streak"] >= limit else "configuration"
        )
        summary["aborted"] = (
            f"stopped: {aborted[0]}" if state["unreachable_streak"] < limit else
            f"stopped after {limit} facts in a row could not reach the model: {aborted[0]}"
        )
    _write_atomic(out_dir / SUMMARY, json.dumps(summary, indent=1) + "\n")
    return RunResult(out_dir, records, summary, summary.get("aborted"))


def amend_summary(out_dir: Path, fields: dict[str, Any]) -> None:
    """Add ``fields`` to a finished run's summary.json (what the runner cannot know)."""
    path = Path(out_dir) / SUMMARY
    summary = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    _write_atomic(path, json.dumps({**summary, **fields}, indent=1) + "\n")


def summarize(records: Iterable[dict[str, Any]], info: RunInfo, *, seconds: float,
              ran: int) -> dict[str, Any]:
    """Compute the run's summary: scores, NA and error counts, time and throughput."""
    records = list(records)
    tokens_in = [r["tokens_in"] for r in records if r.get("tokens_in") is not None]
    tokens_out = [r["tokens_out"] for r in records if r.get("tokens_out") is not None]
    model_seconds = [r["seconds"] for r in records if r.get("seconds")]
    return {
        "run_id": info.run_id,
        "dataset": info.dataset,
        "strategy": info.strategy,
        "method": info.method,
        "models": info.models,
        "judge": info.judge,
        "n": len(records),
        **score_summary(records),
        "verdicts": {label: sum(1 for r in records if r["label"] == label)
                     for label in ("T", "F", "NA")},
        "invalid": sum(1 for r in records if r["label"] == "NA" and not r.get("error")),
        "errors": sum(1 for r in records if r.get("error")),
        "na": sum(1 for r in records if r["label"] == "NA"),
        "mean_model_seconds": sum(model_seconds) / len(model_seconds) if model_seconds else None,
        "tokens_in": sum(tokens_in) if tokens_in else None,
        "tokens_out": sum(tokens_out) if tokens_out else None,
        **cost_summary(records, info.models, info.pricing),
        "ran_this_time": ran,
        "seconds": round(seconds, 3),
        "facts_per_second": round(ran / seconds, 2) if seconds > 0 else None,
    }
