"""A whole file checked on a Ray cluster with no per-fact work in the driver.

``kgcheck run --engine ray`` over every fact of an N-Triples, N-Quads or JSON Lines file
runs as a pipeline of Ray tasks. The driver plans the shards (byte ranges cut at line
ends, ``shards.plan_shards``) and starts the survey (``survey``): one task per shard, then
one task merging the names the shards' naming triples give, and one task per partition of
the fact ids finding the facts that repeat an earlier one; the driver receives a few
numbers per shard (counts, a digest, the predicate filter's matches) and keeps references
to the rest in Ray's object store. Then (``run``) one task per shard reads its shard, runs
the graph on its facts and writes its verdict file and done marker into the run's shard
store, the run folder's ``shards/`` or a URI (``kgcheck.runs.shard_check``); at most
``workers`` shards are in flight, each using a share of the cluster's CPUs so that they
spread over its nodes. The driver tracks which
shards finished, merges their summary tallies into ``summary.json`` and shows progress
from a counter the workers add to. Its memory depends on the number of shards, not facts.

The workers must reach the input file at the same path (one machine, a shared file system,
or a copy on every node), or read it from a URL (``--triples s3://bucket/kg.nt``: the driver
cuts it by seeking, one task per shard counts its lines, and every task reads only its byte
range; ``kgcheck.data.input_uri``), and the shard store (the run folder at the same path, or the URI
given with ``--shards-uri``), import kgcheck, and reach their model server: a model's server
comes from its settings (``--base-url``) or, when none is set, from the environment of
each node (``OLLAMA_HOST``, ``OPENAI_BASE_URL``), so the nodes of a cluster may each use
their own server. A worker that dies has its shard run again (Ray retries the task), which
resumes from the verdicts the shard's file holds; a driver that dies leaves the finished
shards and the partial ones, and ``--resume`` checks only the facts without a verdict.
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from rich.progress import (
    Progress,
)

from kgcheck.arguments import Arg, literal
from kgcheck.data import safe_json
from kgcheck.data.input_uri import is_input_uri
from kgcheck.data.runfolder import SHARDS, SUMMARY, RunError, VerdictsView, exclusive, shard_name
from kgcheck.data.shard_store import ShardStore
from kgcheck.data.shard_survey import (
    ShardSource,
    Survey,
    combine_digests,
    find_repeats,
    merge_names,
    repeated_ids,
    survey_shard,
)
from kgcheck.data.shards import Shard, plan_shards, seek_shards
from kgcheck.data.shards import shard_bytes as read_shard_bytes
from kgcheck.data.sources import TriplesError
from kgcheck.providers.secrets import redact_value
from kgcheck.runs.consensus_tally import merged_consensus
from kgcheck.runs.prefilter import prefilter_figures
from kgcheck.runs.runner import RunInfo, RunResult, progress_bar, summary_of, write_run_file
from kgcheck.runs.shard_check import STOP, ShardJob, check_shard, merged, tally_file
from kgcheck.runs.sharded_folder import local_store, plan_of, prepare_sharded, stored_plan

try:
    import ray
    from ray.exceptions import RayError
except ImportError:  # pragma: no cover - exercised where the extra is absent
    ray = None  # type: ignore[assignment]
    RayError = RuntimeError  # type: ignore[misc,assignment]

__all__ = ["SHARD_RETRIES", "ShardedRun", "cluster_cpus", "run", "share_of_cpus", "survey",
           "task_result"]

# Seconds the driver waits for a shard to finish before it looks at the progress counter.
_POLL = 0.5
# Tries of a shard whose worker died (Ray runs the task again; it resumes from its file).
SHARD_RETRIES = 4


class ShardedRun:
    """A plan's sharded input: where its facts are, and what the survey found."""

    def __init__(self, source: ShardSource, survey: Survey, shard_bytes: int) -> None:
        self.source = source
        self.survey = survey
        self.shard_bytes = shard_bytes


def _survey(source: ShardSource, shard: Shard, index: int, partitions: int) -> tuple[Any, ...]:
    found, names, parts = survey_shard(source, shard, index, partitions)
    return (found, names, *parts)


def _lines(source: ShardSource, shard: Shard) -> int:
    return read_shard_bytes(shard, source.stamp).count(b"\n")


def _names(parts: list[Any]) -> Any:
    # The shards' names arrive one at a time, so that this task holds the merged ones only.
    return merge_names(ray.get(ref) for ref in parts)


def _repeats(*parts: Any) -> tuple[Any, Any]:
    return find_repeats(parts)


def _check(job: ShardJob, source: ShardSource, shard: Shard, index: int, names: Any,
           counter: Any, *drops: Any) -> dict[str, Any]:
    progress = None if counter is None else (lambda n: counter.add.remote(n))
    return check_shard(job, source, shard, index, drops, names, progress)


class _Counter:
    """Facts checked so far, added to by the workers and read by the driver."""

    def __init__(self) -> None:
        self.count = 0

    def add(self, n: int) -> None:
        self.count += n

    def total(self) -> int:
        return self.count


@cache
def _tasks() -> dict[str, Any]:
    """Return the pipeline's Ray tasks (made once, after Ray is imported)."""
    return {"survey": ray.remote(num_cpus=1, max_retries=3)(_survey),
            "lines": ray.remote(num_cpus=1, max_retries=3)(_lines),
            "names": ray.remote(num_cpus=1, max_retries=3)(_names),
            "repeats": ray.remote(num_cpus=1, max_retries=3, num_returns=2)(_repeats),
            "check": ray.remote(max_retries=SHARD_RETRIES)(_check),
            "counter": ray.remote(num_cpus=0)(_Counter)}


def task_result(refs: Any, what: str = "a Ray task of the sharded run") -> Any:
    """``ray.get``, with an input error raised as itself (it names the file and line).

    Any other failure becomes one RunError line: ``what`` failed, and its cause.
    """
    try:
        return ray.get(refs)
    except RayError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, TriplesError):
            raise TriplesError(str(cause)) from None
        if isinstance(cause, RunError):
            raise cause from None
        # One line: the cause, not the remote traceback Ray's message carries.
        said = (f"{type(cause).__name__}: {cause}" if cause is not None
                else str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        raise RunError(f"{what} failed: {literal(said)}") from None


def survey(source: ShardSource, shard_bytes: int, cpus: int) -> Survey:
    """Survey a file on the cluster (see the module docstring); the driver gets small results.

    Raises:
        TriplesError: a malformed line in any shard, or a repeated JSON Lines id.

    """
    tasks = _tasks()
    where = ray.put(source)
    if is_input_uri(source.path):
        # Cut by seeking; each shard's lines counted by a task reading its byte range.
        shards = seek_shards(source.path, source.dataset, shard_bytes,
                             lambda unnumbered: task_result(
                                 [tasks["lines"].remote(where, shard) for shard in unnumbered]))
    else:
        shards = plan_shards(source.path, source.dataset, shard_bytes)
    partitions = max(1, min(len(shards), cpus))
    outs = [tasks["survey"].options(num_returns=2 + partitions).remote(where, shard, n,
                                                                       partitions)
            for n, shard in enumerate(shards)]
    names = tasks["names"].remote([out[1] for out in outs]) if source.rdf else None
    settled = [tasks["repeats"].remote(*[out[2 + j] for out in outs])
               for j in range(partitions)] if shards else []
    found = task_result([out[0] for out in outs])
    repeats = task_result([pair[1] for pair in settled])
    del outs  # the id partitions are the repeat tasks' now: let the object store free them
    if not source.rdf:
        firsts = sorted(r.first for r in repeats if r.first)
        if firsts:
            raise repeated_ids(source, shards, [s.parsed for s in found], firsts[0])
    matched = [sum(column) for column in zip(*(s.matched for s in found), strict=True)] \
        if found and source.predicates is not None else []
    return Survey(shards=shards, facts=sum(s.kept for s in found) - sum(r.repeats
                                                                       for r in repeats),
                  repeats=sum(r.repeats for r in repeats),
                  digest=combine_digests((s.digest, s.kept) for s in found),
                  labelled=any(s.labelled for s in found), seen=sum(s.parsed for s in found),
                  matched=matched, names=names, drops=[pair[0] for pair in settled])


def _progress(show: bool, total: int) -> Progress:
    return progress_bar("{task.fields[rate]:.1f}/s", "shards {task.fields[shards]}", show=show)


def run(sharded: ShardedRun, info: RunInfo, out_dir: Path, job: ShardJob, *, workers: int,
        cpus: float, resume: bool, fresh: bool, show_progress: bool
        ) -> tuple[RunResult, dict[str, int]]:
    """Check every shard into the run folder; return the result and the answer cache's counts.

    ``job`` says how each fact is checked (its ``shards``: the store's URI, or empty for
    the run folder's own ``shards/``; a resume keeps the store its plan names);
    ``workers`` is the most shards in flight, each asking the cluster for ``cpus`` CPUs.
    """
    with exclusive(out_dir):
        old = stored_plan(out_dir) if resume else None
        if old is not None and old["shard_bytes"] != sharded.shard_bytes:
            # A resume goes on in the shards the run was cut in, whatever size is asked now.
            sharded = ShardedRun(sharded.source, survey(sharded.source, old["shard_bytes"],
                                                        max(1, int(cpus * workers))),
                                 old["shard_bytes"])
        shards = sharded.survey.shards
        where = job.shards or (old or {}).get("store")
        store = ShardStore(where) if where else local_store(out_dir)
        pending, done = prepare_sharded(out_dir, info,
                                        plan_of(shards, sharded.shard_bytes, store), store,
                                        resume=resume, fresh=fresh)
        job = replace(job, run_id=info.run_id, shards=store.where)
        driver = _Driver(sharded, info, out_dir, store, job, workers, cpus, show_progress)
        return driver.go(pending, done), driver.cache


class _Driver:
    """Keep up to ``workers`` shards in flight; merge what they hand back."""

    def __init__(self, sharded: ShardedRun, info: RunInfo, out_dir: Path, store: ShardStore,
                 job: ShardJob, workers: int, cpus: float, show_progress: bool) -> None:
        self.sharded = sharded
        self.info = info
        self.out_dir = out_dir
        self.store = store
        self.job = job
        self.workers = workers
        self.cpus = cpus
        self.show = show_progress
        self.results: list[dict[str, Any]] = []
        self.aborted: dict[str, str] | None = None
        self.failed: Exception | None = None
        self.cache = {"hits": 0, "misses": 0}
        # Facts checked by this invocation (a finished shard's marker counts its own run's).
        self.ran = 0

    def go(self, pending: list[int], done: list[dict[str, Any]]) -> RunResult:
        tasks = _tasks()
        source = self.sharded.source
        shards = self.sharded.survey.shards
        job, where = ray.put(self.job), ray.put(source)
        counter = tasks["counter"].remote() if self.show else None
        self.results = list(done)
        before = sum(r["facts"] for r in done)
        started = time.perf_counter()
        waiting = list(reversed(pending))
        flying: dict[Any, int] = {}
        total = self.sharded.survey.facts
        with _progress(self.show, total) as bar:
            task = bar.add_task(f"{self.info.method} {self.info.dataset}", total=total,
                                completed=before, rate=0.0, shards=f"{len(done)}/{len(shards)}")
            while waiting or flying:
                while waiting and len(flying) < self.workers and not self._stopping():
                    index = waiting.pop()
                    ref = tasks["check"].options(
                        num_cpus=self.cpus, scheduling_strategy="SPREAD").remote(
                        job, where, shards[index], index, self.sharded.survey.names, counter,
                        *self.sharded.survey.drops)
                    flying[ref] = index
                if self._stopping():
                    waiting.clear()
                ready, _ = ray.wait(list(flying), num_returns=1, timeout=_POLL)
                for ref in ready:
                    self._take(ref, flying.pop(ref))
                if self.show:
                    ran = ray.get(counter.total.remote()) if counter is not None else 0
                    elapsed = time.perf_counter() - started
                    bar.update(task, completed=before + ran, rate=ran / max(elapsed, 1e-9),
                               shards=f"{sum(1 for r in self.results if 'stopped' not in r)}"
                               f"/{len(shards)}")
        seconds = time.perf_counter() - started
        if self._stopping():
            # Shards left partial by an earlier run, not reached this time: still counted.
            reached = {r["shard"] for r in self.results}
            held = self.store.names()
            self.results += [
                tally_file(self.job, self.store.local_copy(name, self.out_dir / SHARDS), i)
                for i in pending
                if i not in reached and (name := shard_name(i, ".jsonl")) in held]
        return self._finish(seconds)

    def _stopping(self) -> bool:
        return self.aborted is not None or self.failed is not None

    def _take(self, ref: Any, index: int) -> None:
        try:
            result = task_result(ref)
        except (TriplesError, RunError) as exc:
            self.failed = self.failed or exc
            self._stop_all()
            return
        self.results.append(result)
        self.ran += int(result.get("ran") or 0)
        for key in self.cache:
            self.cache[key] += (result.get("cache") or {}).get(key, 0)
        if result.get("stopped") and self.aborted is None and result["stopped"]["reason"] \
                != "stopped":
            self.aborted = result["stopped"]
            self._stop_all()

    def _stop_all(self) -> None:
        self.store.write_text(STOP, "stop\n")

    def _finish(self, seconds: float) -> RunResult:
        tally, outcomes = merged(self.results, self.info.models)
        ran = self.ran
        records = VerdictsView(self.out_dir)
        if self.failed is not None:
            fix = "fix the input, then " if isinstance(self.failed, TriplesError) else ""
            raise RunError(f"{literal(str(self.failed))}; the {tally.n} verdicts written so far "
                           f"are kept: {fix}continue with {{resume}}",
                           resume=Arg("resume", True, out=str(self.out_dir)))
        summary = summary_of(tally, self.info, seconds=seconds, ran=ran)
        summary["asked"] = self.sharded.survey.facts
        if self.job.consensus:
            summary.update(merged_consensus(self.results).summary(self.job.consensus,
                                                                  **self.job.summary_extra))
        if self.job.prefilter is not None:
            summary.update(prefilter_figures(
                self.sharded.survey.facts, sum(r.get("prefiltered", 0) for r in self.results)))
        if self.aborted is not None:
            summary["aborted_because"] = self.aborted["reason"]
            summary["aborted"] = self.aborted["message"]
        summary = redact_value(summary)
        write_run_file(self.out_dir / SUMMARY, safe_json.dumps(summary, indent=1) + "\n")
        return RunResult(self.out_dir, records, summary, summary.get("aborted"), outcomes, tally)


def cluster_cpus() -> int:
    """Return the CPUs of the cluster Ray is connected to."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def share_of_cpus(workers: int) -> float:
    """Return the CPUs each of ``workers`` shard tasks asks for: all of them fit at once."""
    return max(0.01, min(1.0, round(cluster_cpus() / max(1, workers), 2)))

