"""DKA-SC, self-consistency over DKA: sample k answers at temperature > 0, take the majority.

build_prompt -> sample (k branches in parallel, one ``Send`` each) -> vote. Each branch asks
the model DKA's question once; ``vote`` counts the T and F answers: more T gives T, more F
gives F, an even split (or no clear answer at all) gives NA. NA answers take no side.

This module is the worked example of a strategy with a graph of its own: it is built from
the shared pieces (``kgcheck.graphs.calls``, ``prompting``, ``verdicts``, ``votes``, DKA's
prompt file) and made available to ``kgcheck run --method dka-sc``, the Python API, Studio,
consensus members and ``kgcheck graph`` by the one ``register(...)`` call at the bottom. Its
verdicts are labelled DKA-SC, while replay serves it the study's DKA answers: with
``replay:`` models every sample is the recorded DKA answer (a recording cannot be
re-sampled), so the vote equals DKA's verdict; live models (Ollama, OpenAI) give k
independent samples.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict

from kgcheck.data.facts import FactInput, Label, VerdictDict
from kgcheck.graphs import explain, verdicts
from kgcheck.graphs.calls import CallRecord, ask
from kgcheck.graphs.context import bind, context_of, make_context
from kgcheck.graphs.prompting import render_messages
from kgcheck.graphs.registry import AnyStateGraph, Strategy, register
from kgcheck.graphs.state import GraphInput, GraphOutput, read_fact
from kgcheck.graphs.strategies.dka import PROMPT_FIELDS, DKAContext
from kgcheck.graphs.votes import TIE, tally, undecided, vote_share

MAX_SAMPLES = 25


class SelfConsistencyError(ValueError):
    """A DKA-SC setting has a value the graph cannot use."""


@dataclass(kw_only=True)
class DKASCContext(DKAContext):
    """Settings of a DKA-SC run: DKA's, plus how many answers to sample."""

    METHOD: ClassVar[str] = "DKA-SC"
    # Each sample is DKA's question: replay answers it with the study's DKA recording.
    REPLAYS: ClassVar[str | None] = "DKA"

    samples: int = field(
        default=5,
        metadata={"description": f"Answers sampled per fact (k, 1 to {MAX_SAMPLES}); an odd k "
                  "avoids ties. Sampling uses the temperature, which must be above 0."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or not (
            1 <= self.samples <= MAX_SAMPLES
        ):
            raise SelfConsistencyError(
                f"samples {self.samples!r}: expected a whole number from 1 to {MAX_SAMPLES}"
            )
        if not self.temperature > 0:
            raise SelfConsistencyError(
                f"temperature {self.temperature!r}: self-consistency samples need a "
                "temperature above 0 (e.g. 0.75), or every answer is the same"
            )


class Sample(TypedDict):
    """One sampled answer: its label and the call that produced it (or the error)."""

    index: int
    label: Label
    call: CallRecord | None
    error: str | None
    error_type: str | None
    # Confidence, reason, correction and problems of this sample's answer.
    extras: NotRequired[dict[str, Any]]


class DKASCState(TypedDict):
    """A fact in, its verdict out; the prompt and the samples in between."""

    fact: FactInput
    messages: NotRequired[list[AnyMessage]]
    samples: NotRequired[Annotated[list[Sample], operator.add]]
    verdict: NotRequired[VerdictDict]


class SampleState(TypedDict):
    """What one sampling branch gets: the conversation and the run's settings.

    The settings travel in the branch's state because the LangGraph server does not pass
    the Context across ``Send``.
    """

    fact: FactInput
    messages: list[AnyMessage]
    index: int
    settings: dict[str, Any]


async def build_prompt(state: DKASCState, runtime: Runtime[DKASCContext], *,
                       context: type[DKASCContext] = DKASCContext) -> dict:
    """Fill DKA's prompt template with the fact, or end early on a dirty triple."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    if fact.defect:
        return {"verdict": verdicts.defect(fact, ctx.METHOD, ctx.model)}
    messages = await render_messages(ctx.prompt, PROMPT_FIELDS, fact)
    return {"messages": await explain.asking(messages, explain.Requests.of(ctx))}


async def fan_out(state: DKASCState, runtime: Runtime[DKASCContext], *,
                  context: type[DKASCContext] = DKASCContext) -> list[Send] | Literal["decided"]:
    """Send the prompt to k sampling branches, or end when the fact already has a verdict."""
    if "verdict" in state:
        return "decided"
    ctx = context_of(runtime, context)
    settings = dataclasses.asdict(ctx)
    return [
        Send("sample", SampleState(fact=state["fact"], messages=state["messages"], index=i,
                                   settings=settings))
        for i in range(ctx.samples)
    ]


async def sample(state: SampleState, *, context: type[DKASCContext] = DKASCContext) -> dict:
    """Ask the model once; a failed call is a sample without a label, not a failed run."""
    ctx = make_context(context, state["settings"])
    fact = read_fact(state)
    try:
        reply = await ask(ctx, state["messages"], fact, kgcheck_sample=state["index"])
    except Exception as exc:  # noqa: BLE001 - any model failure is recorded, not raised
        failed = Sample(index=state["index"], label="NA", call=None,
                        error=verdicts.error_text(exc), error_type=type(exc).__name__)
        return {"samples": [failed]}
    requests = explain.Requests.of(ctx)
    read = explain.read_answer(ctx.parser, reply.text, requests)
    extras = explain.verdict_fields(fact, read, [reply.record()], requests=requests)
    answered = Sample(index=state["index"], label=read.reading.label, call=reply.record(),
                      error=None, error_type=None, extras=extras)
    return {"samples": [answered]}


def sample_extras(samples: list[Sample], label: Label, ctx: DKASCContext,
                  messages: list[AnyMessage]) -> dict[str, Any]:
    """Combine the samples' confidences, reasons and corrections into the verdict's.

    Confidence: the mean of the samples' log-probability confidences when every answered
    sample has one, else the share of T among the T/F votes. The reason and correction
    are those of the first sample that voted for the outcome.
    """
    answered = [s for s in samples if s["call"] is not None]
    scores = [(s.get("extras") or {}).get("confidence") for s in answered]
    known = [float(v) for v in scores if v is not None]
    extras: dict[str, Any] = {}
    if answered and len(known) == len(scores):
        extras.update(confidence=round(sum(known) / len(known), 6),
                      confidence_source="logprobs")
    else:
        share = vote_share([s["label"] for s in samples])
        if share is not None:
            extras.update(confidence=round(share, 6), confidence_source="self-consistency")
    agreeing = next((s for s in answered if s["label"] == label), None)
    if agreeing is not None:
        own = agreeing.get("extras") or {}
        extras.update({k: own[k] for k in ("rationale", "correction") if k in own})
    problems = [f"sample {s['index']}: {p}" for s in answered
                for p in (s.get("extras") or {}).get("answer_problems", [])]
    if problems:
        extras["answer_problems"] = problems
    if ctx.transcript:
        extras["conversation"] = explain.turns(messages) + [
            {"role": "assistant", "content": s["call"]["text"], "sample": s["index"]}
            for s in answered if s["call"] is not None]
    return extras


async def vote(state: DKASCState, runtime: Runtime[DKASCContext], *,
               context: type[DKASCContext] = DKASCContext) -> dict:
    """Take the majority of the samples, in sample order so the verdict is reproducible."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    samples = sorted(state.get("samples", []), key=lambda s: s["index"])
    labels = [s["label"] for s in samples]
    calls = [s["call"] for s in samples if s["call"] is not None]
    result = tally(labels)
    errors = [s["error"] for s in samples if s["error"]]
    details: dict[str, Any] = {
        "samples": labels,
        "votes": result["counts"],
        "tie": result["decision"] == TIE and result["counts"]["T"] > 0,
        "errors": errors,
    }
    if not calls:
        first = next((s for s in samples if s["error"]), None)
        return {"verdict": verdicts.failed(
            fact.id, ctx.METHOD, ctx.model, (first["error"] if first else None) or "no samples",
            error_type=first["error_type"] if first else "NoSamples", **details)}
    label: Label = undecided(labels) if result["decision"] == TIE else result["decision"]
    extras = sample_extras(samples, label, ctx, state.get("messages", []))
    return {"verdict": verdicts.answered(fact, ctx.METHOD, ctx.model, label, calls,
                                         extras=extras, **details)}


def build(context: type[DKASCContext] = DKASCContext) -> AnyStateGraph:
    """Build the DKA-SC graph for ``context`` (DKASCContext or a subclass of it)."""
    graph_builder = StateGraph(DKASCState, context_schema=context, input_schema=GraphInput,
                               output_schema=GraphOutput)
    graph_builder.add_node("build_prompt", bind(build_prompt, context))
    graph_builder.add_node("sample", bind(sample, context))
    graph_builder.add_node("vote", bind(vote, context))
    graph_builder.add_edge(START, "build_prompt")
    # The path map labels the edges in the graph's picture; the Sends go to "sample" directly.
    graph_builder.add_conditional_edges("build_prompt", bind(fan_out, context),
                                        {"k samples": "sample", "decided": END})
    graph_builder.add_edge("sample", "vote")
    graph_builder.add_edge("vote", END)
    return graph_builder


STRATEGY = register(Strategy(
    "dka-sc", DKASCContext, build,
    description="Self-consistency over DKA: k answers sampled at temperature > 0, majority "
    "vote."))
builder = STRATEGY.builder
graph = builder.compile(name="dka-sc")
