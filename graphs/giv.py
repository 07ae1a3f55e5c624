"""GIV, guided iterative verification: a structured prompt, re-asked until the answer complies.

build_prompt -> ask_model -> check -> decide (a clear T/F), or reprompt -> ask_model while
attempts remain (the follow-up tells the model its answer broke the guidelines and how many
attempts remain, as the next turn of the same conversation), or give_up (NA) once the
attempts cap in the Context is used up. GIV-Z (zero-shot) and GIV-F (few-shot: worked
examples in the KG's own vocabulary, read from ``prompts/examples/<kg>.json``) are one graph;
``few_shot`` in the Context picks the variant.
"""

from __future__ import annotations

import asyncio
import json
import operator
import random
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, cast

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
    prompt_values,
)
from graphs.context import Context, context_of
from graphs.parsing import read_verdict
from graphs.registry import register
from graphs.state import Fact, FactInput, VerdictDict, fact_from_input, readable_term
from prompts import PROMPTS_DIR, PromptError, load_prompt, render

ZERO_SHOT = "GIV-Z"
FEW_SHOT = "GIV-F"
PROMPTS = {ZERO_SHOT: "giv-z.txt", FEW_SHOT: "giv-f.txt"}
FACT_FIELDS = {"subject", "predicate", "object"}
EXAMPLE_FIELDS = FACT_FIELDS | {"answer"}
RETRY_FIELDS = {"attempts_left"}
EXAMPLES_DIR = PROMPTS_DIR / "examples"
DEFAULT_EXAMPLES = "default.json"
# Each attempt costs up to three graph steps (ask, check, reprompt); ten attempts stay well
# inside the recursion limit a batch run passes (50).
MAX_ATTEMPTS_CAP = 10


class GIVSettingError(ValueError):
    """A GIV setting in the Context has a value the graph cannot use."""


@dataclass(kw_only=True)
class GIVContext(Context):
    """Settings of a GIV run: prompt files, the few-shot switch, the attempts cap."""

    prompt: str = field(
        default="",
        metadata={"description": "Prompt file in prompts/ or a path; empty = giv-f.txt with "
                  "few_shot, else giv-z.txt. Needs {subject}, {predicate}, {object} (and "
                  "{examples} with few_shot); may use {kg_note}, {max_attempts}, {fact}."},
    )
    few_shot: bool = field(
        default=False,
        metadata={"description": "GIV-F: put worked examples in the prompt (off = GIV-Z)."},
    )
    examples: str = field(
        default="",
        metadata={"description": "Few-shot examples (JSON) in prompts/examples/ or a path; "
                  "empty = the file named after the fact's KG (yago.json, ...), else "
                  "default.json."},
    )
    example_prompt: str = field(
        default="giv-example.txt",
        metadata={"description": "How one example is written: a prompt file with {subject}, "
                  "{predicate}, {object}, {answer}."},
    )
    retry_prompt: str = field(
        default="giv-retry.txt",
        metadata={"description": "Follow-up after a non-compliant answer: a prompt file with "
                  "{attempts_left} ('2 attempts remain'); may use {remaining} and the fact."},
    )
    max_attempts: int = field(
        default=3,
        metadata={"description": f"Model calls per fact before the verdict is NA "
                  f"(1 to {MAX_ATTEMPTS_CAP}; the study: 3)."},
    )
    seed: int | None = field(
        default=None,
        metadata={"description": "Example order: empty = as in the file; a number = shuffled "
                  "per fact with this seed (reproducible)."},
    )

    def __post_init__(self) -> None:
        # `--set seed=7` arrives as text, since the field's default gives no type to parse to.
        if isinstance(self.seed, str):
            text = self.seed.strip().lower()
            try:
                self.seed = None if text in ("", "none", "null") else int(text)
            except ValueError:
                raise GIVSettingError(f"seed {self.seed!r}: expected a whole number") from None
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or not (
            1 <= self.max_attempts <= MAX_ATTEMPTS_CAP
        ):
            raise GIVSettingError(
                f"max_attempts {self.max_attempts!r}: expected a whole number from 1 to "
                f"{MAX_ATTEMPTS_CAP}"
            )


def method_of(ctx: GIVContext) -> str:
    """Name the variant a context runs, as the study does: GIV-F (few-shot) or GIV-Z."""
    return FEW_SHOT if ctx.few_shot else ZERO_SHOT


class GIVState(TypedDict):
    """A fact in, its verdict out; the conversation, the calls and the attempt count between."""

    fact: FactInput
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    calls: NotRequired[Annotated[list[CallRecord], operator.add]]
    attempts: NotRequired[int]
    compliant: NotRequired[bool]
    problems: NotRequired[Annotated[list[str], operator.add]]
    examples_file: NotRequired[str]
    verdict: NotRequired[VerdictDict]


@dataclass(frozen=True)
class Example:
    """One worked example: a fact and the answer it should get."""

    subject: str
    predicate: str
    object: str
    answer: Literal["T", "F"]


def examples_path(name: str, dataset: str) -> Path:
    """Pick the examples file: the one named, else the KG's own (any case), else the default."""
    if name:
        for candidate in (Path(name).expanduser(), EXAMPLES_DIR / name):
            if candidate.is_file():
                return candidate.resolve()
        known = ", ".join(sorted(p.name for p in EXAMPLES_DIR.glob("*.json")))
        raise PromptError(
            f"examples file {name!r} not found (not a path, not in prompts/examples/: {known})"
        )
    wanted = f"{dataset.lower()}.json"
    for path in sorted(EXAMPLES_DIR.glob("*.json")):
        if path.name.lower() == wanted:
            return path
    return EXAMPLES_DIR / DEFAULT_EXAMPLES


def load_examples(path: Path) -> list[Example]:
    """Read and check an examples file: a list (or ``{"examples": [...]}``) of facts."""
    try:
        stamp = path.stat().st_mtime_ns
    except OSError as exc:
        raise PromptError(f"{path}: cannot read the examples file ({exc.strerror})") from None
    return list(_parse_examples(path, stamp))


@cache
def _parse_examples(path: Path, stamp: int) -> tuple[Example, ...]:
    # `stamp` (the file's mtime) is part of the cache key so that an edited file is re-read.
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PromptError(f"{path}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
    rows = data.get("examples") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not rows:
        raise PromptError(f"{path}: expected a non-empty list of examples (or "
                          '{"examples": [...]})')
    examples = []
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise PromptError(f"{path}: example {n} is not an object")
        missing = [k for k in ("subject", "predicate", "object", "answer")
                   if not str(row.get(k) or "").strip()]
        if missing:
            raise PromptError(f"{path}: example {n} lacks {', '.join(missing)}")
        answer = str(row["answer"]).strip().upper()
        if answer not in ("T", "F"):
            raise PromptError(f"{path}: example {n} has answer {row['answer']!r}; expected T or F")
        examples.append(Example(str(row["subject"]), str(row["predicate"]),
                                str(row["object"]), cast(Literal["T", "F"], answer)))
    return tuple(examples)


def order_examples(examples: list[Example], seed: int | None, fact_id: str) -> list[Example]:
    """Keep the file's order, or shuffle with ``seed`` (a different, reproducible order per fact).

    Upstream shuffled the examples for every prompt without a seed; seeding with the fact id
    keeps that variety while making each prompt reproducible.
    """
    if seed is None:
        return list(examples)
    shuffled = list(examples)
    random.Random(f"{seed}:{fact_id}").shuffle(shuffled)
    return shuffled


def render_examples(ctx: GIVContext, fact: Fact) -> tuple[str, str]:
    """Write the fact's KG examples with the example template; return them and the file name."""
    path = examples_path(ctx.examples, fact.dataset)
    template = load_prompt(ctx.example_prompt, EXAMPLE_FIELDS)
    blocks = [
        render(template, subject=readable_term(ex.subject), predicate=readable_term(ex.predicate),
               object=readable_term(ex.object), answer=ex.answer,
               raw_subject=ex.subject, raw_predicate=ex.predicate, raw_object=ex.object)
        for ex in order_examples(load_examples(path), ctx.seed, fact.id)
    ]
    return "\n\n".join(block.strip() for block in blocks), path.name


def _tidy(text: str) -> str:
    # An empty optional placeholder ({kg_note} outside DBpedia) would leave a gap of blank lines.
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def first_prompt(ctx: GIVContext, fact: Fact) -> tuple[str, str | None]:
    """Fill the variant's prompt for a fact (blocking: reads files); also the examples file."""
    name = ctx.prompt or PROMPTS[method_of(ctx)]
    required = FACT_FIELDS | ({"examples"} if ctx.few_shot else set())
    template = load_prompt(name, required)
    values: dict[str, Any] = {**prompt_values(fact), "max_attempts": ctx.max_attempts}
    examples_file = None
    if ctx.few_shot:
        values["examples"], examples_file = render_examples(ctx, fact)
    return _tidy(render(template, **values)), examples_file


def attempts_phrase(remaining: int) -> str:
    """Say how many attempts remain: ``2 attempts remain``, ``1 attempt remains``."""
    return f"{remaining} attempt remains" if remaining == 1 else f"{remaining} attempts remain"


def retry_prompt(ctx: GIVContext, fact: Fact, remaining: int) -> str:
    """Fill the follow-up after a non-compliant answer (blocking: reads the file)."""
    template = load_prompt(ctx.retry_prompt, RETRY_FIELDS)
    values = {**prompt_values(fact), "attempts_left": attempts_phrase(remaining),
              "remaining": remaining, "max_attempts": ctx.max_attempts}
    return _tidy(render(template, **values))


async def build_prompt(state: GIVState, runtime: Runtime[GIVContext]) -> dict:
    """Write the first turn: guidelines, retry rule, examples (GIV-F) and the fact."""
    ctx = context_of(runtime, GIVContext)
    fact = fact_from_input(state["fact"])
    if fact.defect:
        return {"verdict": defect_verdict(fact, method_of(ctx), ctx.model)}
    # Prompt and example files are blocking I/O; the dev server forbids it on the event loop.
    text, examples_file = await asyncio.to_thread(first_prompt, ctx, fact)
    update: dict[str, Any] = {"messages": [HumanMessage(text)], "attempts": 0}
    if examples_file:
        update["examples_file"] = examples_file
    return update


def after_prompt(state: GIVState) -> Literal["ask_model", "__end__"]:
    """Skip the model when the fact already has a verdict (a dirty triple)."""
    # The literal, not END (typed plain str), so the return matches the Literal annotation.
    return "__end__" if "verdict" in state else "ask_model"


async def ask_model(state: GIVState, runtime: Runtime[GIVContext]) -> dict:
    """Send the conversation so far; count the attempt; a failure becomes an NA verdict."""
    ctx = context_of(runtime, GIVContext)
    fact = fact_from_input(state["fact"])
    calls = state.get("calls", [])
    attempt = state.get("attempts", 0) + 1
    try:
        reply = await ask(model_for(ctx), state["messages"], fact, method_of(ctx),
                          kgcheck_attempt=attempt)
    except Exception as exc:  # noqa: BLE001 - any model failure is recorded, not raised
        earlier: dict[str, Any] = {}
        if calls:
            # Keep what the model said before it failed.
            earlier = {"raw": calls[-1]["text"], "raws": [c["text"] for c in calls],
                       "attempts": len(calls), "seconds": sum(c["seconds"] for c in calls)}
        return {"verdict": error_verdict(fact, method_of(ctx), ctx.model, exc, **earlier)}
    return {"messages": [reply.message], "calls": [reply.record()], "attempts": attempt}


def after_ask(state: GIVState) -> Literal["check", "__end__"]:
    """End when the call failed; otherwise check the answer."""
    return "__end__" if "verdict" in state else "check"


async def check(state: GIVState) -> dict:
    """Tell whether the last answer follows the guidelines (a clear T or F)."""
    reading = read_verdict(state["calls"][-1]["text"])
    update: dict[str, Any] = {"compliant": reading.problem is None}
    if reading.problem:
        update["problems"] = [f"attempt {state['attempts']}: {reading.problem}"]
    return update


def after_check(state: GIVState,
                runtime: Runtime[GIVContext]) -> Literal["decide", "reprompt", "give_up"]:
    """Decide on a compliant answer; re-prompt while attempts remain; else give up."""
    if state["compliant"]:
        return "decide"
    ctx = context_of(runtime, GIVContext)
    return "reprompt" if state["attempts"] < ctx.max_attempts else "give_up"


async def reprompt(state: GIVState, runtime: Runtime[GIVContext]) -> dict:
    """Tell the model its answer broke the guidelines and how many attempts remain."""
    ctx = context_of(runtime, GIVContext)
    fact = fact_from_input(state["fact"])
    remaining = ctx.max_attempts - state["attempts"]
    text = await asyncio.to_thread(retry_prompt, ctx, fact, remaining)
    return {"messages": [HumanMessage(text)]}


def _details(state: GIVState, ctx: GIVContext, compliant: bool) -> dict[str, Any]:
    details: dict[str, Any] = {"compliant": compliant, "max_attempts": ctx.max_attempts,
                               "few_shot": ctx.few_shot}
    if state.get("problems"):
        details["problems"] = state["problems"]
    if state.get("examples_file"):
        details["examples"] = state["examples_file"]
    return details


async def decide(state: GIVState, runtime: Runtime[GIVContext]) -> dict:
    """Record the compliant answer's verdict with every attempt's raw answer."""
    ctx = context_of(runtime, GIVContext)
    fact = fact_from_input(state["fact"])
    calls = state["calls"]
    label = read_verdict(calls[-1]["text"]).label
    return {"verdict": answered_verdict(fact, method_of(ctx), ctx.model, label, calls,
                                        **_details(state, ctx, compliant=True))}


async def give_up(state: GIVState, runtime: Runtime[GIVContext]) -> dict:
    """Record NA: no attempt gave a compliant answer."""
    ctx = context_of(runtime, GIVContext)
    fact = fact_from_input(state["fact"])
    return {"verdict": answered_verdict(fact, method_of(ctx), ctx.model, "NA", state["calls"],
                                        **_details(state, ctx, compliant=False))}


builder = StateGraph(GIVState, context_schema=GIVContext)
builder.add_node("build_prompt", build_prompt)
builder.add_node("ask_model", ask_model)
builder.add_node("check", check)
builder.add_node("reprompt", reprompt)
builder.add_node("decide", decide)
builder.add_node("give_up", give_up)
builder.add_edge(START, "build_prompt")
builder.add_conditional_edges("build_prompt", after_prompt)
builder.add_conditional_edges("ask_model", after_ask)
builder.add_conditional_edges("check", after_check)
builder.add_edge("reprompt", "ask_model")
builder.add_edge("decide", END)
builder.add_edge("give_up", END)

graph = builder.compile(name="giv")

register(
    "giv-z", builder, GIVContext, method=ZERO_SHOT,
    description="Guided iterative verification, zero-shot: guidelines and a retry rule; "
    "re-asked until the answer is T or F (3 attempts, then NA).",
    few_shot=False, prompt=PROMPTS[ZERO_SHOT],
)
register(
    "giv-f", builder, GIVContext, method=FEW_SHOT,
    description="Guided iterative verification, few-shot: GIV-Z plus six worked examples "
    "in the KG's vocabulary (prompts/examples/<kg>.json).",
    few_shot=True, prompt=PROMPTS[FEW_SHOT],
)
