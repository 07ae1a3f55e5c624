"""Run multi-model consensus over many facts: votes, ties, the judge, alignment (CA_M).

One phase when the judge is fixed (a model, ``none``, or ``cons-up``/``cons-down`` with the
alignment given): each fact runs the consensus graph once. Two phases when ``cons-up`` or
``cons-down`` must be measured: first every member votes on every fact with no judge
(``OUT/votes/``), then CA_M over the facts with a majority picks the judge, and the graph
re-runs each fact from its recorded votes so only the ties reach the judge (``OUT/``). Both
phases stream to their own ``verdicts.jsonl`` and resume on their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Protocol

from kgcheck.arguments import Arg
from kgcheck.data.facts import Fact
from kgcheck.data.recordings import has_recordings
from kgcheck.evals.metrics import consensus_alignment, f1_true_false, tie_rate
from kgcheck.graphs.consensus.graph import ConsensusContext, member_specs, member_values
from kgcheck.graphs.consensus.judges import (
    CONS_JUDGES,
    JUDGE_NONE,
    ConsensusError,
    parse_alignment,
    resolve_judge,
)
from kgcheck.graphs.context import Context, make_context
from kgcheck.graphs.registry import GraphKey, Strategy
from kgcheck.providers import split_spec
from kgcheck.providers.resolve import reach_model
from kgcheck.runs.concurrency import Limit
from kgcheck.runs.consensus_tally import ConsensusTally
from kgcheck.runs.engines import Engine, LocalEngine
from kgcheck.runs.runner import RunInfo, RunResult, Warn, check_facts, run_config

__all__ = ["VOTES_DIR", "ConsensusPasses", "LocalPasses", "alignment_of", "consensus_context",
           "consensus_summary", "member_scores", "run_consensus", "vote_maps"]

VOTES_DIR = "votes"


def vote_maps(records: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Each consensus record's votes as ``{member: label}`` (records without votes skipped)."""
    out = []
    for record in records:
        votes = (record.get("details") or {}).get("votes")
        if votes:
            out.append({v["model"]: v["label"] for v in votes})
    return out


def alignment_of(records: Sequence[Mapping[str, Any]], members: Sequence[str]) -> dict[str, float]:
    """CA_M of each member over the records, in member order."""
    scores = consensus_alignment(vote_maps(records))
    return {m: round(scores.get(m, 0.0), 4) for m in members}


def member_scores(records: Sequence[Mapping[str, Any]],
                  members: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each member's own F1(T), F1(F) (None without gold labels) and NA votes, from its votes."""
    scores: dict[str, dict[str, Any]] = {}
    for member in members:
        labels = [(r.get("gold"), vote["label"]) for r in records
                  for vote in (r.get("details") or {}).get("votes") or []
                  if vote.get("model") == member]
        scored = [(g == "T", p) for g, p in labels if g in ("T", "F")]
        f1_t, f1_f = f1_true_false([g for g, _ in scored], [p for _, p in scored]) if scored \
            else (None, None)
        errors = sum(1 for r in records for vote in (r.get("details") or {}).get("votes") or []
                     if vote.get("model") == member and vote.get("error"))
        scores[member] = {"f1_true": f1_t, "f1_false": f1_f, "votes": len(labels),
                          "na": sum(1 for _, p in labels if p == "NA"), "errors": errors}
    return scores


def consensus_summary(records: Sequence[Mapping[str, Any]], members: Sequence[str],
                      **extra: Any) -> dict[str, Any]:
    """Summarize a consensus run: ties, CA_M per member, judge calls, member errors."""
    votes = vote_maps(records)
    details = [r.get("details") or {} for r in records]
    return {
        "tie_rate": round(tie_rate(votes), 4),
        "ties": sum(1 for d in details if d.get("decision") == "tie"),
        "alignment": alignment_of(records, members),
        "member_scores": member_scores(records, members),
        "judge_calls": sum(1 for d in details if d.get("judge_called")),
        "judge_decided": sum(1 for d in details if d.get("judge_decided")),
        "member_errors": sum(int(d.get("member_errors") or 0) for d in details),
        "judge_errors": sum(1 for d in details if d.get("judge_error")),
        **extra,
    }


def consensus_context(strategy: Strategy, members: Sequence[str], judge: str,
                      values: Mapping[str, Any]) -> ConsensusContext:
    """Build the graph's Context from run values: shared, consensus and method settings."""
    shared = {f.name for f in fields(Context)}
    own = {f.name for f in fields(ConsensusContext)}
    method_only = {f.name for f in fields(strategy.context)} - shared
    extra = {k: v for k, v in values.items() if k in method_only and k not in own}
    ctx_values = {k: v for k, v in values.items() if k in own and k != "model"}
    ctx_values["member_settings"] = {**extra, **dict(ctx_values.get("member_settings") or {})}
    return make_context(ConsensusContext, {**ctx_values, "members": list(members),
                                           "method": strategy.name, "judge": judge})


def _check_replay_judge(spec: str | None, data_dir: str, dataset: str,
                        method: str | None) -> None:
    """Fail before any work when a replay judge has nothing recorded to answer with."""
    if not spec or split_spec(spec)[0] != "replay":
        return
    name = split_spec(spec)[1]
    if not method or not has_recordings(data_dir or None, name, dataset, method):
        raise ConsensusError(
            f"judge {spec} has no recorded {method} tie-breaks for {dataset}: the study "
            "recorded only the judges it picked over whole datasets, for DKA, GIV-Z and GIV-F; "
            "use {judge}, a recorded judge, or a live model", judge=Arg("judge", "none")
        )


class ConsensusPasses(Protocol):
    """How a consensus run checks its facts in one pass: in this process, or on a cluster."""

    async def check(self, ctx: ConsensusContext, info: RunInfo, out_dir: Path, *,
                    phase: str, extras: Mapping[str, Any],
                    votes: RunResult | None) -> tuple[RunResult, ConsensusTally]:
        """Check every fact into ``out_dir``; return the run and its consensus tally.

        ``extras`` join the summary's consensus figures; ``votes`` is the run of the
        first phase, whose recorded votes each fact starts from (None: the members vote).
        """
        ...


class LocalPasses:
    """Consensus passes through this process: the runner feeds each fact to the engine."""

    def __init__(self, facts: Iterable[Fact], members: Sequence[str], engine: Engine,
                 key: GraphKey, config: Any, *, concurrency: int | Limit, resume: bool,
                 fresh: bool, show_progress: bool, warn: Warn | None) -> None:
        self.facts = facts
        self.members = list(members)
        self.engine = engine
        self.key = key
        self.config = config
        self.options: dict[str, Any] = {"concurrency": concurrency, "resume": resume,
                                        "fresh": fresh, "show_progress": show_progress,
                                        "warn": warn}

    async def check(self, ctx: ConsensusContext, info: RunInfo, out_dir: Path, *,
                    phase: str, extras: Mapping[str, Any],
                    votes: RunResult | None) -> tuple[RunResult, ConsensusTally]:
        """Check the facts with the local runner (see ``ConsensusPasses.check``)."""
        votes_of = None if votes is None else {
            str(r["fact_id"]): r["details"]["votes"] for r in votes.records
            if (r.get("details") or {}).get("votes")}

        async def invoke(fact: Fact) -> dict[str, Any]:
            state: dict[str, Any] = {"fact": fact.as_input()}
            # A fact without recorded votes (a dirty triple) simply runs the whole graph.
            if votes_of is not None and fact.id in votes_of:
                state["votes"] = votes_of[fact.id]
            return await self.engine.invoke(self.key, state, ctx, self.config)

        # Counted in the runner's one pass over the folder's verdicts for its summary.
        counted = ConsensusTally()

        def summary_extras(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
            return counted.summary(self.members, **extras)

        result = await check_facts(self.facts, invoke, info, out_dir, phase=phase,
                                   summary_extras=summary_extras, count_also=counted.add,
                                   **self.options)
        return result, counted


async def run_consensus(
    facts: Iterable[Fact],
    *,
    strategy: Strategy,
    members: Sequence[str],
    judge: str,
    values: Mapping[str, Any],
    info: RunInfo,
    out_dir: Path,
    concurrency: int | Limit = 4,
    resume: bool = False,
    fresh: bool = False,
    show_progress: bool = True,
    warn: Warn | None = None,
    engine: Engine | None = None,
    passes: ConsensusPasses | None = None,
) -> RunResult:
    """Check every fact by consensus of ``members`` running ``strategy``; return the run.

    ``judge`` is a model spec, ``none``, ``cons-up`` or ``cons-down``; for the last two the
    alignment comes from ``values["alignment"]`` when given, else it is measured in a first
    phase (see the module docstring). ``summary`` adds ``tie_rate``, ``alignment`` (CA_M per
    member), ``judge_calls`` and the judge model used. ``passes`` checks the facts of each
    phase (default: ``LocalPasses``, the runner feeding ``engine``; a sharded run's check
    on the cluster's workers, ``kgcheck.runs.pipeline_consensus``).
    """
    members = list(members)
    out_dir = Path(out_dir)
    setting = (judge or JUDGE_NONE).strip()
    if setting.lower() in (JUDGE_NONE, *CONS_JUDGES):
        setting = setting.lower()
    data_dir = str(values.get("data_dir") or "")
    base_ctx = consensus_context(strategy, members, JUDGE_NONE, values)
    # Bad members, method or settings fail here, before any fact is run.
    member_specs(base_ctx)
    member_values(base_ctx)
    graph_key: GraphKey = ("consensus", strategy.name)
    passes = passes or LocalPasses(facts, members, engine or LocalEngine(), graph_key,
                                   run_config(info.run_id), concurrency=concurrency,
                                   resume=resume, fresh=fresh, show_progress=show_progress,
                                   warn=warn)

    async def final_run(ctx: ConsensusContext, judge_spec: str | None, source: str,
                        votes: RunResult | None = None, phase: str = "members",
                        **more: Any) -> RunResult:
        info.settings = {**info.settings, "judge_model": judge_spec or JUDGE_NONE}
        result, _ = await passes.check(
            ctx, info, out_dir, phase=phase, votes=votes,
            extras={"judge_model": judge_spec or JUDGE_NONE, "judge_source": source, **more})
        return result

    async def reach_judge(spec: str | None) -> None:
        if spec and setting in CONS_JUDGES:
            # A judge picked by alignment is known only now: reach its server before the
            # first tie, as the members' servers were reached before the first fact.
            await asyncio.to_thread(reach_model, spec, base_ctx)

    def judged_context(
        alignment: Mapping[str, float] | None,
    ) -> tuple[ConsensusContext, str | None]:
        spec = resolve_judge(setting, members, alignment=alignment,
                             siblings=base_ctx.siblings or None)
        _check_replay_judge(spec, data_dir, info.dataset, strategy.replays)
        if setting in CONS_JUDGES:
            # The graph picks the judge itself from the alignment, as it does in Studio.
            pairs = ",".join(f"{m}={alignment[m]!r}" for m in members) if alignment else ""
            return replace(base_ctx, judge=setting, alignment=pairs), spec
        return replace(base_ctx, judge=spec or JUDGE_NONE, alignment=""), spec

    if setting not in CONS_JUDGES or values.get("alignment"):
        given = parse_alignment(values.get("alignment")) if setting in CONS_JUDGES else None
        if given:
            # Keys may be specs or bare model names; a member left out is named by the judge.
            given = {m: given[m] if m in given else given[split_spec(m)[1]] for m in members
                     if m in given or split_spec(m)[1] in given}
        ctx, spec = judged_context(given)
        await reach_judge(spec)
        return await final_run(ctx, spec, "given" if setting in CONS_JUDGES else "fixed",
                               phase="members" if spec is None else "consensus")

    # Phase 1: every member votes on every fact; no judge yet.
    votes_info = RunInfo(dataset=info.dataset, strategy=info.strategy, method=info.method,
                         models=list(info.models),
                         judge=JUDGE_NONE, source=info.source, settings=dict(info.settings),
                         pricing=info.pricing, input=dict(info.input),
                         prompts=dict(info.prompts))
    phase1, counted = await passes.check(
        base_ctx, votes_info, out_dir / VOTES_DIR, phase="members", votes=None,
        extras={"judge_model": JUDGE_NONE, "judge_source": "phase 1: votes only"})
    if phase1.aborted:
        return RunResult(out_dir, phase1.records, {**phase1.summary, "judge": setting,
                                                   "phase": "votes"}, phase1.aborted,
                         phase1.outcomes)
    # Phase 2: CA_M over the facts with a majority picks the judge; only ties reach it.
    ctx, spec = judged_context(counted.alignment(members))
    await reach_judge(spec)
    return await final_run(
        ctx, spec, "measured", phase1, phase="judge",
        votes_phase={"out_dir": str(out_dir / VOTES_DIR),
                     "ran_this_time": phase1.summary.get("ran_this_time"),
                     "seconds": phase1.summary.get("seconds")},
    )
