"""Consensus: several models check a fact in parallel, the majority decides, a judge breaks ties.

``dispatch`` reads the Context into a plan kept in state, then fans out one ``member`` branch
per model with ``Send``; each branch runs the member method's compiled graph (DKA, GIV-Z,
GIV-F, RAG) with its own model. Votes meet in a reducer, sorted by member, and ``tally``
takes the majority: more T than F votes gives T, more F than T gives F, an even split is a
tie, and NA votes are reported but take no side. A tie follows a conditional edge to
``judge``, which runs the same method's graph with the judge model; otherwise the graph ends.

Judges: a model spec, ``none`` (ties stay NA), or ``cons-up`` / ``cons-down``: the larger
sibling of the member that agrees most / least with the majority (CA_M), given in
``alignment``. Votes may also come in with the input, so recorded votes can be re-judged
without asking the members again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, make_dataclass
from functools import cache
from typing import Annotated, Any, Literal, NotRequired

from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict

from kgcheck.data import safe_json
from kgcheck.data.facts import FactInput, Label, VerdictDict
from kgcheck.graphs import verdicts
from kgcheck.graphs.consensus.judges import (
    CONS_JUDGES,
    DEFAULT_SIBLINGS,
    JUDGE_NONE,
    ConsensusError,
    parse_alignment,
    resolve_judge,
)
from kgcheck.graphs.context import LLM_HINT, Context, context_of
from kgcheck.graphs.registry import (
    AnyCompiledGraph,
    AnyStateGraph,
    Strategy,
    get_strategy,
    register,
)
from kgcheck.graphs.routing import then, unless_decided
from kgcheck.graphs.state import GraphOutput, read_fact
from kgcheck.graphs.votes import TIE, Tally, tally, undecided, vote_share
from kgcheck.providers import split_spec

DEFAULT_METHOD = "dka"
DEFAULT_MEMBERS = ("replay:gemma2:9b", "replay:qwen2.5:7b", "replay:llama3.1:8b",
                   "replay:mistral:7b")


@dataclass(kw_only=True)
class ConsensusContext(Context):
    """Settings of a consensus run: the members, their method, and the tie-breaking judge."""

    model: Annotated[str, LLM_HINT] = field(
        default=DEFAULT_MEMBERS[0],
        metadata={"description": "Not used by consensus: set member_1..member_4 (or members) "
                  "and judge."},
    )
    member_1: Annotated[str, LLM_HINT] = field(
        default=DEFAULT_MEMBERS[0],
        metadata={"description": "First member model (provider:model); empty = unused."},
    )
    member_2: Annotated[str, LLM_HINT] = field(
        default=DEFAULT_MEMBERS[1],
        metadata={"description": "Second member model (provider:model); empty = unused."},
    )
    member_3: Annotated[str, LLM_HINT] = field(
        default=DEFAULT_MEMBERS[2],
        metadata={"description": "Third member model (provider:model); empty = unused."},
    )
    member_4: Annotated[str, LLM_HINT] = field(
        default=DEFAULT_MEMBERS[3],
        metadata={"description": "Fourth member model (provider:model); empty = unused."},
    )
    members: list[str] = field(
        default_factory=list,
        metadata={"description": "Every member model, any number from 2 (a list, or "
                  "comma-separated); when set it replaces member_1..member_4."},
    )
    method: str = field(
        default=DEFAULT_METHOD,
        metadata={"description": "The method each member (and the judge) runs: dka, giv-z, "
                  "giv-f, rag, or another registered strategy."},
    )
    judge: Annotated[str, LLM_HINT] = field(
        default=JUDGE_NONE,
        metadata={"description": "Who breaks a tie: a model (provider:model), none (ties stay "
                  "NA), cons-up or cons-down (the larger sibling of the member most / least "
                  "aligned with the majority; needs alignment)."},
    )
    alignment: str = field(
        default="",
        metadata={"description": "CA_M per member for cons-up/cons-down: "
                  "'replay:gemma2:9b=0.919,...' or the path of a previous consensus run's "
                  "summary.json. `kgcheck run` measures it when empty."},
    )
    siblings: dict[str, str] = field(
        default_factory=lambda: dict(DEFAULT_SIBLINGS),
        metadata={"description": "Larger sibling of each member model, the cons-up/cons-down "
                  "judge (a mapping, or 'gemma2:9b=gemma2:27b,...'); the judge keeps the "
                  "member's provider unless the sibling names one."},
    )
    member_settings: dict[str, Any] = field(
        default_factory=dict,
        metadata={"description": "Extra settings of the member method's Context, e.g. "
                  '{"max_attempts": 5} for GIV.'},
    )


class Vote(TypedDict):
    """One member's answer, as the tally and the final verdict keep it."""

    index: int
    model: str
    label: Label
    raw: str | None
    raws: list[str]
    attempts: int
    seconds: float
    tokens_in: int | None
    tokens_out: int | None
    error: str | None
    error_type: str | None
    # The member's every call was served from the answer cache (present only when True).
    cached: NotRequired[bool]
    # The member verdict's own confidence, reason, citations, correction and conversation.
    explained: NotRequired[dict[str, Any]]


# The fields of a member's verdict that its vote keeps beside the label.
EXPLAINED_FIELDS = ("confidence", "confidence_source", "rationale", "citations", "correction",
                    "conversation", "answer_problems")


class Plan(TypedDict):
    """What the run needs after ``dispatch``.

    Kept in state because Context does not cross ``Send`` on the server.
    """

    members: list[str]
    method: str
    method_label: str
    judge: str | None
    judge_setting: str
    settings: dict[str, Any]


class MemberTask(TypedDict):
    """The state of one member branch: the fact and everything the member needs."""

    fact: FactInput
    index: int
    model: str
    method: str
    settings: dict[str, Any]


def merge_votes(left: list[Vote] | None, right: list[Vote] | None) -> list[Vote]:
    """Merge votes from parallel branches, one per member, sorted by member index."""
    merged = {v["index"]: v for v in (left or [])}
    merged.update({v["index"]: v for v in (right or [])})
    return [merged[i] for i in sorted(merged)]


class ConsensusInput(TypedDict):
    """The consensus graph's input: the fact, and the members' votes when already known."""

    fact: FactInput
    votes: NotRequired[Annotated[list[Vote], merge_votes]]


class ConsensusState(TypedDict):
    """A fact in, its consensus verdict out; the plan, votes and tally in between.

    ``votes`` may be given with the input (e.g. recorded by an earlier run) to skip the
    members and go straight to the tally and, on a tie, the judge.
    """

    fact: FactInput
    votes: NotRequired[Annotated[list[Vote], merge_votes]]
    plan: NotRequired[Plan]
    tally: NotRequired[Tally]
    judge_verdict: NotRequired[VerdictDict]
    verdict: NotRequired[VerdictDict]


def member_specs(ctx: ConsensusContext) -> list[str]:
    """List a context's member models: ``members`` when set, else the filled slots."""
    given: Any = ctx.members
    if isinstance(given, str):
        given = given.split(",")
    specs = [str(s).strip() for s in (given or []) if str(s).strip()]
    if not specs:
        specs = [s.strip() for s in (ctx.member_1, ctx.member_2, ctx.member_3, ctx.member_4)
                 if s and s.strip()]
    if len(specs) < 2:
        raise ConsensusError(f"members: consensus needs at least 2 models, got {specs}")
    dupes = sorted({s for s in specs if specs.count(s) > 1})
    if dupes:
        raise ConsensusError(f"members: each model may vote once; repeated: {', '.join(dupes)}")
    for spec in specs:
        split_spec(spec)
    return specs


def member_values(ctx: Context) -> dict[str, Any]:
    """Collect the settings a member's Context takes from the consensus Context.

    Only values that differ from the shared defaults pass, so a strategy's own registered
    defaults still apply; ``member_settings`` adds method-specific ones.
    """
    defaults = Context()
    values = {f.name: getattr(ctx, f.name) for f in fields(Context)
              if f.name != "model" and getattr(ctx, f.name) != getattr(defaults, f.name)}
    extra: Any = getattr(ctx, "member_settings", None) or {}
    if isinstance(extra, str):
        try:
            extra = safe_json.parse(extra) if extra.strip() else {}
        except json.JSONDecodeError as exc:
            raise ConsensusError(f"member_settings: not valid JSON ({exc.msg})") from None
    if not isinstance(extra, Mapping):
        raise ConsensusError(f"member_settings: expected a mapping, got {extra!r}")
    return {**values, **extra}


def settings_class(member_context: type[Context]) -> type[Context]:
    """Combine the consensus fields and a member method's fields in one class (for --set)."""
    return make_dataclass(f"Consensus{member_context.__name__}", [],
                          bases=(ConsensusContext, member_context), kw_only=True)


def make_plan(ctx: ConsensusContext) -> Plan:
    """Check the settings and fix the run: members, method, judge spec, member settings.

    May read an alignment file: call it off the event loop.
    """
    members = member_specs(ctx)
    strategy = get_strategy(ctx.method or DEFAULT_METHOD)
    alignment = parse_alignment(ctx.alignment) if ctx.judge.strip().lower() in CONS_JUDGES \
        else None
    # An empty mapping (Studio may send one) means the study's siblings.
    judge = resolve_judge(ctx.judge, members, alignment=alignment,
                          siblings=ctx.siblings or DEFAULT_SIBLINGS)
    return Plan(members=members, method=strategy.name, method_label=strategy.label,
                judge=judge, judge_setting=(ctx.judge or JUDGE_NONE).strip(),
                settings=member_values(ctx))


def _vote(index: int, spec: str, verdict: Mapping[str, Any]) -> Vote:
    details = verdict.get("details") or {}
    error = verdict.get("error")
    explained = {k: verdict[k] for k in EXPLAINED_FIELDS if verdict.get(k) not in (None, [])}
    vote = Vote(
        index=index, model=spec, label=verdict.get("label", "NA"),
        raw=verdict.get("raw"), raws=list(verdict.get("raws") or []),
        attempts=int(verdict.get("attempts") or 0), seconds=float(verdict.get("seconds") or 0.0),
        tokens_in=verdict.get("tokens_in"), tokens_out=verdict.get("tokens_out"),
        error=error, error_type=details.get("error_type") if error else None,
        explained=explained,
    )
    if verdict.get("cached"):
        vote["cached"] = True
    return vote


def consensus_extras(votes: list[Vote], label: Label,
                     judge: Mapping[str, Any] | None) -> dict[str, Any]:
    """Combine the members' explanations: the vote share as confidence, every conversation.

    The reason, citations and correction are those of the judge when it decided, else of
    the first member that voted for the outcome.
    """
    extras: dict[str, Any] = {}
    share = vote_share([v["label"] for v in votes])
    if share is not None:
        extras.update(confidence=round(share, 6), confidence_source="consensus")
    own = [({**v.get("explained", {}), "label": v["label"]}, v["model"]) for v in votes]
    if judge is not None:
        own.insert(0, ({k: judge.get(k) for k in (*EXPLAINED_FIELDS, "label")}, "judge"))
    source = next((e for e, _ in own if e.get("label") == label), {})
    extras.update({k: source[k] for k in ("rationale", "citations", "correction")
                   if source.get(k) is not None})
    problems = [f"{who}: {p}" for e, who in own for p in e.get("answer_problems") or []]
    if problems:
        extras["answer_problems"] = problems
    conversation = [{**turn, "member": who} for e, who in own
                    for turn in e.get("conversation") or []]
    if conversation:
        extras["conversation"] = conversation
    return extras


def _error_vote(index: int, spec: str, exc: BaseException) -> Vote:
    return Vote(index=index, model=spec, label="NA", raw=None, raws=[], attempts=0,
                seconds=0.0, tokens_in=None, tokens_out=None,
                error=verdicts.error_text(exc), error_type=type(exc).__name__)


def final_verdict(fact_input: FactInput, plan: Plan, votes: list[Vote], result: Tally,
                  judge: Mapping[str, Any] | None = None) -> VerdictDict:
    """Build the consensus verdict: the majority, or the judge's answer on a tie.

    ``seconds`` is the critical path (the slowest member plus the judge), since members run
    at the same time; tokens are summed over every call.
    """
    fact = read_fact({"fact": fact_input})
    decision = result["decision"]
    label: Label = decision if decision in ("T", "F") else undecided(
        [v["label"] for v in votes])
    if judge is not None:
        label = judge.get("label", "NA")
    parts: list[Mapping[str, Any]] = [*votes, *([judge] if judge is not None else [])]
    member_errors = [v for v in votes if v["error"]]
    error = error_type = None
    if votes and len(member_errors) == len(votes):
        first = member_errors[0]
        error = f"all {len(votes)} members failed; {first['model']}: {first['error']}"
        error_type = first["error_type"]
    return verdicts.combined(
        fact.id, plan["method_label"], ",".join(plan["members"]), label, parts,
        seconds=max((v["seconds"] for v in votes), default=0.0)
        + (float(judge.get("seconds") or 0.0) if judge is not None else 0.0),
        raw=judge.get("raw") if judge is not None else None,
        error=error, error_type=error_type,
        extras=consensus_extras(votes, label, judge),
        strategy="consensus",
        members=plan["members"],
        # Each vote keeps its member's explanation (conversation included): a run that
        # re-judges recorded votes (cons-up, cons-down) rebuilds the verdict from them.
        votes=votes,
        counts=result["counts"],
        decision=decision,
        majority=decision if decision in ("T", "F") else None,
        judge=plan["judge"] or JUDGE_NONE,
        judge_setting=plan["judge_setting"],
        judge_called=judge is not None,
        judge_decided=judge is not None and judge.get("label") in ("T", "F"),
        judge_label=judge.get("label") if judge is not None else None,
        judge_raw=judge.get("raw") if judge is not None else None,
        judge_error=judge.get("error") if judge is not None else None,
        judge_error_type=(judge.get("details") or {}).get("error_type")
        if judge is not None and judge.get("error") else None,
        member_errors=len(member_errors),
    )


@cache
def _compiled(method: str) -> AnyCompiledGraph:
    return get_strategy(method).compile()


_STRATEGIES: dict[str, Strategy] = {}


async def _strategy(method: str) -> Strategy:
    if method not in _STRATEGIES:
        # The registry may import strategy modules on a first lookup: not on the event loop.
        _STRATEGIES[method] = await asyncio.to_thread(get_strategy, method)
    return _STRATEGIES[method]


async def _method_graph(method: str, default_method: str,
                        default_graph: AnyCompiledGraph) -> AnyCompiledGraph:
    if method == default_method:
        return default_graph
    # Importing and compiling a strategy touches files: keep it off the event loop.
    return await asyncio.to_thread(_compiled, method)


async def _run_method(graph: AnyCompiledGraph, method: str, spec: str,
                      settings: dict[str, Any], fact: FactInput) -> dict[str, Any]:
    """Run the method graph on one fact with ``spec`` as its model; return its verdict."""
    ctx = (await _strategy(method)).make_context(**{**settings, "model": spec})
    # The context is passed explicitly: the member's model travels in state, not Context.
    out = await graph.ainvoke({"fact": fact}, context=ctx)
    verdict = out.get("verdict")
    if not verdict:
        raise RuntimeError(f"the {method} graph returned no verdict")
    return dict(verdict)


def build(method: str = DEFAULT_METHOD) -> AnyStateGraph:
    """Build the consensus graph whose members (and judge) run ``method``'s graph.

    The method's compiled graph is the subgraph of the ``member`` and ``judge`` nodes
    (``get_graph(xray=True)`` shows it); a Context naming another method runs that one.
    """
    strategy = get_strategy(method)
    member_graph = strategy.compile()

    async def dispatch(state: ConsensusState, runtime: Runtime[ConsensusContext]) -> dict:
        """Fix the plan from the Context; a dirty triple ends here with an NA verdict."""
        ctx = context_of(runtime, ConsensusContext)
        plan = await asyncio.to_thread(make_plan, ctx)
        given = state.get("votes") or []
        if given and [v["model"] for v in given] != plan["members"]:
            raise ConsensusError(
                f"votes: given for {[v['model'] for v in given]}, but the members are "
                f"{plan['members']}"
            )
        fact = read_fact(state)
        if fact.defect:
            verdict = verdicts.defect(fact, plan["method_label"], ",".join(plan["members"]))
            return {"plan": plan, "verdict": verdict}
        return {"plan": plan}

    async def fan_out(state: ConsensusState) -> list[Send] | Literal["votes given", "decided"]:
        """Send the fact to every member at once, unless votes came with the input."""
        if "verdict" in state:
            return "decided"
        if state.get("votes"):
            return "votes given"
        plan = state["plan"]
        return [
            Send("member", MemberTask(fact=state["fact"], index=i, model=spec,
                                      method=plan["method"], settings=plan["settings"]))
            for i, spec in enumerate(plan["members"])
        ]

    # The parameter is named ``state`` as LangGraph's node protocols name it; the value is
    # the MemberTask sent by fan_out (LangGraph reads the input schema from the annotation).
    async def member(state: MemberTask) -> dict:
        """Run the method graph with this member's model; any failure is an NA vote."""
        try:
            graph = await _method_graph(state["method"], strategy.name, member_graph)
            verdict = await _run_method(graph, state["method"], state["model"],
                                        state["settings"], state["fact"])
        except GraphBubbleUp:
            raise  # interrupts and other control flow belong to LangGraph
        except Exception as exc:  # noqa: BLE001 - a failed member votes NA, the others go on
            return {"votes": [_error_vote(state["index"], state["model"], exc)]}
        return {"votes": [_vote(state["index"], state["model"], verdict)]}

    async def count(state: ConsensusState) -> dict:
        """Count the votes; decide unless it is a tie that a judge will break."""
        votes = sorted(state.get("votes") or [], key=lambda v: v["index"])
        result = tally([v["label"] for v in votes])
        update: dict[str, Any] = {"tally": result}
        # When every member failed there is nothing to break: the error verdict is retried
        # on resume rather than decided by the judge alone.
        failed = bool(votes) and all(v["error"] for v in votes)
        if result["decision"] != TIE or not state["plan"]["judge"] or failed:
            update["verdict"] = final_verdict(state["fact"], state["plan"], votes, result)
        return update

    async def judge(state: ConsensusState) -> dict:
        """Ask the judge model with the same method; its answer decides the tie."""
        plan = state["plan"]
        spec = plan["judge"] or ""
        try:
            graph = await _method_graph(plan["method"], strategy.name, member_graph)
            verdict = await _run_method(graph, plan["method"], spec, plan["settings"],
                                        state["fact"])
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed judge leaves the tie undecided
            verdict = dict(verdicts.failed(read_fact(state).id, plan["method_label"], spec, exc))
        votes = sorted(state.get("votes") or [], key=lambda v: v["index"])
        return {"judge_verdict": verdict,
                "verdict": final_verdict(state["fact"], plan, votes, state["tally"], verdict)}

    graph_builder = StateGraph(ConsensusState, context_schema=ConsensusContext,
                               input_schema=ConsensusInput, output_schema=GraphOutput)
    graph_builder.add_node("dispatch", dispatch)
    graph_builder.add_node("member", member)
    graph_builder.add_node("tally", count)
    graph_builder.add_node("judge", judge)
    graph_builder.add_edge(START, "dispatch")
    # The path map labels the edges in the graph's picture; the Sends go to "member" directly.
    graph_builder.add_conditional_edges(
        "dispatch", fan_out, {"each member": "member", "votes given": "tally", "decided": END})
    graph_builder.add_edge("member", "tally")
    graph_builder.add_conditional_edges("tally", unless_decided, then("judge"))
    graph_builder.add_edge("judge", END)
    return graph_builder


CONSENSUS = "consensus"
strategy = register(Strategy(
    CONSENSUS, ConsensusContext, lambda _context: build(DEFAULT_METHOD), kind="consensus",
    around=build,
    description="Multi-model consensus: members vote in parallel through a strategy "
                "subgraph; a judge breaks ties."))
builder = strategy.builder
graph = builder.compile(name=CONSENSUS)
