"""DKA, direct knowledge assessment: one short prompt, the model answers T or F.

build_prompt -> ask_model -> decide. A fact that cannot be sent (a dirty triple) skips to
the end with an NA verdict; a failed model call becomes an NA verdict that keeps the error.
``build`` makes the graph for any DKA-like Context class, so a variant with another
prompt and parser (a chain-of-thought DKA, say) is a Context subclass and one
``register`` call.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, ClassVar, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from kgcheck.data.facts import FactInput, VerdictDict
from kgcheck.graphs import explain, verdicts
from kgcheck.graphs.calls import CallRecord, ask
from kgcheck.graphs.context import Context, bind, context_of
from kgcheck.graphs.prompting import PLACEHOLDERS, render_messages
from kgcheck.graphs.registry import AnyStateGraph, Strategy, register
from kgcheck.graphs.routing import then, unless_decided
from kgcheck.graphs.state import GraphInput, GraphOutput, read_fact

PROMPT_FIELDS = {"subject", "predicate", "object"}


@dataclass(kw_only=True)
class DKAContext(Context):
    """Settings of a DKA run."""

    METHOD: ClassVar[str] = "DKA"
    REPLAYS: ClassVar[str | None] = "DKA"
    ABSTAIN: ClassVar[dict[str, str]] = {"prompt": "dka-nei.txt", "parser": "strict-nei"}

    prompt: str = field(
        default="dka.txt",
        metadata={"description": "Prompt file in prompts/ or a path; needs {subject}, "
                  "{predicate}, {object}; may use {kg_note}, {fact}, {sentence}.",
                  PLACEHOLDERS: PROMPT_FIELDS},
    )


class DKAState(TypedDict):
    """A fact in, its verdict out; the conversation and calls in between."""

    fact: FactInput
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    calls: NotRequired[Annotated[list[CallRecord], operator.add]]
    verdict: NotRequired[VerdictDict]


async def build_prompt(state: DKAState, runtime: Runtime[DKAContext], *,
                       context: type[DKAContext] = DKAContext) -> dict:
    """Fill the prompt template with the fact, or end early on a dirty triple."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    if fact.defect:
        return {"verdict": verdicts.defect(fact, ctx.METHOD, ctx.model)}
    messages = await render_messages(ctx.prompt, PROMPT_FIELDS, fact)
    return {"messages": await explain.asking(messages, explain.Requests.of(ctx))}


async def ask_model(state: DKAState, runtime: Runtime[DKAContext], *,
                    context: type[DKAContext] = DKAContext) -> dict:
    """Send the conversation to the model; a failure becomes an NA verdict."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    try:
        reply = await ask(ctx, state["messages"], fact)
    except Exception as exc:  # noqa: BLE001 - any model failure is recorded, not raised
        return {"verdict": verdicts.failed(fact.id, ctx.METHOD, ctx.model, exc)}
    return {"messages": [reply.message], "calls": [reply.record()]}


async def decide(state: DKAState, runtime: Runtime[DKAContext], *,
                 context: type[DKAContext] = DKAContext) -> dict:
    """Read the answer with the context's parser: T, F, or NA with the reason."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    calls = state["calls"]
    requests = explain.Requests.of(ctx)
    read = explain.read_answer(ctx.parser, calls[-1]["text"], requests)
    reading = read.reading
    details = {"reason": reading.problem} if reading.problem else {}
    conversation = explain.turns(state["messages"]) if ctx.transcript else []
    extras = explain.verdict_fields(fact, read, calls, requests=requests,
                                    conversation=conversation)
    return {"verdict": verdicts.answered(fact, ctx.METHOD, ctx.model, reading.label, calls,
                                         extras=extras, **details)}


def build(context: type[DKAContext] = DKAContext) -> AnyStateGraph:
    """Build the DKA graph for ``context`` (DKAContext or a subclass of it)."""
    graph_builder = StateGraph(DKAState, context_schema=context, input_schema=GraphInput,
                               output_schema=GraphOutput)
    graph_builder.add_node("build_prompt", bind(build_prompt, context))
    graph_builder.add_node("ask_model", bind(ask_model, context))
    graph_builder.add_node("decide", bind(decide, context))
    graph_builder.add_edge(START, "build_prompt")
    graph_builder.add_conditional_edges("build_prompt", unless_decided, then("ask_model"))
    graph_builder.add_conditional_edges("ask_model", unless_decided, then("decide"))
    graph_builder.add_edge("decide", END)
    return graph_builder


STRATEGY = register(Strategy(
    "dka", DKAContext, build,
    description="Direct knowledge assessment: one prompt, answer T or F."))
builder = STRATEGY.builder
graph = builder.compile(name="dka")
