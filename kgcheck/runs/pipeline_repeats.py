"""Repeats of a sharded run: each repeat a pass of the pipeline, combined on the workers.

``kgcheck run --engine ray --repeats N`` over every fact of a file runs the pipeline
(``kgcheck.runs.ray_pipeline``) N times, repeat ``i`` into its own sharded run folder
``OUT/repeats/<i>`` (each resumable as any sharded run, all cut in the run's shards). Then
one Ray task per shard (``combine_shard``) reads that shard of every repeat (they hold the
same facts) and writes OUT's shard: one record per fact, the majority over the repeats as
``repeats.combine_repeats`` makes it, and a marker with the shard's summary tally and its
part of the summary's ``repeats`` section (a histogram of its facts' label counts and its
most uncertain facts that flipped). The driver merges the markers into ``OUT/summary.json``,
the figures ``run_repeats`` gives for the same verdicts; it reads no verdict. OUT is a
sharded run folder, read by every command as one.

A combined shard's marker keeps a stamp of each repeat's marker it was made from: a resume
leaves it as it is unless one of them changed (the repeat's shard ran again), and a
combined shard made from a repeat left partial gets no marker, so a resume makes it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kgcheck.arguments import Arg
from kgcheck.data import safe_json
from kgcheck.data.atomic import write_text_atomic
from kgcheck.data.runfolder import (
    RUN_INFO,
    SUMMARY,
    RunError,
    VerdictsView,
    exclusive,
    scan_verdicts,
    shard_name,
)
from kgcheck.data.shard_store import ShardStore
from kgcheck.evals.metrics import score_counts, score_summary
from kgcheck.evals.stats.repeats import StabilityTally, fact_stability, repeats_section
from kgcheck.providers.secrets import redact_value
from kgcheck.runs import repeats as repeat_runs
from kgcheck.runs.outcomes import RunOutcomes
from kgcheck.runs.ray_pipeline import (
    SHARD_RETRIES,
    ShardedRun,
    cluster_cpus,
    share_of_cpus,
    survey,
    task_result,
)
from kgcheck.runs.repeats import (
    REPEATS_DIR,
    flipped_entry,
    majority_record,
    repeat_folder,
    top_flipped,
)
from kgcheck.runs.runner import (
    RunInfo,
    RunResult,
    SummaryTally,
    progress_bar,
    summary_of,
    tally_records,
    write_run_file,
)
from kgcheck.runs.shard_check import shard_result
from kgcheck.runs.sharded_folder import local_store, plan_of, prepare_sharded, stored_plan

try:
    import ray
except ImportError:  # pragma: no cover - exercised where the extra is absent
    ray = None  # type: ignore[assignment]

__all__ = ["CombineJob", "RepeatsPart", "combine_shard", "run_sharded_repeats"]

# Seconds the driver waits for a combined shard before it looks again.
_POLL = 0.5

# Runs repeat ``i`` (0-based) into ``folder`` on the pipeline: the run's shards, and the
# repeat's shard store (a URI, or "" for the folder's own ``shards/``).
RunOne = Callable[[int, Path, ShardedRun, str], Awaitable[RunResult]]


@dataclass(frozen=True)
class CombineJob:
    """Where the combine step reads and writes (sent once to the cluster)."""

    # OUT's shard store, and each repeat's, in repeat order.
    out: str
    repeats: list[str]
    models: list[str]


def _stamp(marker: str | None) -> str | None:
    """Say which marker of a repeat's shard a combined shard was made from (None: none)."""
    return None if marker is None else hashlib.sha256(marker.encode()).hexdigest()[:16]


def _shard_records(store: ShardStore, index: int, scratch: Path) -> dict[str, dict[str, Any]]:
    """Read a repeat's verdicts of one shard: the last valid record per fact, in order."""
    name = shard_name(index, ".jsonl")
    path = store.local_copy(name, scratch)
    if not path.is_file():
        return {}  # a repeat that stopped before it reached the shard
    return {str(r["fact_id"]): r for _, _, r in scan_verdicts(path)}


def combine_shard(job: CombineJob, index: int) -> dict[str, Any]:
    """Write OUT's shard ``index``, the majority over the repeats; return its marker.

    The marker holds what the driver merges: ``facts``, ``tally``, ``outcomes`` (as a
    checked shard's), ``sources`` (the stamps of the repeats' markers) and ``repeats``
    (``RepeatsPart.state``). A shard already combined from the same repeats' markers is
    not made again.
    """
    stores = [ShardStore(where) for where in job.repeats]
    sources = [_stamp(store.read_text(shard_name(index, ".done"))) for store in stores]
    out = ShardStore(job.out)
    finished = shard_result(out, index)
    if finished is not None and finished.get("sources") == sources:
        return finished
    with tempfile.TemporaryDirectory(prefix="kgcheck-combine-") as scratch:
        by_fact = [_shard_records(store, index, Path(scratch) / str(n))
                   for n, store in enumerate(stores)]
    part = RepeatsPart()
    records = []
    for fid in dict.fromkeys(fid for rep in by_fact for fid in rep):
        copies = [rep[fid] for rep in by_fact if fid in rep]
        stability = fact_stability([str(c.get("label", "NA")) for c in copies])
        part.add(fid, stability)
        records.append(majority_record(copies, stability))
    tally, outcomes = tally_records(records, job.models)
    marker = {"shard": index, "facts": tally.n, "tally": tally.state(),
              "outcomes": outcomes.state(), "sources": sources, "repeats": part.state()}
    if finished is not None:
        out.remove(shard_name(index, ".done"))  # made from other verdicts: no longer true
    with out.shard_file(index) as path:
        write_text_atomic(path, "".join(safe_json.dumps(r) + "\n" for r in records))
        if None not in sources:
            out.finish(index, path, safe_json.dumps(marker) + "\n")
    return marker


class RepeatsPart:
    """A part of the summary's ``repeats`` section: its facts' stability and top flips."""

    def __init__(self) -> None:
        self.stability = StabilityTally()
        self.flipped: list[dict[str, Any]] = []

    def add(self, fact_id: str, stability: dict[str, Any]) -> None:
        """Take one fact's stability (``fact_stability``)."""
        self.stability.add(stability)
        entry = flipped_entry(fact_id, stability)
        if entry is not None:
            self.flipped.append(entry)
            # Cut now and then: a shard may hold many facts that flipped.
            if len(self.flipped) >= 2 * repeat_runs.MAX_LISTED:
                self.flipped = top_flipped(self.flipped)

    def merge(self, other: RepeatsPart) -> None:
        """Take another part's facts: the histogram adds up, the top of both tops is kept."""
        self.stability.merge(other.stability)
        self.flipped = top_flipped([*self.flipped, *other.flipped])

    def state(self) -> dict[str, Any]:
        """Return the part as JSON-plain data (``from_state`` reads it back)."""
        return {"stability": self.stability.state(), "flipped": top_flipped(self.flipped)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RepeatsPart:
        """Rebuild a part from ``state``'s data."""
        part = cls()
        part.stability = StabilityTally.from_state(state["stability"])
        part.flipped = list(state["flipped"])
        return part

    def section(self, per_repeat: list[dict[str, Any]]) -> dict[str, Any]:
        """Return the ``repeats`` section over ``per_repeat``'s scores (one per repeat)."""
        return {**repeats_section(len(per_repeat), self.stability, per_repeat),
                "flipped": top_flipped(self.flipped)}


def _combine_task(job: CombineJob, index: int) -> dict[str, Any]:
    return combine_shard(job, index)


@cache
def _task() -> Any:
    return ray.remote(max_retries=SHARD_RETRIES)(_combine_task)


def _store_of(folder: Path) -> ShardStore:
    """Return the shard store a sharded run folder's plan names (its own ``shards/``)."""
    where = (stored_plan(folder) or {}).get("store")
    return ShardStore(where) if where else local_store(folder)


def _repeat_uri(store: ShardStore, repeat: int) -> str:
    """Return where repeat ``repeat``'s workers write: under OUT's store when it is a URI."""
    return f"{store.where.rstrip('/')}/{REPEATS_DIR}/{repeat + 1}" if store.remote else ""


async def run_sharded_repeats(sharded: ShardedRun, info: RunInfo, out_dir: Path, repeats: int,
                              run_one: RunOne, *, workers: int, shards_uri: str | None,
                              resume: bool, fresh: bool, show_progress: bool = False
                              ) -> RunResult:
    """Run each repeat on the pipeline, then combine them shard by shard into ``out_dir``.

    ``run_one`` runs one repeat into its folder; ``workers`` is the most combined shards in
    flight; ``shards_uri`` is OUT's shard store (the repeats' are under it), None for the
    folder's own; ``show_progress`` shows the combine's shards done (each pass shows its own).
    """
    out_dir = Path(out_dir)
    started = time.perf_counter()
    sharded, store = await asyncio.to_thread(_prepare, sharded, info, out_dir, repeats,
                                             shards_uri, resume=resume, fresh=fresh)
    scores: list[dict[str, Any]] = []
    ran = 0
    aborted = None
    for repeat in range(repeats):
        result = await run_one(repeat, repeat_folder(out_dir, repeat), sharded,
                               _repeat_uri(store, repeat))
        # Only its scores are kept: a repeat's tally is as large as its labelled facts.
        scores.append(score_counts(result.tally.keys) if result.tally is not None
                      else score_summary(result.records))
        ran += int(result.summary.get("ran_this_time") or 0)
        if result.aborted:
            aborted = f"repeat {repeat + 1} of {repeats}: {result.aborted}"
            break
    return await asyncio.to_thread(_combine, sharded, info, out_dir, store, scores,
                                   workers=workers, started=started, ran=ran, aborted=aborted,
                                   show_progress=show_progress)


def _prepare(sharded: ShardedRun, info: RunInfo, out_dir: Path, repeats: int,
             shards_uri: str | None, *, resume: bool, fresh: bool
             ) -> tuple[ShardedRun, ShardStore]:
    """Check or create OUT as a sharded run folder; return the shards and OUT's store."""
    with exclusive(out_dir):
        old = stored_plan(out_dir) if resume else None
        if old is not None and old["shard_bytes"] != sharded.shard_bytes:
            # A resume goes on in the shards the run was cut in, the repeats' too.
            sharded = ShardedRun(sharded.source, survey(sharded.source, old["shard_bytes"],
                                                        cluster_cpus()), old["shard_bytes"])
        info_path = out_dir / RUN_INFO
        try:
            before = safe_json.parse(info_path.read_text(encoding="utf-8")).get("repeats")
        except (OSError, ValueError, AttributeError):
            before = None
        if resume and before is not None and before != repeats:
            raise RunError(f"cannot resume {out_dir}: it ran {before} repeats, not {repeats}; "
                           "start over with {fresh}, or use another {out}",
                           fresh=Arg("fresh", True, out=str(out_dir)), out=Arg("out"))
        where = shards_uri or (old or {}).get("store")
        store = ShardStore(where) if where else local_store(out_dir)
        prepare_sharded(out_dir, info, plan_of(sharded.survey.shards, sharded.shard_bytes, store),
                        store, resume=resume, fresh=fresh)
        stored = safe_json.parse(info_path.read_text(encoding="utf-8"))
        write_run_file(info_path, safe_json.dumps({**stored, "repeats": repeats}, indent=1) + "\n")
    return sharded, store


def _combine(sharded: ShardedRun, info: RunInfo, out_dir: Path, store: ShardStore,
             scores: list[dict[str, Any]], *, workers: int, started: float, ran: int,
             aborted: str | None, show_progress: bool = False) -> RunResult:
    """Combine every shard on the cluster; merge the markers into OUT's summary."""
    job = CombineJob(store.where, [_store_of(repeat_folder(out_dir, n)).where
                                   for n in range(len(scores))], list(info.models))
    tally, outcomes, part = SummaryTally(info.models), RunOutcomes(), RepeatsPart()
    shards = len(sharded.survey.shards)
    with exclusive(out_dir), progress_bar("shards", show=show_progress) as bar:
        shown = bar.add_task(f"combining {len(scores)} repeats", total=shards)
        where, task, cpus = ray.put(job), _task(), share_of_cpus(workers)
        waiting = list(reversed(range(shards)))
        flying: set[Any] = set()
        while waiting or flying:
            while waiting and len(flying) < workers:
                flying.add(task.options(num_cpus=cpus, scheduling_strategy="SPREAD").remote(
                    where, waiting.pop()))
            ready, _ = ray.wait(list(flying), num_returns=1, timeout=_POLL)
            for ref in ready:
                flying.discard(ref)
                # Merged as it comes: the driver keeps no shard's marker.
                marker = task_result(ref, "a Ray task combining the repeats")
                tally.merge(SummaryTally.from_state(info.models, marker["tally"]))
                outcomes.merge(RunOutcomes.from_state(marker["outcomes"]))
                part.merge(RepeatsPart.from_state(marker["repeats"]))
                bar.advance(shown)
        summary = summary_of(tally, info, seconds=time.perf_counter() - started, ran=ran)
        summary["asked"] = sharded.survey.facts
        summary["repeats"] = part.section(scores)
        if aborted:
            summary["aborted"] = aborted
        summary = redact_value(summary)
        write_run_file(out_dir / SUMMARY, safe_json.dumps(summary, indent=1) + "\n")
    return RunResult(out_dir, VerdictsView(out_dir), summary, summary.get("aborted"), outcomes,
                     tally)
