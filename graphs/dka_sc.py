"""DKA-SC, self-consistency over DKA: sample k answers at temperature > 0, take the majority.

build_prompt -> sample (k branches in parallel, one ``Send`` each) -> vote. Each branch asks
the model DKA's question once; ``vote`` counts the T and F answers: more T gives T, more F
gives F, an even split (or no clear answer at all) gives NA. NA answers take no side.

This module is the worked example of adding a strategy without touching the core: it is
built from the shared pieces (``graphs.common``, DKA's prompt file) and made available to
``kgcheck run --method dka-sc``, consensus members and ``kgcheck graph`` by the one
``register(...)`` call at the bottom. With ``replay:`` models every sample is the recorded
DKA answer (a recording cannot be re-sampled), so the vote equals DKA's verdict; live
models (Ollama, OpenAI) give k independent samples.
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
from collections import Counter
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict

from graphs.calls import CallRecord
from graphs.common import answered_verdict, ask, defect_verdict, model_for, prompt_values
from graphs.context import context_of, make_context
from graphs.dka import PROMPT_FIELDS, DKAContext
from graphs.parsing import parse_verdict
from graphs.registry import register
from graphs.state import FactInput, Label, Verdict, VerdictDict, fact_from_input
from prompts import load_prompt, render

METHOD = "DKA-SC"
# Replay keys recordings by method: each sample is asked as the DKA question it is.
ASKED_AS = "DKA"
MAX_SAMPLES = 25


class SelfConsistencyError(ValueError):
    """A DKA-SC setting has a value the graph cannot use."""


@dataclass(kw_only=True)
class DKASCContext(DKAContext):
    """Settings of a DKA-SC run: DKA's, plus how many answers to sample."""

    samples: int = field(
        default=5,
        metadata={"description": f"Answers sampled per fact (k, 1 to {MAX_SAMPLES}); an odd k "
                  "avoids ties. Sampling uses the temperature, which must be above 0."},
    )

    def __post_init__(self) -> None:
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


async def build_prompt(state: DKASCState, runtime: Runtime[DKASCContext]) -> dict:
    """Fill DKA's prompt template with the fact, or end early on a dirty triple."""
    ctx = context_of(runtime, DKASCContext)
    fact = fact_from_input(state["fact"])
    if fact.defect:
        return {"verdict": defect_verdict(fact, METHOD, ctx.model)}
    # Reading the prompt file is blocking I/O; the dev server forbids it on the event loop.
    template = await asyncio.to_thread(load_prompt, ctx.prompt, PROMPT_FIELDS)
    values = await asyncio.to_thread(prompt_values, fact)
    return {"messages": [HumanMessage(render(template, **values))]}


def fan_out(state: DKASCState, runtime: Runtime[DKASCContext]) -> list[Send] | Literal["__end__"]:
    """Send the prompt to k sampling branches, or end when the fact already has a verdict."""
    # The literal, not END (typed plain str), so the return matches the Literal annotation.
    if "verdict" in state:
        return "__end__"
    ctx = context_of(runtime, DKASCContext)
    settings = dataclasses.asdict(ctx)
    return [
        Send("sample", SampleState(fact=state["fact"], messages=state["messages"], index=i,
                                   settings=settings))
        for i in range(ctx.samples)
    ]


async def sample(state: SampleState) -> dict:
    """Ask the model once; a failed call is a sample without a label, not a failed run."""
    ctx = make_context(DKASCContext, state["settings"])
    fact = fact_from_input(state["fact"])
    try:
        reply = await ask(model_for(ctx), state["messages"], fact, ASKED_AS,
                          kgcheck_sample=state["index"])
    except Exception as exc:  # noqa: BLE001 - any model failure is recorded, not raised
        failed = Sample(index=state["index"], label="NA", call=None,
                        error=f"{type(exc).__name__}: {exc}")
        return {"samples": [failed]}
    answered = Sample(index=state["index"], label=parse_verdict(reply.text),
                      call=reply.record(), error=None)
    return {"samples": [answered]}


def majority_label(labels: list[Label]) -> Label:
    """Return T or F when it has more votes than the other; NA on a tie or no votes."""
    votes = Counter(labels)
    if votes["T"] == votes["F"]:
        return "NA"
    return "T" if votes["T"] > votes["F"] else "F"


async def vote(state: DKASCState, runtime: Runtime[DKASCContext]) -> dict:
    """Take the majority of the samples, in sample order so the verdict is reproducible."""
    ctx = context_of(runtime, DKASCContext)
    fact = fact_from_input(state["fact"])
    samples = sorted(state.get("samples", []), key=lambda s: s["index"])
    labels = [s["label"] for s in samples]
    calls = [s["call"] for s in samples if s["call"] is not None]
    votes = Counter(labels)
    details: dict[str, Any] = {
        "samples": labels,
        "votes": {"T": votes["T"], "F": votes["F"], "NA": votes["NA"]},
        "tie": votes["T"] == votes["F"] and votes["T"] > 0,
        "errors": [s["error"] for s in samples if s["error"]],
    }
    if not calls:
        failed = Verdict(fact_id=fact.id, label="NA", method=METHOD, model=ctx.model,
                         error=details["errors"][0] if details["errors"] else "no samples",
                         details=details)
        return {"verdict": failed.model_dump()}
    return {"verdict": answered_verdict(fact, METHOD, ctx.model, majority_label(labels), calls,
                                        **details)}


builder = StateGraph(DKASCState, context_schema=DKASCContext)
builder.add_node("build_prompt", build_prompt)
builder.add_node("sample", sample)
builder.add_node("vote", vote)
builder.add_edge(START, "build_prompt")
builder.add_conditional_edges("build_prompt", fan_out, ["sample", END])
builder.add_edge("sample", "vote")
builder.add_edge("vote", END)

graph = builder.compile(name="dka-sc")

register(
    "dka-sc", builder, DKASCContext, method=ASKED_AS,
    description="Self-consistency over DKA: k answers sampled at temperature > 0, majority vote.",
)
