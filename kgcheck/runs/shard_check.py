"""Check one shard of a sharded run, where it runs: its facts, its verdict file, its marker.

A worker given a shard (``check_shard``) reads the shard from the input file, runs the
run's graph on its facts a few at once (``concurrency`` per worker; the local runner's own
loop, ``runner.CheckLoop``), appends each verdict to the shard's file ``NNNNN.jsonl`` as
it comes and, once every fact has its verdict, writes ``NNNNN.done`` atomically: the
shard's summary tally and outcomes, which the driver merges without reading a verdict.
A consensus run's marker carries the shard's consensus tally too; in the second phase of a
measured judge each fact starts from the votes the first phase recorded in the same shard.
Both go to the run's shard store (``kgcheck.data.shard_store``): ``RUN/shards/``, or a
URI. A shard whose file is there already is resumed fact by fact: its file is first
rewritten with one kept verdict per fact (a torn last line, a failed check or a repeat are
dropped, as a resume of a local run drops them), then only the facts without one are
checked. So a worker that died, a driver that died, or a shard run twice leaves one
verdict per fact.

The worker stops early, without a marker, when the run's stop rule says so (the model
cannot be reached, a setting is wrong) or when the driver leaves ``.stop`` in the store.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from kgcheck import event_loop
from kgcheck.data import safe_json
from kgcheck.data.facts import Fact
from kgcheck.data.runfolder import scan_verdicts, shard_name
from kgcheck.data.shard_store import ShardStore
from kgcheck.data.shard_survey import NamesPart, ShardSource, shard_drops, shard_facts
from kgcheck.data.shards import Shard
from kgcheck.data.verdict_index import VerdictIndex
from kgcheck.graphs.registry import AnyCompiledGraph, GraphKey, compile_graph
from kgcheck.providers.cache import AnswerCache, serving
from kgcheck.runs.concurrency import parse_concurrency
from kgcheck.runs.consensus_tally import ConsensusTally
from kgcheck.runs.outcomes import RunOutcomes
from kgcheck.runs.prefilter import is_prefiltered, prefiltered
from kgcheck.runs.runner import (
    CheckLoop,
    StopRule,
    SummaryTally,
    fewer_collections,
    kept_verdict,
    tally_records,
)

__all__ = ["STOP", "ShardJob", "check_shard", "merged", "recorded_votes", "shard_result",
           "tally_file"]

# Left by the driver when the run must stop: workers take no further fact.
STOP = ".stop"
# Seconds between a worker's progress reports.
_REPORT_EVERY = 1.0
# Seconds between a worker's looks for the driver's stop file in a remote store (a request
# each); a local store is looked at before every fact.
_STOP_LOOK_EVERY = 1.0

_GRAPHS: dict[GraphKey, AnyCompiledGraph] = {}


@dataclass(frozen=True)
class ShardJob:
    """What every shard of one run is checked with (sent once to the cluster)."""

    shards: str
    run_id: str
    method: str
    models: list[str]
    key: GraphKey
    context: Any
    config: RunnableConfig
    concurrency: int | str = 4
    max_concurrency: int = 64
    cache: str | None = None
    stop_after: int | None = None
    # The rules facts are checked against before the graph (``--prefilter schema``).
    prefilter: Any = None
    # A consensus run's members: markers then carry the shard's consensus tally too, and the
    # summary its figures (with ``summary_extra``: the judge it used).
    consensus: tuple[str, ...] = ()
    summary_extra: Mapping[str, Any] = field(default_factory=dict)
    # The shard store of a consensus run's first phase: each fact starts from the votes
    # recorded there for it in the same shard (``pipeline_consensus``).
    votes_from: str = ""


def _graph(key: GraphKey) -> AnyCompiledGraph:
    """Compile a graph once per worker process."""
    graph = _GRAPHS.get(key)
    if graph is None:
        graph = _GRAPHS[key] = compile_graph(key)
    return graph


def shard_result(store: ShardStore, index: int) -> dict[str, Any] | None:
    """Read a finished shard's marker (None: not finished, or a torn or foreign file)."""
    text = store.read_text(shard_name(index, ".done"))
    try:
        found = safe_json.parse(text) if text is not None else None
    except json.JSONDecodeError:
        return None
    return found if isinstance(found, dict) and found.get("shard") == index else None


def check_shard(job: ShardJob, source: ShardSource, shard: Shard, index: int,
                drops: Sequence[Any], names: NamesPart | None,
                progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Check every fact of one shard that has no verdict yet; return the shard's result.

    ``drops`` are the repeats' places (``find_repeats`` outputs), ``names`` the merged
    names; ``progress`` hears now and then how many more facts were checked. The result is
    the marker's content (``facts``, ``ran``, ``tally``, ``outcomes``, ``cache``), or, when
    the shard stopped early, that of its verdicts so far with ``stopped`` (the reason).

    Raises:
        TriplesError: a malformed line in the shard (the file changed since the survey).

    """
    finished = shard_result(ShardStore(job.shards), index)
    if finished is not None:
        return finished  # a retry of a shard that finished: nothing to do
    with fewer_collections():  # a shard's facts allocate as a local run's do
        return event_loop.run(_check(job, source, shard, index, shard_drops(drops, index),
                                     names, progress))


async def _check(job: ShardJob, source: ShardSource, shard: Shard, index: int,
                 drops: set[int], names: NamesPart | None,
                 progress: Callable[[int], None] | None) -> dict[str, Any]:
    store = ShardStore(job.shards)
    # Held for this worker alone: a worker of a driver that died may still be finishing it.
    with store.shard_file(index) as path:
        finished = shard_result(store, index)
        if finished is not None:
            return finished  # finished by a worker that held the shard before this one
        return await _check_held(job, store, path, source, shard, index, drops, names,
                                 progress)


async def _check_held(job: ShardJob, store: ShardStore, path: Path, source: ShardSource,
                      shard: Shard, index: int, drops: set[int], names: NamesPart | None,
                      progress: Callable[[int], None] | None) -> dict[str, Any]:
    resumed = None
    if path.exists() and path.stat().st_size:
        # One kept verdict per fact, in place, before any is appended.
        resumed = VerdictIndex.build(path, kept_verdict, None, path.with_suffix(".index"))
        resumed.rewrite()
    cache = AnswerCache(job.cache) if job.cache else None
    checks = _ShardRun(job, store, path, resumed, cache, progress, recorded_votes(job, index))
    try:
        await checks.run(shard_facts(source, shard, drops, names))
    finally:
        if resumed is not None:
            resumed.close()
        if cache is not None:
            cache.close()
    result = tally_file(job, path, index)
    result["ran"] = checks.ran
    if cache is not None:
        result["cache"] = {"hits": cache.hits, "misses": cache.misses}
    if checks.stopped:
        return {**result, "stopped": checks.stopped}
    store.finish(index, path, safe_json.dumps(result) + "\n")
    return result


def tally_file(job: ShardJob, path: Path, index: int) -> dict[str, Any]:
    """Count the shard's verdicts (its file, as it now is): figures and outcomes."""
    refuted = 0
    votes = ConsensusTally() if job.consensus else None

    def records() -> Iterator[dict[str, Any]]:
        nonlocal refuted
        for _, _, record in scan_verdicts(path):
            refuted += is_prefiltered(record)
            yield record

    tally, outcomes = tally_records(records(), job.models,
                                    None if votes is None else votes.add)
    found = {"shard": index, "facts": tally.n, "tally": tally.state(),
             "outcomes": outcomes.state()}
    if votes is not None:
        found["consensus"] = votes.state()
    return {**found, "prefiltered": refuted} if job.prefilter is not None else found


class _ShardRun:
    """The facts of one shard checked by the runner's loop, with the stop file and progress."""

    def __init__(self, job: ShardJob, store: ShardStore, path: Path,
                 resumed: VerdictIndex | None, cache: AnswerCache | None,
                 progress: Callable[[int], None] | None,
                 votes: Mapping[str, Any] | None = None) -> None:
        self.job = job
        self.votes = votes or {}
        self.store = store
        self.cache = cache
        self.progress = progress
        self.graph = _graph(job.key)
        limit = parse_concurrency(job.concurrency, job.max_concurrency)
        check = (self._invoke if job.prefilter is None
                 else prefiltered(self._invoke, job.prefilter, job.method))
        self.loop = CheckLoop(check, method=job.method, model=",".join(job.models),
                              run_id=job.run_id, path=path, limit=limit,
                              workers=limit.maximum,
                              stop_rule=StopRule(job.stop_after or max(5, 2 * limit.maximum)),
                              kept=resumed, on_record=self._seen, halted=self._stop_asked)
        self._looked = -_STOP_LOOK_EVERY
        self._reported = 0
        self._at = time.monotonic()

    @property
    def ran(self) -> int:
        """Facts checked by this worker."""
        return self.loop.ran

    @property
    def stopped(self) -> dict[str, str] | None:
        """Why the shard stopped early (None: it did not)."""
        stop = self.loop.stopped
        return None if stop is None else {"reason": stop.reason, "message": stop.message}

    async def run(self, facts: Iterator[Fact]) -> None:
        """Check the facts without a kept verdict, appending each verdict to the file.

        Raises:
            TriplesError: a malformed line in the shard.

        """
        await self.loop.run(facts)
        self._report(final=True)
        if self.loop.read_failed is not None:
            raise self.loop.read_failed

    def _stop_asked(self) -> bool:
        """Tell whether the driver left its stop file (a remote store: now and then)."""
        now = time.monotonic()
        if self.store.remote and now - self._looked < _STOP_LOOK_EVERY:
            return False
        self._looked = now
        return self.store.exists(STOP)

    async def _invoke(self, fact: Fact) -> dict[str, Any]:
        state: dict[str, Any] = {"fact": fact.as_input()}
        if fact.id in self.votes:
            # The members' votes of the first phase: only a tie reaches the judge.
            state["votes"] = self.votes[fact.id]
        with serving(self.cache):
            out: dict[str, Any] = await self.graph.ainvoke(
                state, context=self.job.context, config=self.job.config)
            return out

    def _seen(self, record: dict[str, Any], failed_parts: int) -> None:
        self._report()

    def _report(self, final: bool = False) -> None:
        now = time.monotonic()
        if self.progress and (final or now - self._at >= _REPORT_EVERY):
            self.progress(self.ran - self._reported)
            self._reported, self._at = self.ran, now


def recorded_votes(job: ShardJob, index: int) -> dict[str, Any]:
    """Return the votes the first phase recorded in shard ``index``, by fact id (or none)."""
    if not job.votes_from:
        return {}
    store = ShardStore(job.votes_from)
    with tempfile.TemporaryDirectory(prefix="kgcheck-votes-") as scratch:
        path = store.local_copy(shard_name(index, ".jsonl"), Path(scratch))
        if not path.exists():
            return {}
        return {str(r["fact_id"]): r["details"]["votes"] for _, _, r in scan_verdicts(path)
                if (r.get("details") or {}).get("votes")}


def merged(results: Sequence[Mapping[str, Any]], models: Sequence[str]
           ) -> tuple[SummaryTally, RunOutcomes]:
    """Merge the shards' results (markers) into the run's tally and outcomes."""
    tally = SummaryTally(models)
    outcomes = RunOutcomes()
    for result in results:
        tally.merge(SummaryTally.from_state(models, result["tally"]))
        outcomes.merge(RunOutcomes.from_state(result["outcomes"]))
    return tally, outcomes
