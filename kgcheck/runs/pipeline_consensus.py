"""Multi-model consensus over a whole file on the Ray pipeline: every phase on the workers.

``kgcheck run --consensus A,B,C --engine ray`` over every fact of a file that can be cut
runs each phase of ``consensus.run_consensus`` as one pass of the sharded pipeline
(``ray_pipeline.run``): the workers run the consensus graph on their shards' facts and
leave in each shard's marker its consensus tally (``consensus_tally.ConsensusTally``)
beside the summary's, and the driver merges them into the summary; it reads no verdict.

With a fixed judge (a model, ``none``, or ``cons-up``/``cons-down`` given ``alignment``)
that is one pass into ``OUT/``. A measured ``cons-up``/``cons-down`` takes two: the members
vote into ``OUT/votes/`` (a sharded folder of its own; with ``--shards-uri URI``, its store
is ``URI/votes``), the merged tallies of its markers give CA_M, which picks the judge, and
the second pass, cut in the same shards, has the worker of shard ``i`` read the votes
recorded in shard ``i`` of the first pass, so that each fact starts from its votes and only
the ties reach the judge. Both passes resume on their own, as the local runner's phases do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from kgcheck.arguments import Arg, literal
from kgcheck.data.runfolder import RunError, shard_name
from kgcheck.data.shard_store import ShardStore
from kgcheck.graphs.consensus.graph import ConsensusContext
from kgcheck.runs import ray_pipeline
from kgcheck.runs.consensus import VOTES_DIR, run_consensus
from kgcheck.runs.consensus_tally import ConsensusTally, merged_consensus
from kgcheck.runs.runner import RunInfo, RunResult
from kgcheck.runs.shard_check import ShardJob, shard_result
from kgcheck.runs.sharded_folder import local_store, stored_plan

__all__ = ["ShardedPasses", "run_sharded_consensus"]


class ShardedPasses:
    """Consensus passes on the cluster's workers, shard by shard (``consensus.ConsensusPasses``)."""

    def __init__(self, sharded: Any, engine: Any, job: ShardJob, members: Sequence[str],
                 out_dir: Path, *, resume: bool, fresh: bool, show_progress: bool) -> None:
        self.sharded = sharded
        self.engine = engine
        self.job = job
        self.members = tuple(members)
        self.out_dir = Path(out_dir)
        self.options = {"resume": resume, "fresh": fresh, "show_progress": show_progress}

    async def check(self, ctx: ConsensusContext, info: RunInfo, out_dir: Path, *,
                    phase: str, extras: Mapping[str, Any],
                    votes: RunResult | None) -> tuple[RunResult, ConsensusTally]:
        """Check every shard into ``out_dir``; the first phase's tally is its markers'."""
        first = votes is None and Path(out_dir) != self.out_dir
        shards = self.job.shards
        if shards and first:
            shards = f"{shards.rstrip('/')}/{VOTES_DIR}"
        job = replace(self.job, key=("consensus", ctx.method), context=ctx,
                      consensus=self.members, summary_extra=dict(extras), shards=shards,
                      votes_from="" if votes is None else store_of(votes.out_dir).where)
        sharded = self.sharded if votes is None else await self._cut_as(votes.out_dir)
        result: RunResult = await self.engine.run_sharded(sharded, info, Path(out_dir), job,
                                                          **self.options)
        if not first or result.aborted:
            return result, ConsensusTally()
        return result, tally_of(Path(out_dir))

    async def _cut_as(self, votes_dir: Path) -> Any:
        """Return the input cut as the first phase was (a resume may ask another size)."""
        plan = stored_plan(votes_dir)
        if plan is None or plan["shard_bytes"] == self.sharded.shard_bytes:
            return self.sharded
        found = await asyncio.to_thread(ray_pipeline.survey, self.sharded.source,
                                        plan["shard_bytes"], ray_pipeline.cluster_cpus())
        return ray_pipeline.ShardedRun(self.sharded.source, found, plan["shard_bytes"])


def store_of(out_dir: Path) -> ShardStore:
    """Return the shard store a sharded run folder's plan names (its ``shards/`` by default)."""
    plan = stored_plan(out_dir) or {}
    return ShardStore(plan["store"]) if plan.get("store") else local_store(out_dir)


def tally_of(out_dir: Path) -> ConsensusTally:
    """Merge the consensus tallies of a finished sharded run's markers (one per shard).

    Raises:
        RunError: a shard without its marker (the phase did not finish).

    """
    plan = stored_plan(out_dir)
    store = store_of(out_dir)
    markers = []
    for index in range(len((plan or {}).get("shards") or [])):
        marker = shard_result(store, index)
        if marker is None:
            where = f"{store.shown.rstrip('/')}/{shard_name(index, '.done')}"
            raise RunError(f"{literal(where)} is missing: the votes phase did not finish; "
                           "continue it with {resume}",
                           resume=Arg("resume", True, out=str(out_dir.parent)))
        markers.append(marker)
    return merged_consensus(markers)


async def run_sharded_consensus(plan: Any, engine: Any, job: ShardJob, *, resume: bool,
                                fresh: bool, show_progress: bool) -> RunResult:
    """Run a sharded plan's consensus on the engine's workers (see the module docstring)."""
    passes = ShardedPasses(plan.sharded, engine, job, plan.members, plan.out_dir,
                           resume=resume, fresh=fresh, show_progress=show_progress)
    return await run_consensus(plan.facts, strategy=plan.strategy, members=plan.members,
                               judge=plan.judge, values=plan.values, info=plan.info,
                               out_dir=plan.out_dir, resume=resume, fresh=fresh,
                               show_progress=show_progress, passes=passes)
