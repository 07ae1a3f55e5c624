"""The model calls of an error analysis, as a LangGraph graph: explain an error, then sort it.

One error (a wrong verdict) in; its explanation, and in taxonomy mode its category, out::

    START -> explain -> categorize -> END

``explain`` asks the model why its verdict was wrong (``prompts/errors_explain.txt``);
an error that already carries an explanation (one the verdict recorded, or one an
earlier, stopped analysis obtained) skips the call. ``categorize`` asks the model to put
the explanation into one category of the taxonomy prompt (``prompts/errors_taxonomy.txt``:
the study's E1-E6); it runs only in taxonomy mode. An answer naming no category is kept
as ``category: null`` with its raw text (counted apart, as an NA verdict is). A failed
call leaves the error unexplained with the reason; the analysis reports such errors and a
later run asks again.

``name_cluster`` is the one call of the optional naming by a model: a cluster's
keywords and a few of its explanations in, a short name out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NotRequired

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from kgcheck.data.facts import Fact
from kgcheck.graphs.calls import ask
from kgcheck.graphs.context import Context, bind, context_of
from kgcheck.graphs.prompting import (
    PLACEHOLDERS,
    clean_text,
    fence_untrusted,
    render_messages,
    split_template,
)
from kgcheck.graphs.registry import AnyStateGraph
from kgcheck.prompts import load_prompt, render

__all__ = ["ErrorCase", "ErrorsContext", "ExplainState", "build", "categories_of",
           "name_cluster", "read_category"]

EXPLAIN_FIELDS = {"subject", "predicate", "object", "verdict", "truth"}
TAXONOMY_FIELDS = {"explanation"}
NAME_FIELDS = {"keywords", "explanations"}
# "- E1 (Missing context): ..." in a taxonomy prompt file: a category's code and name.
CATEGORY_LINE = re.compile(r"^\s*-\s*([A-Za-z][A-Za-z0-9_-]*)\s*\(([^)]+)\)\s*:", re.M)


@dataclass(kw_only=True)
class ErrorsContext(Context):
    """Settings of an error analysis's model calls."""

    METHOD: ClassVar[str] = "ERRORS"
    REPLAYS: ClassVar[str | None] = None

    # One or two sentences, or one category code: no need for a verdict's long budget.
    max_tokens: int = field(
        default=160, metadata={"description": "Most tokens a reply may have."})
    explain_prompt: str = field(
        default="errors_explain.txt",
        metadata={"description": "Prompt asking why a verdict was wrong; needs {subject}, "
                  "{predicate}, {object}, {verdict}, {truth}; may use {answer}.",
                  PLACEHOLDERS: EXPLAIN_FIELDS})
    taxonomy_prompt: str = field(
        default="errors_taxonomy.txt",
        metadata={"description": "Prompt sorting an explanation into a category; needs "
                  "{explanation}; lists its categories as lines '- CODE (Name): ...'.",
                  PLACEHOLDERS: TAXONOMY_FIELDS})
    taxonomy: bool = field(
        default=False, metadata={"description": "Sort each explanation into a category."})


class ErrorCase(TypedDict):
    """One wrong verdict, as the graph gets it."""

    run: str
    fact_id: str
    dataset: str
    subject: str
    predicate: str
    object: str
    label: str
    truth: str
    raw: NotRequired[str | None]


class ExplainState(TypedDict):
    """An error in; its explanation (and category) out, with what the calls said."""

    error: ErrorCase
    explanation: NotRequired[str | None]
    explanation_source: NotRequired[str | None]
    category: NotRequired[str | None]
    category_raw: NotRequired[str | None]
    problem: NotRequired[str | None]
    seconds: NotRequired[float]


def categories_of(template: str) -> dict[str, str]:
    """Read a taxonomy prompt's categories: code -> name, in the file's order."""
    instructions, _ = split_template(template)
    return {code: name.strip() for code, name in CATEGORY_LINE.findall(instructions or template)}


def read_category(answer: str, codes: dict[str, str]) -> str | None:
    """Return the first category code the answer names (by code or by name), else None."""
    found: list[tuple[int, str]] = []
    for code, name in codes.items():
        for pattern in (rf"\b{re.escape(code)}\b", rf"\b{re.escape(name)}\b"):
            hit = re.search(pattern, answer, re.I)
            if hit:
                found.append((hit.start(), code))
    return min(found)[1] if found else None


def _fact(error: ErrorCase) -> Fact:
    return Fact(id=error["fact_id"], dataset=error.get("dataset") or "",
                subject=error["subject"], predicate=error["predicate"], object=error["object"])


async def explain(state: ExplainState, runtime: Runtime[ErrorsContext], *,
                  context: type[ErrorsContext] = ErrorsContext) -> dict[str, Any]:
    """Ask the model why its verdict was wrong (unless the error is explained already)."""
    if state.get("explanation"):
        return {}
    ctx = context_of(runtime, context)
    error = state["error"]
    fact = _fact(error)
    answer = error.get("raw") or ""
    messages = await render_messages(
        ctx.explain_prompt, EXPLAIN_FIELDS, fact, verdict=error["label"], truth=error["truth"],
        answer=fence_untrusted(answer, "your earlier answer") if answer else "")
    try:
        reply = await ask(ctx, messages, fact, step="explain_error")
    except Exception as exc:  # noqa: BLE001 - a failed call is reported, the rest goes on
        return {"explanation": None, "problem": f"{type(exc).__name__}: {exc}"}
    text = " ".join(reply.text.split())
    if not text:
        return {"explanation": None, "problem": "the model's explanation was empty"}
    return {"explanation": text, "explanation_source": "model", "seconds": reply.seconds}


async def after_explain(state: ExplainState, runtime: Runtime[ErrorsContext], *,
                        context: type[ErrorsContext] = ErrorsContext
                        ) -> Literal["categorize", "__end__"]:
    """Sort the explanation in taxonomy mode, when there is one and it is not sorted yet."""
    ctx = context_of(runtime, context)
    wanted = ctx.taxonomy and bool(state.get("explanation")) and not state.get("category")
    return "categorize" if wanted else "__end__"


async def categorize(state: ExplainState, runtime: Runtime[ErrorsContext], *,
                     context: type[ErrorsContext] = ErrorsContext) -> dict[str, Any]:
    """Ask the model which category of the taxonomy the explanation belongs to."""
    ctx = context_of(runtime, context)
    fact = _fact(state["error"])
    codes = categories_of(load_prompt(ctx.taxonomy_prompt, TAXONOMY_FIELDS))
    messages = await render_messages(
        ctx.taxonomy_prompt, TAXONOMY_FIELDS, fact,
        explanation=fence_untrusted(state.get("explanation") or "", "explanation"))
    try:
        reply = await ask(ctx, messages, fact, step="categorize_error")
    except Exception as exc:  # noqa: BLE001
        return {"category": None, "category_raw": None,
                "problem": f"{type(exc).__name__}: {exc}"}
    return {"category": read_category(reply.text, codes), "category_raw": reply.text}


def build(context: type[ErrorsContext] = ErrorsContext) -> AnyStateGraph:
    """Build the explain-and-sort graph for ``context``."""
    graph_builder = StateGraph(ExplainState, context_schema=context)
    graph_builder.add_node("explain", bind(explain, context))
    graph_builder.add_node("categorize", bind(categorize, context))
    graph_builder.add_edge(START, "explain")
    graph_builder.add_conditional_edges("explain", bind(after_explain, context),
                                        {"categorize": "categorize", END: END})
    graph_builder.add_edge("categorize", END)
    return graph_builder


builder = build()
graph = builder.compile(name="explain_errors")


async def name_cluster(ctx: ErrorsContext, keywords: list[str], explanations: list[str],
                       prompt: str = "errors_cluster_name.txt") -> str | None:
    """Ask the model for a short name of one cluster (None when the call fails)."""
    instructions, data = split_template(load_prompt(prompt, NAME_FIELDS))
    values = {"keywords": ", ".join(clean_text(k) for k in keywords),
              "explanations": fence_untrusted("\n".join(f"- {e}" for e in explanations),
                                              "explanations")}
    messages = [SystemMessage(render(instructions, **values).strip()),
                HumanMessage(render(data, **values).strip())]
    fact = Fact(id="cluster", dataset="", subject="-", predicate="-", object="-")
    try:
        reply = await ask(ctx, messages, fact, step="name_cluster")
    except Exception:  # noqa: BLE001 - the keywords stay the cluster's name
        return None
    name = " ".join(reply.text.split()).strip(" .\"'")
    return name[:80] or None
