"""The Ray engine: a run's graphs execute on the workers of a Ray cluster.

The driver (``kgcheck run --engine ray``) stays what it is locally: it picks the facts,
writes every verdict to the run folder the moment it comes back and keeps the run
resumable. Each worker is a Ray actor holding the compiled graphs, running up to
``per_worker`` facts at once on its own event loop (an async actor), with the answer cache
when the run has one. A worker that dies is restarted and its facts are retried by Ray
(``max_restarts``, ``max_task_retries``); a driver that dies leaves the verdicts written so
far, and ``--resume`` runs the rest.

A large input file (N-Triples, N-Quads, JSON Lines) is read in parallel shards too: the
driver cuts it at line ends and the cluster parses the shards, a few per CPU at once,
handing the facts back in file order (``map_shards``; see ``kgcheck.data.shards``).

A run over every fact of such a file goes further (``survey`` and ``run_sharded``; see
``kgcheck.runs.ray_pipeline``): the workers read their shards, check their facts and write
verdict shards into the run folder, and the driver only plans, tracks the shards and merges
their summaries. The actors are then not started at all: they are made on first use.

``address`` is an existing cluster (``ray://host:10001`` or ``host:6379``); without one a
local cluster is started for the run and stopped after it. The workers must be able to
import kgcheck (and any plugin strategy), as the driver does: on a real cluster install the
same kgcheck on every node, or pass a ``runtime_env``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from kgcheck.data.runfolder import RunError
from kgcheck.data.shard_survey import ShardSource
from kgcheck.data.shards import (
    DEFAULT_SHARD_BYTES,
    ParallelRead,
    Shard,
    ShardFacts,
    read_shard,
)
from kgcheck.data.sources import TriplesError
from kgcheck.graphs.registry import AnyCompiledGraph, GraphKey, compile_graph
from kgcheck.providers.cache import AnswerCache, serving
from kgcheck.runs import ray_pipeline
from kgcheck.runs.ray_cluster import LocalCluster
from kgcheck.runs.ray_pipeline import ShardedRun, cluster_cpus, share_of_cpus
from kgcheck.runs.runner import RunInfo, RunResult
from kgcheck.runs.shard_check import ShardJob

__all__ = ["GraphWorker", "INSTALL_HINT", "RayEngine", "RayEngineError", "check_reachable"]

try:
    import ray
    from ray.exceptions import RayError
except ImportError:  # pragma: no cover - exercised where the extra is absent
    ray = None  # type: ignore[assignment]
    RayError = RuntimeError  # type: ignore[misc,assignment]

INSTALL_HINT = "the Ray engine needs Ray: pip install 'kgcheck[ray]'"


class RayEngineError(RunError):
    """Ray is missing, or the cluster cannot be reached or used."""


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast when nothing answers at a cluster address (``ray.init`` would wait long)."""
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise RayEngineError(f"Ray address {address!r} is not host:port or ray://host:port")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise RayEngineError(f"no Ray cluster answers at {address} ({exc}); start one with "
                             "`ray start --head` or pass its address") from None


@cache
def _shard_task() -> Any:
    """Return ``read_shard`` as a Ray task (made once, after Ray is imported)."""
    return ray.remote(num_cpus=1, max_retries=3)(read_shard)


class GraphWorker:
    """One worker: compiled graphs, the answer cache, and facts run on its event loop."""

    def __init__(self, cache_path: str | None) -> None:
        self._graphs: dict[GraphKey, AnyCompiledGraph] = {}
        self._cache = AnswerCache(cache_path) if cache_path else None

    async def invoke(self, key: GraphKey, state: Mapping[str, Any], context: Any,
                     config: RunnableConfig) -> dict[str, Any]:
        """Run the graph named ``key`` on one input."""
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = compile_graph(key)
        with serving(self._cache):
            return await graph.ainvoke(dict(state), context=context, config=config)

    def stats(self) -> dict[str, Any]:
        """Return this worker's process id and cache counts."""
        return {"pid": os.getpid(), "cache": self._cache.stats() if self._cache else None}


class RayEngine:
    """Run graphs on Ray actors; see the module docstring.

    Args:
        address: A running cluster's address; None starts a local one for the run.
        workers: How many worker actors (default: the cluster's CPUs, at most 8).
        per_worker: Facts one worker runs at once.
        cache: The answer-cache file the workers use (None: no cache).
        num_cpus: CPUs a local cluster may use (None: all).
        shard_bytes: The size of the shards a large input file is read in.

    """

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None,
                 per_worker: int = 8, cache: str | Path | None = None,
                 num_cpus: int | None = None, shard_bytes: int = DEFAULT_SHARD_BYTES) -> None:
        if ray is None:
            raise RayEngineError(INSTALL_HINT)
        if shard_bytes < 1:
            raise RayEngineError(f"shard_bytes must be at least 1, got {shard_bytes}")
        self.shard_bytes = shard_bytes
        self._started = not ray.is_initialized()
        self._local: LocalCluster | None = None
        if self._started:
            if address and address != "auto":
                check_reachable(address)
            try:
                if not address:
                    # Our own cluster, in its own session with a watchdog on this process:
                    # a kill -9 of the driver leaves no Ray process behind.
                    self._local = LocalCluster.start(num_cpus)
                ray.init(address=self._local.address if self._local else address,
                         log_to_driver=False, configure_logging=False,
                         ignore_reinit_error=True)
            except (ConnectionError, RayError, ValueError, RuntimeError) as exc:
                if self._local is not None:
                    self._local.stop()
                where = address or "a local cluster"
                raise RayEngineError(f"cannot start or reach the Ray cluster at {where}: "
                                     f"{exc}") from None
        count = workers or max(1, min(8, cluster_cpus()))
        self.per_worker = per_worker
        self.cache = str(cache) if cache else None
        self._count = count
        # Actor handles: their methods gain ``.remote`` at run time, which typing cannot see.
        self._workers: list[Any] = []
        self._next = itertools.cycle(range(count))
        self._load = [0] * count
        self._sharded: dict[str, Any] | None = None

    @property
    def workers(self) -> int:
        """How many workers the engine drives (actors, or shards in flight)."""
        return self._count

    def _actors(self) -> list[Any]:
        """Start the worker actors on first use (a sharded run needs none)."""
        if not self._workers:
            actor = ray.remote(max_restarts=3, max_task_retries=3, num_cpus=0)(GraphWorker)
            self._workers = [actor.options(max_concurrency=self.per_worker).remote(self.cache)
                             for _ in range(self._count)]
        return self._workers

    async def invoke(self, key: GraphKey, state: Mapping[str, Any], context: Any,
                     config: RunnableConfig) -> dict[str, Any]:
        """Send one input to the least busy worker and wait for its output."""
        actors = self._actors()
        index = min(range(len(actors)), key=lambda i: (self._load[i], next(self._next)))
        self._load[index] += 1
        try:
            ref = actors[index].invoke.remote(key, dict(state), context, config)
            result: dict[str, Any] = await ref
            return result
        finally:
            self._load[index] -= 1

    @property
    def parallel_read(self) -> ParallelRead:
        """Read input files in shards parsed on the cluster, or survey them for a run."""
        return ParallelRead(self.map_shards, self.shard_bytes, survey=self.survey)

    def survey(self, source: ShardSource) -> ShardedRun:
        """Survey a whole file on the cluster for a sharded run (``ray_pipeline.survey``)."""
        return ShardedRun(source, ray_pipeline.survey(source, self.shard_bytes,
                                                      cluster_cpus()), self.shard_bytes)

    async def run_sharded(self, sharded: ShardedRun, info: RunInfo, out_dir: Path,
                          job: ShardJob, *, resume: bool, fresh: bool,
                          show_progress: bool) -> RunResult:
        """Check a surveyed file shard by shard on the cluster (``ray_pipeline.run``)."""
        cpus = share_of_cpus(self._count)
        result, counts = await asyncio.to_thread(
            ray_pipeline.run, sharded, info, out_dir, replace(job, cache=self.cache),
            workers=self._count, cpus=cpus, resume=resume, fresh=fresh,
            show_progress=show_progress)
        # Summed over the passes this engine ran: a run of repeats or a two-pass consensus
        # is several passes, and its summary counts the cache over all of them.
        before = (self._sharded or {}).get("cache") or {}
        self._sharded = {"workers": self._count, "per_worker": job.concurrency,
                         "cpus_per_worker": cpus,
                         "cache": {k: before.get(k, 0) + n for k, n in counts.items()}}
        return result

    def map_shards(self, shards: Iterable[tuple[Shard, bytes]]) -> Iterator[ShardFacts]:
        """Parse shards on the cluster, two per CPU at once; yield them in file order.

        Each shard's bytes go with its task (through the object store), so the workers need
        not see the file; a shard's malformed line is raised here as the ``TriplesError``
        that names the file and line.
        """
        task = _shard_task()
        window = 2 * max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending: deque[Any] = deque()
        for shard, data in shards:
            pending.append(task.remote(shard, data))
            if len(pending) >= window:
                yield _shard_result(pending.popleft())
        while pending:
            yield _shard_result(pending.popleft())

    def pids(self) -> list[int]:
        """Return the workers' process ids (tests kill one to show a restart)."""
        return [s["pid"] for s in ray.get([w.stats.remote() for w in self._actors()])]

    def stats(self) -> dict[str, Any]:
        """Return the workers' count and their cache counts, summed since the engine began."""
        if self._sharded is not None:
            sharded = {k: v for k, v in self._sharded.items() if k != "cache"}
            found = {"name": self.name, "pipeline": "shards", **sharded}
            if self._sharded.get("cache") and any(self._sharded["cache"].values()):
                found["cache"] = self._sharded["cache"]
            return found
        try:
            per = ray.get([w.stats.remote() for w in self._workers], timeout=30)
        except RayError:
            per = []
        caches = [s["cache"] for s in per if s.get("cache")]
        out: dict[str, Any] = {"name": self.name, "workers": self._count,
                               "per_worker": self.per_worker}
        if caches:
            out["cache"] = {"hits": sum(c["hits"] for c in caches),
                            "misses": sum(c["misses"] for c in caches)}
        return out

    def close(self) -> None:
        """Stop the workers, and the local cluster if this engine started it."""
        for worker in self._workers:
            ray.kill(worker)
        self._workers = []
        if self._started:
            ray.shutdown()
        if self._local is not None:
            self._local.stop()
            self._local = None


def _shard_result(ref: Any) -> ShardFacts:
    try:
        result: ShardFacts = ray.get(ref)
    except RayError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, TriplesError):
            raise TriplesError(str(cause)) from None
        raise RayEngineError(f"a Ray worker failed to read an input shard: {exc}") from None
    return result
