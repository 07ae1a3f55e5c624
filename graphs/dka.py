"""DKA, direct knowledge assessment: one short prompt, the model answers T or F.

prompt -> ask -> verdict. A fact that cannot be sent (a dirty triple) skips to the end
with an NA verdict; a failed model call becomes an NA verdict that keeps the error.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, Literal, NotRequired

from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from graphs.calls import CallRecord
from graphs.common import (
    answered_verdict,
    ask,
    defect_verdict,
    error_verdict,
    model_for,
    render_prompt,
)
from graphs.context import Context, context_of
from graphs.parsing import parse_verdict
from graphs.registry import register
from graphs.state import FactInput, VerdictDict, fact_from_input

METHOD = "DKA"
PROMPT_FIELDS = {"subject", "predicate", "object"}


@dataclass(kw_only=True)
class DKAContext(Context):
    """Settings of a DKA run."""

    prompt: str = field(
        default="dka.txt",
        metadata={"description": "Prompt file in prompts/ or a path; needs {subject}, "
                  "{predicate}, {object}; may use {kg_note}, {fact}, {sentence}."},
    )


class DKAState(TypedDict):
    """A fact in, its verdict out; the conversation and calls in between."""

    fact: FactInput
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    calls: NotRequired[Annotated[list[CallRecord], operator.add]]
    verdict: NotRequired[VerdictDict]


async def build_prompt(state: DKAState, runtime: Runtime[DKAContext]) -> dict:
    """Fill the prompt template with the fact, or end early on a dirty triple."""
    ctx = context_of(runtime, DKAContext)
    fact = fact_from_input(state["fact"])
    if fact.defect:
        return {"verdict": defect_verdict(fact, METHOD, ctx.model)}
    text = await render_prompt(ctx.prompt, PROMPT_FIELDS, fact)
    return {"messages": [HumanMessage(text)]}


async def after_prompt(state: DKAState) -> Literal["ask_model", "__end__"]:
    """Skip the model when the fact already has a verdict."""
    # The literal, not END (typed plain str), so the return matches the Literal annotation.
    return "__end__" if "verdict" in state else "ask_model"


async def ask_model(state: DKAState, runtime: Runtime[DKAContext]) -> dict:
    """Send the conversation to the model; a failure becomes an NA verdict."""
    ctx = context_of(runtime, DKAContext)
    fact = fact_from_input(state["fact"])
    try:
        reply = await ask(model_for(ctx), state["messages"], fact, METHOD)
    except Exception as exc:  # noqa: BLE001 - any model failure is recorded, not raised
        return {"verdict": error_verdict(fact, METHOD, ctx.model, exc)}
    return {"messages": [reply.message], "calls": [reply.record()]}


async def after_ask(state: DKAState) -> Literal["decide", "__end__"]:
    """End when the call failed; otherwise read the verdict."""
    return "__end__" if "verdict" in state else "decide"


async def decide(state: DKAState, runtime: Runtime[DKAContext]) -> dict:
    """Parse the answer strictly: T, F, or NA."""
    ctx = context_of(runtime, DKAContext)
    fact = fact_from_input(state["fact"])
    calls = state["calls"]
    label = parse_verdict(calls[-1]["text"])
    return {"verdict": answered_verdict(fact, METHOD, ctx.model, label, calls)}


builder = StateGraph(DKAState, context_schema=DKAContext)
builder.add_node("build_prompt", build_prompt)
builder.add_node("ask_model", ask_model)
builder.add_node("decide", decide)
builder.add_edge(START, "build_prompt")
builder.add_conditional_edges("build_prompt", after_prompt)
builder.add_conditional_edges("ask_model", after_ask)
builder.add_edge("decide", END)

graph = builder.compile(name="dka")

register(
    "dka", builder, DKAContext, method=METHOD,
    description="Direct knowledge assessment: one prompt, answer T or F.",
)
