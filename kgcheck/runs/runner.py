"""Run a strategy graph over many facts: bounded concurrency, progress, resumable output.

Every verdict is appended to ``OUT/verdicts.jsonl`` the moment it completes, so a killed run
loses nothing; ``--resume`` keeps the finished verdicts (the last record per fact), retries
the ones that ended in an error, and runs the rest. ``OUT/summary.json`` is written at the
end and describes every verdict in the folder. ``OUT/run.json`` records what the run was:
strategy, models, a fingerprint of the input facts, the settings and the prompt files'
contents, so that a resume with other input or settings is refused instead of mixing two runs.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import time
import uuid
import warnings
from array import array
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from kgcheck.arguments import Arg, ArgumentError, literal
from kgcheck.data import safe_json
from kgcheck.data.atomic import write_text_atomic
from kgcheck.data.fact_stream import batched, fact_row, input_fingerprint
from kgcheck.data.facts import Fact
from kgcheck.data.runfolder import (
    LOCK,
    RESUME_INDEX,
    RUN_INFO,
    SUMMARY,
    VERDICTS,
    RunError,
    VerdictSink,
    VerdictsView,
    exclusive,
    make_folder,
    short_repr,
)
from kgcheck.data.verdict_index import VerdictIndex
from kgcheck.evals.calibration import TRUTH, summary_calibration_of
from kgcheck.evals.metrics import label_columns, problem_counts, score_counts
from kgcheck.failures import classify_name, is_overload, run_stop
from kgcheck.graphs import verdicts
from kgcheck.graphs.registry import verdict_labels
from kgcheck.providers import pressure
from kgcheck.providers.pricing import Pricing, add_usage, cost_of_usage
from kgcheck.providers.secrets import redact_settings, redact_value
from kgcheck.runs.concurrency import AdaptiveLimit, FixedLimit, Limit
from kgcheck.runs.outcomes import RunOutcomes
from kgcheck.runs.records import verdict_record
from kgcheck.runs.spec import spec_changes

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

__all__ = ["IDENTITY_KEYS", "RECURSION_LIMIT", "RESUME_NEUTRAL", "CheckLoop", "Invoke",
           "RunInfo", "RunResult", "RunWarning", "Stop", "StopRule", "SummaryTally", "Warn",
           "as_limit", "batched", "changed_facts", "check_facts", "different_run",
           "fact_digest", "fewer_collections", "file_digest", "gold_mark", "input_fingerprint",
           "kept_verdict", "prepare_out_dir", "progress_bar", "public_settings", "record_of",
           "resume_conflicts", "run_config", "stop_task", "summarize", "summary_of",
           "tally_records", "verdict_of", "write_run_file"]

# Identity of a run: a resume must match these fields of run.json (and its input and
# settings, see ``resume_conflicts``). ``source`` (the input's path) is recorded, not compared:
# the input is identified by its content.
IDENTITY_KEYS = ("dataset", "strategy", "method", "models", "judge")
# Settings a resume may change: where the server is and how long to wait for it, not what
# a model is asked or how it samples.
RESUME_NEUTRAL = frozenset({"base_url", "timeout", "max_retries", "retry_backoff",
                            "replay_latency", "data_dir", "local_threads", "local_port"})
# Settings newer than some run folders, with the value that means what those runs did: a
# stored run without the setting resumes when the new run keeps that value.
ADDED_SETTINGS: dict[str, Any] = {"abstain": False, "reasons": False, "citations": False,
                                  "corrections": False, "transcript": True, "logprobs": "auto"}
RECURSION_LIMIT = 50
# Facts looked up in the resume index at once while the input streams past.
_LOOKUP_BATCH = 256
# Allocations between two young-generation collections during a run (Python's default: 700).
GC_THRESHOLD = 10_000

Invoke = Callable[[Fact], Awaitable[dict[str, Any]]]
Warn = Callable[[str], None]


class RunWarning(UserWarning):
    """Something in a run folder was ignored (an unreadable verdict line)."""


def public_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """Return settings as they may be written or shown: JSON-plain, without credentials.

    Every settings value that reaches ``run.json`` (or a message) passes through here.
    """
    # Credentials (keys, tokens, passwords, URL user:password and query secrets) go first.
    kept = redact_settings({str(k): v for k, v in values.items()})
    # A JSON round trip, so that stored and new settings compare alike (tuples as lists).
    return dict(json.loads(json.dumps(kept, default=str)))


def fact_digest(fact: Fact) -> str:
    """Identify one fact by content: a SHA-256 (16 hex digits) over id, terms and label.

    Each verdict keeps it (``fact_sha``), so a resume can tell whether a stored verdict
    still belongs to the fact of that id.
    """
    return hashlib.sha256(fact_row(fact)).hexdigest()[:16]


def file_digest(path: str | Path) -> str:
    """Return the SHA-256 of a file's bytes (a prompt file's identity)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass
class RunResult:
    """What a finished (or stopped) run leaves: its folder, verdicts and summary."""

    out_dir: Path
    # The folder's verdicts: a list, or a ``VerdictsView`` streaming them from disk.
    records: Sequence[dict[str, Any]]
    summary: dict[str, Any]
    aborted: str | None = None
    # What went wrong, already counted (a sharded run's workers count their shards).
    outcomes: RunOutcomes | None = None
    # The summary's tally, when the run kept it (a sharded run's, merged from its shards).
    tally: SummaryTally | None = None

    def outcome_counts(self) -> RunOutcomes:
        """Return the run's failed and skipped facts and failing sources, counted."""
        return self.outcomes if self.outcomes is not None else RunOutcomes.of(self.records)


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
    # ``input_fingerprint`` of the facts this invocation checks; empty when not known.
    input: dict[str, Any] = field(default_factory=dict)
    # Prompt-file settings by name -> SHA-256 of the file they name.
    prompts: dict[str, str] = field(default_factory=dict)
    # The RunSpec that made the run (``RunSpec.stored``); empty when not known.
    spec: dict[str, Any] = field(default_factory=dict)
    # The arguments the run was planned with (``plan_run``'s, JSON values), so that a resume
    # given only the folder runs the same input with the same settings; empty when its
    # facts were given in memory (nothing in the folder can bring them back).
    arguments: dict[str, Any] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """Return the fields a resumed run must share with the stored one."""
        return {k: getattr(self, k) for k in IDENTITY_KEYS}

    def stored(self) -> dict[str, Any]:
        """Return what ``run.json`` keeps: identity, source, input, settings, prompt files."""
        return redact_value({**self.identity(), "source": self.source, "run_id": self.run_id,
                             "input": self.input, "settings": public_settings(self.settings),
                             "prompts": self.prompts,
                             **({"spec": self.spec} if self.spec else {}),
                             **({"arguments": self.arguments} if self.arguments else {})})


def run_config(run_id: str) -> RunnableConfig:
    """Return the graph config of every fact of a run: its recursion bound, its id for traces."""
    return {"recursion_limit": RECURSION_LIMIT, "metadata": {"kgcheck_run_id": run_id}}


def different_run(out_dir: Path, changes: Sequence[str]) -> RunError:
    """Return the error of a resume into a folder that holds another run."""
    return RunError(
        f"cannot resume {literal(str(out_dir))}: it holds a different run; changed: "
        f"{literal('; '.join(changes))}. Start over with {{fresh}}, or use another "
        "{out}", fresh=Arg("fresh", True, out=str(out_dir)), out=Arg("out"))


def resume_conflicts(stored: Mapping[str, Any], info: RunInfo) -> list[str]:
    """Say what differs between a stored run and the one asked for (empty: it may resume)."""
    if info.input and "input" not in stored:
        return ["run.json records no fingerprint of its input facts (written by an older "
                "kgcheck), so its verdicts cannot be matched to this input"]
    changes = [f"{k} ({short_repr(stored.get(k))} then, {short_repr(v)} now)"
               for k, v in redact_value(info.identity()).items() if stored.get(k) != v]
    new = public_settings(info.settings)
    old = {**{k: v for k, v in ADDED_SETTINGS.items() if k in new},
           **(stored.get("settings") or {})}
    old_prompts = stored.get("prompts") or {}
    # A prompt file counts by content: the same text under another name is the same prompt.
    same_text = {key for key, digest in info.prompts.items() if old_prompts.get(key) == digest}
    changed = {key for key in (set(old) | set(new)) - RESUME_NEUTRAL - same_text
               if old.get(key) != new.get(key)}
    changes += [f"setting {key} ({short_repr(old.get(key))} then, {short_repr(new.get(key))} now)"
                for key in sorted(changed)]
    for key in sorted((set(old_prompts) | set(info.prompts)) - changed):
        if old_prompts.get(key) != info.prompts.get(key):
            changes.append(f"the content of the {key} file {short_repr(new.get(key, ''))}")
    return changes + spec_changes(stored.get("spec"), info.spec)


def gold_mark(fact: Fact) -> str | None:
    """Return the gold label as ``T``/``F`` (None when unknown)."""
    return None if fact.label is None else ("T" if fact.label else "F")


def write_run_file(path: Path, text: str) -> None:
    """Replace a file of a run folder; a clear ``RunError`` when it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    except OSError as exc:
        raise RunError(f"cannot write {literal(str(path))}: {literal(str(exc.strerror or exc))}; "
                       "free space or fix the folder's permissions, then rerun with {resume}",
                       resume=Arg("resume", True, out=str(path.parent))) from None


def _warn_default(message: str) -> None:
    warnings.warn(message, RunWarning, stacklevel=3)


def kept_verdict(record: Mapping[str, Any]) -> bool:
    """Tell whether a resume keeps a verdict: it has no error, or its input is defective."""
    return not record.get("error") or verdicts.is_defect(record)


def changed_facts(index: VerdictIndex, facts: Iterable[Fact]) -> tuple[list[str], int]:
    """Say which stored verdicts belong to other facts now (the input was edited).

    Returns the problem (empty: none) and how many of ``facts`` have a kept verdict. The
    facts stream past in batches; the verdicts are looked up in the on-disk index.
    """
    differ = with_verdicts = 0
    first: str | None = None
    for batch in batched(facts, _LOOKUP_BATCH):
        stored = index.digests([f.id for f in batch])
        for fact in batch:
            if fact.id not in stored:
                continue
            with_verdicts += 1
            if stored[fact.id] != fact_digest(fact):
                differ += 1
                first = first or fact.id
    if not differ:
        return [], with_verdicts
    return [f"the input facts ({differ} of the {with_verdicts} facts with verdicts are "
            f"not the facts those verdicts were given for, e.g. fact {first!r})"], with_verdicts


def prepare_out_dir(out_dir: Path, info: RunInfo, *, resume: bool,
                    fresh: bool, warn: Warn | None = None,
                    facts: Iterable[Fact] | None = None) -> tuple[VerdictIndex, int | None]:
    """Check or create the run folder; return the index of the verdicts a resume keeps.

    A resume must match the stored run (``resume_conflicts``), and every verdict kept for a
    fact of ``facts`` must have been given for that same fact (``fact_sha``). Returns the
    index (the caller closes it) and, when known, how many of ``facts`` it holds.
    """
    make_folder(out_dir)
    verdicts_path = out_dir / VERDICTS
    info_path = out_dir / RUN_INFO
    foreign = sorted(p.name for p in out_dir.iterdir()
                     if p.is_file() and p.name not in (VERDICTS, SUMMARY, RUN_INFO, LOCK,
                                                       RESUME_INDEX))
    if foreign and not info_path.exists():
        raise RunError(
            f"{literal(str(out_dir))} is not a kgcheck run folder (it holds "
            f"{literal(', '.join(foreign[:3]))} but no "
            f"{RUN_INFO}); pick another {{out}}", out=Arg("out")
        )
    if fresh:
        for name in (VERDICTS, SUMMARY, RUN_INFO):
            (out_dir / name).unlink(missing_ok=True)
    index = VerdictIndex.build(verdicts_path, kept_verdict, warn or _warn_default)
    try:
        done = _check_resume(index, out_dir, info, resume=resume, facts=facts)
        # Rewrite without duplicates, unreadable lines or errored records (retried below).
        index.rewrite()
        write_run_file(info_path, safe_json.dumps(info.stored(), indent=1) + "\n")
    except OSError as exc:
        index.close()
        raise RunError(f"cannot write {literal(str(verdicts_path))}: "
                       f"{literal(str(exc.strerror or exc))}; free space or fix the folder's "
                       "permissions, then rerun with {resume}",
                       resume=Arg("resume", True, out=str(out_dir))) from None
    except BaseException:
        index.close()
        raise
    return index, done


def _check_resume(index: VerdictIndex, out_dir: Path, info: RunInfo, *, resume: bool,
                  facts: Iterable[Fact] | None) -> int | None:
    """Refuse a folder that holds verdicts of another run; count the input's kept verdicts."""
    held = index.total()
    if held and not resume:
        raise RunError(
            f"{literal(str(out_dir))} already holds {held} verdicts: pass {{resume}} "
            "to continue that run, {fresh} to start over, or another {out}",
            resume=Arg("resume", True), fresh=Arg("fresh", True), out=Arg("out"))
    if not held:
        return 0
    info_path = out_dir / RUN_INFO
    if not info_path.exists():
        return None  # verdicts without run.json: kept as they are, as the facts come
    try:
        stored = safe_json.parse(info_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        stored = {}
    stored = stored if isinstance(stored, dict) else {}
    changes = resume_conflicts(stored, info)
    done: int | None = None
    if info.input and facts is not None and not changes:
        if (stored.get("input") or {}).get("sha256") == info.input.get("sha256"):
            # The very same facts: every kept verdict is one of theirs, given for it.
            done = len(index)
        else:
            found, done = changed_facts(index, facts)
            changes += found
    if changes:
        raise different_run(out_dir, changes)
    info.run_id = stored.get("run_id", info.run_id)
    return done


def record_of(fact: Fact, verdict: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Build the verdict record a run writes for a fact (with its digest, credentials masked)."""
    # No credential reaches the verdicts file, whichever message or detail quoted one.
    return redact_value({**verdict_record(fact, verdict, run_id, gold_mark(fact)),
                         "fact_sha": fact_digest(fact)})


async def stop_task(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` unless it is done, and wait for it to end."""
    if not task.done():
        task.cancel()
    with suppress(asyncio.CancelledError):
        await task


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


def progress_bar(*middle: str, show: bool) -> Progress:
    """Build a run's bar: its name, a short bar, done of all, ``middle``'s fields, the time.

    Each of ``middle`` is a rich text column's format (``"{task.fields[rate]:.1f}/s"``).
    """
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=8),
                    MofNCompleteColumn(), *(TextColumn(text) for text in middle),
                    TimeRemainingColumn(elapsed_when_finished=True), disable=not show)


def _progress(disable: bool, adaptive: bool = False) -> Progress:
    """Build a progress bar that fits 80 columns (a consensus phase's name and ties too)."""
    middle = ["{task.fields[rate]:.1f}/s", "{task.fields[tally]}"]
    if adaptive:
        middle.append("at once {task.fields[level]}")
    return progress_bar(*middle, show=not disable)


def as_limit(concurrency: int | Limit) -> Limit:
    """Accept a number of facts at once or a limit object (``AdaptiveLimit``)."""
    if isinstance(concurrency, FixedLimit | AdaptiveLimit):
        return concurrency
    if concurrency < 1:
        raise ArgumentError("{concurrency} must be at least 1",
                            concurrency=Arg("concurrency", concurrency))
    return FixedLimit(concurrency)


async def check_facts(
    facts: Iterable[Fact],
    invoke: Invoke,
    info: RunInfo,
    out_dir: Path,
    *,
    concurrency: int | Limit = 4,
    resume: bool = False,
    fresh: bool = False,
    show_progress: bool = True,
    max_consecutive_unreachable: int | None = None,
    summary_extras: Callable[[Sequence[dict[str, Any]]], dict[str, Any]] | None = None,
    phase: str | None = None,
    warn: Warn | None = None,
    count_also: Callable[[Mapping[str, Any]], None] | None = None,
) -> RunResult:
    """Invoke a graph on every fact, appending each verdict as it completes.

    ``facts`` may be a stream (read once, in a bounded window: a whole KG never sits in
    memory); the verdicts a resume keeps are looked up in an on-disk index, and the summary
    streams the folder's verdicts, so memory stays flat in the number of facts.

    ``invoke`` runs one fact and returns the graph output (with ``verdict``). Stops early,
    with verdicts kept, when the model server is unreachable for many facts in a row.
    ``concurrency`` is a number of facts at once or an ``AdaptiveLimit``. ``phase`` names a
    consensus phase in the progress bar, which then counts ties apart from NA answers. The
    summary covers every verdict in the folder, also those of earlier invocations that asked
    for more facts (a resume with a smaller ``limit``). ``warn`` hears of lines of
    ``verdicts.jsonl`` that had to be ignored. ``count_also`` is handed every record of the
    pass that counts the summary, before ``summary_extras`` is called: figures of their own
    (a consensus run's) without a second read of the verdicts.
    """
    concurrency = as_limit(concurrency)
    out_dir = Path(out_dir)
    with exclusive(out_dir), fewer_collections():
        return await _run_locked(
            facts, invoke, info, out_dir, concurrency=concurrency, resume=resume, fresh=fresh,
            show_progress=show_progress, max_consecutive_unreachable=max_consecutive_unreachable,
            summary_extras=summary_extras, phase=phase, warn=warn, count_also=count_also,
        )


@contextmanager
def fewer_collections(threshold: int = GC_THRESHOLD) -> Iterator[None]:
    """Run the young-object garbage collection less often while facts are checked.

    Each fact allocates thousands of short-lived objects (messages, configs, graph tasks);
    at Python's default threshold (700) the collector runs every few facts and takes about
    a tenth of the client's CPU (``benchmarks/bench_client_cpu.py``). The old thresholds
    come back afterwards.
    """
    before = gc.get_threshold()
    gc.set_threshold(max(threshold, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _tally(state: dict[str, int], phase: str | None) -> str:
    """Format the progress counts: NA and errors, and ties and failed member calls in a phase."""
    ties = f"ties {state['ties']} " if phase else ""
    failed = state.get("member_errors", 0)
    members = f", members {failed}" if failed else ""
    return f"{ties}NA {state['na']} errors {state['errors']}{members}"


# One model's call within a fact's record: (model, error type, error); no error if it worked.
Call = tuple[str, str | None, str | None]


def model_calls(record: Mapping[str, Any]) -> tuple[list[Call], bool]:
    """Return the model calls a record stands for, and whether they are consensus parts.

    A consensus record holds each member's vote and the judge's answer: each is judged by
    the same stop rule as a single model's, so that a member failing on every call cannot
    hide behind the others' votes.
    """
    details = record.get("details") or {}
    # Consensus keeps a list of member votes; DKA-SC's "votes" are label counts (a dict).
    votes = details.get("votes")
    votes = [v for v in votes if isinstance(v, Mapping)] if isinstance(votes, list) else []
    if not votes:
        failed = record.get("error") and not verdicts.is_defect(record)
        return [(str(record.get("model") or ""), details.get("error_type") if failed else None,
                 record.get("error") if failed else None)], False
    calls: list[Call] = [(str(v.get("model")), v.get("error_type") if v.get("error") else None,
                          v.get("error")) for v in votes]
    if details.get("judge_called"):
        error = details.get("judge_error")
        calls.append((str(details.get("judge") or "judge"),
                      (details.get("judge_error_type") or "Error") if error else None, error))
    return calls, True


@dataclass
class StopRule:
    """When a run stops early: a settings error at once, a dead server after a streak.

    Streaks are kept per model, so a consensus member (or judge) that fails on every call
    stops the run as a single model would, while the other members keep answering.
    """

    limit: int
    unreachable: dict[str, int] = field(default_factory=dict)
    server: dict[str, int] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)
    reason: str | None = None
    message: str | None = None

    def see(self, record: Mapping[str, Any]) -> int:
        """Take one record into account; return how many consensus parts of it failed."""
        calls, parts = model_calls(record)
        failed = 0
        for model, error_type, error in calls:
            failed += parts and error is not None
            said = f"member {model}: {error}" if parts else str(error)
            stop = run_stop(classify_name(error_type)) if error is not None else None
            if stop == "config":
                self._stop("configuration", f"stopped: {said}")
            elif stop == "server-gone":
                # The server this run started has exited: no later fact can be answered.
                self._stop("server", f"stopped: {said}")
            elif stop == "unreachable":
                self.unreachable[model] = self.unreachable.get(model, 0) + 1
                if self.unreachable[model] >= self.limit:
                    self._stop("unreachable", f"stopped after {self.limit} facts in a row "
                               f"could not reach the model: {said}")
            elif stop == "server":
                self.unreachable[model] = 0
                self.server[model] = self.server.get(model, 0) + 1
                if self.server[model] >= self.limit:
                    self._stop("server", f"stopped after {self.limit} facts in a row got no "
                               f"usable answer from the model server: {said}")
            else:
                self.unreachable[model] = self.server[model] = 0
        self._see_sources(record)
        return failed

    def _see_sources(self, record: Mapping[str, Any]) -> None:
        """Count facts in a row for which an evidence source failed, per source."""
        gathering = (record.get("details") or {}).get("gathering")
        if not isinstance(gathering, Mapping):
            return
        failed = gathering.get("failed") or {}
        for name in list(self.sources):
            if name not in failed:
                self.sources[name] = 0
        for name, reason in failed.items():
            self.sources[name] = self.sources.get(name, 0) + 1
            if self.sources[name] >= self.limit:
                self._stop("source", f"stopped after {self.limit} facts in a row could not "
                           f"get evidence: source {name} failed: {reason}")

    def _stop(self, reason: str, message: str) -> None:
        if self.reason is None:
            self.reason, self.message = reason, message


async def _run_locked(
    facts: Iterable[Fact],
    invoke: Invoke,
    info: RunInfo,
    out_dir: Path,
    *,
    concurrency: Limit,
    resume: bool,
    fresh: bool,
    show_progress: bool,
    max_consecutive_unreachable: int | None,
    summary_extras: Callable[[Sequence[dict[str, Any]]], dict[str, Any]] | None,
    phase: str | None = None,
    warn: Warn | None,
    count_also: Callable[[Mapping[str, Any]], None] | None = None,
) -> RunResult:
    index, done_before = prepare_out_dir(out_dir, info, resume=resume, fresh=fresh,
                                         warn=warn, facts=facts)
    try:
        return await _run_indexed(
            facts, invoke, info, out_dir, index, done_before, concurrency=concurrency,
            show_progress=show_progress, max_consecutive_unreachable=max_consecutive_unreachable,
            summary_extras=summary_extras, phase=phase, count_also=count_also)
    finally:
        index.close()


async def _run_indexed(
    facts: Iterable[Fact],
    invoke: Invoke,
    info: RunInfo,
    out_dir: Path,
    index: VerdictIndex,
    done_before: int | None,
    *,
    concurrency: Limit,
    show_progress: bool,
    max_consecutive_unreachable: int | None,
    summary_extras: Callable[[Sequence[dict[str, Any]]], dict[str, Any]] | None,
    phase: str | None,
    count_also: Callable[[Mapping[str, Any]], None] | None = None,
) -> RunResult:
    asked = len(facts) if isinstance(facts, Sized) else None
    todo_total = None if asked is None or done_before is None else max(0, asked - done_before)
    model_label = ",".join(info.models)
    limit = max_consecutive_unreachable or max(5, 2 * concurrency.maximum)
    adaptive = isinstance(concurrency, AdaptiveLimit)
    workers = min(concurrency.maximum, max(1, todo_total if todo_total is not None
                                           else concurrency.maximum))
    state = {"done": 0, "na": 0, "ties": 0, "errors": 0, "member_errors": 0}
    started = time.perf_counter()
    verdicts_path = out_dir / VERDICTS
    with _progress(not show_progress, adaptive) as progress:
        title = f"{info.method} {info.dataset}" + (f" {phase}" if phase else "")
        task = progress.add_task(title, total=todo_total, rate=0.0,
                                 tally=_tally(state, phase), level=concurrency.current)

        def seen(record: dict[str, Any], failed_parts: int) -> None:
            state["done"] += 1
            tie = (record.get("details") or {}).get("decision") == "tie"
            state["ties"] += tie
            # A tie left undecided is NA too; in a consensus phase it is counted as a tie.
            state["na"] += record["label"] == "NA" and not (tie and phase)
            if record.get("error") and not verdicts.is_defect(record):
                state["errors"] += 1
            state["member_errors"] += failed_parts
            elapsed = time.perf_counter() - started
            progress.update(task, advance=1, rate=state["done"] / max(elapsed, 1e-9),
                            tally=_tally(state, phase), level=concurrency.current)

        loop = CheckLoop(invoke, method=info.method, model=model_label,
                         run_id=info.run_id, path=verdicts_path, limit=concurrency,
                         workers=workers, stop_rule=StopRule(limit), kept=index, on_record=seen)
        await loop.run(facts)

    records = VerdictsView(verdicts_path)
    if loop.write_failed is not None and loop.stopped is not None:
        raise RunError(f"{literal(loop.stopped.message)}; the {len(records)} verdicts written "
                       "so far are kept: free space, then continue with {resume}",
                       resume=Arg("resume", True, out=str(out_dir)))
    if loop.read_failed is not None:
        raise RunError(f"{literal(str(loop.read_failed))}; the {len(records)} verdicts written "
                       "so far are kept: fix the input, then continue with {resume}",
                       resume=Arg("resume", True, out=str(out_dir)))
    seconds = time.perf_counter() - started
    # The folder's verdicts, all of them, streamed from disk: a resume that asked for fewer
    # facts (--limit) does not shrink what the summary describes. One pass counts the
    # summary's figures and what the command line reports (failed and skipped facts).
    tally, outcomes = tally_records(records, info.models, count_also)
    summary = summary_of(tally, info, seconds=seconds, ran=loop.ran)
    summary["asked"] = asked if asked is not None else loop.read + (done_before or 0)
    if isinstance(concurrency, AdaptiveLimit):
        summary["concurrency"] = {"mode": "auto", "max": concurrency.maximum,
                                  "final": concurrency.current, "peak": concurrency.peak,
                                  "backoffs": concurrency.cuts, "lent": concurrency.lent}
    if summary_extras:
        summary.update(summary_extras(records))
    if loop.stopped is not None:
        summary["aborted_because"] = loop.stopped.reason
        summary["aborted"] = loop.stopped.message
    summary = redact_value(summary)
    write_run_file(out_dir / SUMMARY, safe_json.dumps(summary, indent=1) + "\n")
    return RunResult(out_dir, records, summary, summary.get("aborted"), outcomes, tally)


@dataclass(frozen=True)
class Stop:
    """Why a check loop stopped early, and the message a user reads.

    ``reason``: configuration, unreachable, server, disk, input or stopped.
    """

    reason: str
    message: str


class CheckLoop:
    """Check a stream of facts ``workers`` at a time, appending each verdict to one file.

    The one loop behind a local run (``_run_indexed``) and a shard of a sharded run
    (``shard_check``). A producer feeds the facts without a kept verdict (``kept``, looked
    up in batches in a resume's on-disk index) into a bounded queue, so the input is never
    read ahead in whole; workers check them under the concurrency ``limit``; each verdict is
    appended whole and seen by the stop rule. The loop takes no further fact once it has a
    reason to stop (``stopped``): the stop rule's, a failed write, a malformed input line,
    or the caller's ``halted`` (a sharded run's stop file). ``on_record`` hears of each
    verdict written, with the number of its consensus parts that failed.
    """

    def __init__(self, invoke: Invoke, *, method: str, model: str, run_id: str, path: Path,
                 limit: Limit, workers: int, stop_rule: StopRule,
                 kept: VerdictIndex | None = None,
                 on_record: Callable[[dict[str, Any], int], None] | None = None,
                 halted: Callable[[], bool] | None = None) -> None:
        self.invoke = invoke
        self.method = method
        self.model = model
        self.run_id = run_id
        self.path = path
        self.limit = limit
        self.workers = workers
        self.stop_rule = stop_rule
        self.kept = kept if kept is not None and len(kept) else None
        self.on_record = on_record
        self.halted = halted
        self.ran = self.read = 0
        self.stopped: Stop | None = None
        self.write_failed: OSError | None = None
        self.read_failed: Exception | None = None

    def _stop(self, reason: str, message: str) -> None:
        if self.stopped is None:
            self.stopped = Stop(reason, message)

    async def run(self, facts: Iterable[Fact]) -> None:
        """Check the facts without a kept verdict; return once they are done or it stops."""
        # A bounded window: the input streams in as facts finish.
        queue: asyncio.Queue[Fact | None] = asyncio.Queue(maxsize=2 * self.workers)
        sink = VerdictSink(self.path)
        reader = asyncio.ensure_future(self._produce(facts, queue))
        try:
            with pressure.listening(self.limit.signal, self.limit.retake):
                await asyncio.gather(*(self._work(queue, sink) for _ in range(self.workers)))
        finally:
            await stop_task(reader)
            sink.close()

    async def _produce(self, facts: Iterable[Fact], queue: asyncio.Queue[Fact | None]) -> None:
        try:
            await self._feed(facts, queue)
        except Exception as exc:  # noqa: BLE001 - a malformed line ends the run cleanly
            self.read_failed = exc
            self._stop("input", str(exc))
        # The end of the input, for each worker, also when the loop stopped before it (not
        # when cancelled: the workers are gone).
        for _ in range(self.workers):
            await queue.put(None)

    async def _feed(self, facts: Iterable[Fact], queue: asyncio.Queue[Fact | None]) -> None:
        for batch in batched(facts, _LOOKUP_BATCH):
            kept = self.kept.kept_among([f.id for f in batch]) if self.kept else set()
            for fact in batch:
                if fact.id in kept:
                    continue
                if self.stopped is None and self.halted is not None and self.halted():
                    self._stop("stopped", "the run was stopped")
                if self.stopped is not None:
                    return
                self.read += 1
                await queue.put(fact)

    async def _work(self, queue: asyncio.Queue[Fact | None], sink: VerdictSink) -> None:
        while True:
            fact = await queue.get()
            if fact is None or self.stopped is not None:
                return
            async with self.limit.slot() as held:
                verdict = await verdict_of(self.invoke, fact, self.method, self.model)
                seconds = held.active_seconds()
            failure = classify_name((verdict.get("details") or {}).get("error_type"))
            self.limit.done(seconds, overloaded=is_overload(failure))
            if self.stopped is not None and self.read_failed is None:
                return  # stopped meanwhile (e.g. the disk is full): write nothing more
            record = record_of(fact, verdict, self.run_id)
            try:
                sink.write(record)
            except OSError as exc:
                self.write_failed = exc
                self._stop("disk", f"cannot write {self.path}: {exc.strerror or exc}")
                return
            self.ran += 1
            failed_parts = self.stop_rule.see(record)
            if self.stop_rule.message:
                self._stop(self.stop_rule.reason or "configuration", self.stop_rule.message)
            if self.on_record is not None:
                self.on_record(record, failed_parts)


class SummaryTally:
    """Take verdict records one at a time; give the run's summary figures at the end.

    Memory stays small however many records pass: counters, counts of records by
    (predicate, gold mark, label) (what the scores read), and a few bytes per labelled
    record with a confidence (its truth and confidence, for calibration). Tallies of parts of
    a run merge into the tally of the run (``merge``; ``state`` and ``from_state`` carry one
    as JSON), which gives the figures one tally of every record gives.
    """

    def __init__(self, models: Sequence[str]) -> None:
        self.models = list(models)
        self.n = 0
        self.keys: Counter[tuple[Any, Any, str]] = Counter()
        self.truth: array[int] = array("b")
        self.confidence: array[float] = array("d")
        self.sources: dict[str, int] = {}
        self.problems: dict[str, int] = {}
        self.usage: dict[str, list[int]] = {}
        self.counts = dict.fromkeys(
            ("with_reason", "with_correction", "invalid", "errors", "skipped", "na",
             "T", "F", "NA", "NEI", "cached"), 0)
        self.tokens_in = self.tokens_out = 0
        self.counted_in = self.counted_out = False
        self.model_seconds = 0.0
        self.timed = 0

    def gold_pairs(self) -> dict[tuple[str, str], int]:
        """Return the counts of (gold, label) pairs of the records with a gold label."""
        pairs: dict[tuple[str, str], int] = {}
        for (_, gold, label), count in self.keys.items():
            if gold in ("T", "F"):
                pairs[(gold, label)] = pairs.get((gold, label), 0) + count
        return pairs

    def add(self, record: Mapping[str, Any]) -> None:
        """Take one verdict record into the figures."""
        self.n += 1
        label = str(record.get("label", "NA"))
        self.keys[(record.get("predicate"), record.get("gold"), label)] += 1
        confidence = record.get("confidence")
        mark = str(record.get("gold") or "")
        if confidence is not None and mark in TRUTH:
            self.truth.append(TRUTH[mark])
            self.confidence.append(float(confidence))
        source = str(record.get("confidence_source") or "none")
        self.sources[source] = self.sources.get(source, 0) + 1
        for kind, count in problem_counts([record]).items():
            self.problems[kind] = self.problems.get(kind, 0) + count
        add_usage(self.usage, record, self.models)
        counts = self.counts
        counts["with_reason"] += bool(record.get("rationale"))
        counts["with_correction"] += bool(record.get("correction"))
        counts["cached"] += bool(record.get("cached"))
        if label in counts:
            counts[label] += 1
        defect = verdicts.is_defect(record)
        counts["invalid"] += label == "NA" and not record.get("error")
        counts["errors"] += bool(record.get("error")) and not defect
        counts["skipped"] += defect
        counts["na"] += label == "NA"
        if record.get("tokens_in") is not None:
            self.tokens_in += record["tokens_in"]
            self.counted_in = True
        if record.get("tokens_out") is not None:
            self.tokens_out += record["tokens_out"]
            self.counted_out = True
        if record.get("seconds"):
            self.model_seconds += record["seconds"]
            self.timed += 1

    def merge(self, other: SummaryTally) -> None:
        """Take another tally's records into this one (a later part of the run)."""
        self.n += other.n
        self.keys.update(other.keys)
        self.truth.extend(other.truth)
        self.confidence.extend(other.confidence)
        for mine, theirs in ((self.sources, other.sources), (self.problems, other.problems),
                             (self.counts, other.counts)):
            for key, count in theirs.items():
                mine[key] = mine.get(key, 0) + count
        for model, (tokens_in, tokens_out) in other.usage.items():
            totals = self.usage.setdefault(model, [0, 0])
            totals[0] += tokens_in
            totals[1] += tokens_out
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.counted_in = self.counted_in or other.counted_in
        self.counted_out = self.counted_out or other.counted_out
        self.model_seconds += other.model_seconds
        self.timed += other.timed

    def state(self) -> dict[str, Any]:
        """Return the tally as JSON-plain data (``from_state`` reads it back)."""
        return {"n": self.n, "keys": [[*key, count] for key, count in self.keys.items()],
                "truth": list(self.truth), "confidence": list(self.confidence),
                "sources": self.sources, "problems": self.problems, "usage": self.usage,
                "counts": self.counts, "tokens": [self.tokens_in, self.tokens_out],
                "counted": [self.counted_in, self.counted_out],
                "model_seconds": self.model_seconds, "timed": self.timed}

    @classmethod
    def from_state(cls, models: Sequence[str], state: Mapping[str, Any]) -> SummaryTally:
        """Rebuild a tally from ``state``'s data."""
        tally = cls(models)
        tally.n = int(state["n"])
        tally.keys = Counter({(p, g, str(label)): int(n) for p, g, label, n in state["keys"]})
        tally.truth = array("b", state["truth"])
        tally.confidence = array("d", state["confidence"])
        tally.sources = dict(state["sources"])
        tally.problems = dict(state["problems"])
        tally.usage = {str(m): [int(a), int(b)] for m, (a, b) in state["usage"].items()}
        tally.counts.update(state["counts"])
        tally.tokens_in, tally.tokens_out = state["tokens"]
        tally.counted_in, tally.counted_out = state["counted"]
        tally.model_seconds = float(state["model_seconds"])
        tally.timed = int(state["timed"])
        return tally

    def figures(self, pricing: Pricing | None = None) -> dict[str, Any]:
        """Return the summary's figures over the records taken so far."""
        counts = self.counts
        # Calibration in one order whatever order the records came in (ties in the
        # precision-coverage curve keep it), so that the figures depend on the records only.
        order = sorted(range(len(self.truth)), key=lambda i: (self.confidence[i],
                                                              self.truth[i]))
        return {
            "n": self.n,
            **score_counts(self.keys),
            "calibration": summary_calibration_of([self.truth[i] for i in order],
                                                  [self.confidence[i] for i in order],
                                                  self.sources),
            # Bad answers beside the label: invented passage ids, invalid corrections, ...
            "answer_problems": dict(sorted(self.problems.items())),
            "with_reason": counts["with_reason"],
            "with_correction": counts["with_correction"],
            "verdicts": {label: counts[label] for label in ("T", "F", "NA", "NEI")},
            "invalid": counts["invalid"],
            # Failed checks (a resume retries them); defective input is counted as skipped.
            "errors": counts["errors"],
            "skipped": counts["skipped"],
            "na": counts["na"],
            # Verdicts whose every model call the answer cache served (no model ran).
            "cached_verdicts": counts["cached"],
            "mean_model_seconds": self.model_seconds / self.timed if self.timed else None,
            "tokens_in": self.tokens_in if self.counted_in else None,
            "tokens_out": self.tokens_out if self.counted_out else None,
            **cost_of_usage(self.usage, self.models, pricing),
        }


def summarize(records: Iterable[Mapping[str, Any]], info: RunInfo, *, seconds: float,
              ran: int) -> dict[str, Any]:
    """Compute the run's summary: scores, NA and error counts, time and throughput.

    ``records`` is read once, as a stream (a ``VerdictsView`` of a whole KG's run).
    """
    tally = SummaryTally(info.models)
    for record in records:
        tally.add(record)
    return summary_of(tally, info, seconds=seconds, ran=ran)


def tally_records(records: Iterable[Mapping[str, Any]], models: Sequence[str],
                  also: Callable[[Mapping[str, Any]], None] | None = None,
                  ) -> tuple[SummaryTally, RunOutcomes]:
    """Count verdict records in one pass: the summary's figures and the run's outcomes.

    ``also`` is handed each record too (another tally of the same pass).
    """
    tally = SummaryTally(models)
    outcomes = RunOutcomes()
    for record in records:
        tally.add(record)
        outcomes.add(record)
        if also is not None:
            also(record)
    return tally, outcomes


def summary_of(tally: SummaryTally, info: RunInfo, *, seconds: float,
               ran: int) -> dict[str, Any]:
    """Compute the run's summary from the tally of its verdicts (see ``summarize``)."""
    figures = tally.figures(info.pricing)
    return {
        "run_id": info.run_id,
        "dataset": info.dataset,
        "strategy": info.strategy,
        "method": info.method,
        "models": info.models,
        "judge": info.judge,
        "n": figures.pop("n"),
        # Facts in the input (before --limit), when the run knows its input.
        "input_facts": info.input.get("facts"),
        **figures,
        # The labels besides T and F that tables give a column each, headed by the label
        # they count: the strategy's own (Strategy.labels) and any the verdicts hold.
        "label_columns": label_columns(verdict_labels(info.strategy), figures["verdicts"]),
        "ran_this_time": ran,
        "seconds": round(seconds, 3),
        "facts_per_second": round(ran / seconds, 2) if seconds > 0 else None,
    }
