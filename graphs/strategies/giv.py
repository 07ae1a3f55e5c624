"""GIV, guided iterative verification: a structured prompt, re-asked until the answer complies.

build_prompt -> ask_model -> check -> decide (a clear T/F), or reprompt -> ask_model while
attempts remain (the follow-up tells the model its answer broke the guidelines and how many
attempts remain, as the next turn of the same conversation), or give_up (NA) once the
attempts cap in the Context is used up. GIV-Z (zero-shot) and GIV-F (few-shot: worked
examples in the KG's own vocabulary, read from ``prompts/examples/<kg>.json``) are one graph
built for two Context classes, registered as the strategies ``giv-z`` and ``giv-f``.
"""

from __future__ import annotations

import asyncio
import json
import operator
import random
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, NotRequired, cast

from langchain_core.messages import AnyMessage, BaseMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from kgcheck.data import safe_json
from kgcheck.data.facts import Fact, FactInput, VerdictDict, readable_term
from kgcheck.graphs import explain, verdicts
from kgcheck.graphs.calls import CallRecord, ask
from kgcheck.graphs.context import Context, bind, context_of
from kgcheck.graphs.prompting import PLACEHOLDERS, fill_messages, quote_term, render_messages
from kgcheck.graphs.registry import AnyStateGraph, Strategy, register
from kgcheck.graphs.routing import then, unless_decided
from kgcheck.graphs.state import GraphInput, GraphOutput, read_fact
from kgcheck.prompts import PROMPTS_DIR, PromptError, load_prompt, render

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
    """Settings of a GIV-Z run: the prompt files and the attempts cap."""

    METHOD: ClassVar[str] = "GIV-Z"
    REPLAYS: ClassVar[str | None] = "GIV-Z"
    ABSTAIN: ClassVar[dict[str, str]] = {"prompt": "giv-z-nei.txt",
                                         "retry_prompt": "giv-retry-nei.txt",
                                         "parser": "strict-nei"}
    # Whether the prompt carries worked examples: what makes GIV-F a strategy of its own.
    FEW_SHOT: ClassVar[bool] = False

    prompt: str = field(
        default="giv-z.txt",
        metadata={"description": "Prompt file in prompts/ or a path; needs {subject}, "
                  "{predicate}, {object}; may use {kg_note}, {max_attempts}, {fact}.",
                  PLACEHOLDERS: FACT_FIELDS},
    )
    retry_prompt: str = field(
        default="giv-retry.txt",
        metadata={"description": "Follow-up after a non-compliant answer: a prompt file with "
                  "{attempts_left} ('2 attempts remain'); may use {remaining} and the fact.",
                  PLACEHOLDERS: RETRY_FIELDS},
    )
    max_attempts: int = field(
        default=3,
        metadata={"description": f"Model calls per fact before the verdict is NA "
                  f"(1 to {MAX_ATTEMPTS_CAP}; the study: 3)."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or not (
            1 <= self.max_attempts <= MAX_ATTEMPTS_CAP
        ):
            raise GIVSettingError(
                f"max_attempts {self.max_attempts!r}: expected a whole number from 1 to "
                f"{MAX_ATTEMPTS_CAP}"
            )


@dataclass(kw_only=True)
class GIVFContext(GIVContext):
    """Settings of a GIV-F run: GIV-Z's, plus the worked examples and their order."""

    METHOD: ClassVar[str] = "GIV-F"
    REPLAYS: ClassVar[str | None] = "GIV-F"
    ABSTAIN: ClassVar[dict[str, str]] = {"prompt": "giv-f-nei.txt",
                                         "retry_prompt": "giv-retry-nei.txt",
                                         "parser": "strict-nei"}
    FEW_SHOT: ClassVar[bool] = True

    prompt: str = field(
        default="giv-f.txt",
        metadata={"description": "Prompt file in prompts/ or a path; needs {subject}, "
                  "{predicate}, {object}, {examples}; may use {kg_note}, {max_attempts}, "
                  "{fact}.", PLACEHOLDERS: FACT_FIELDS | {"examples"}},
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
                  "{predicate}, {object}, {answer}.", PLACEHOLDERS: EXAMPLE_FIELDS},
    )
    seed: int | None = field(
        default=None,
        metadata={"description": "Example order: empty = as in the file; a number = shuffled "
                  "per fact with this seed (reproducible)."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        # `--set seed=7` arrives as text, since the field's default gives no type to parse to.
        if isinstance(self.seed, str):
            text = self.seed.strip().lower()
            try:
                self.seed = None if text in ("", "none", "null") else int(text)
            except ValueError:
                raise GIVSettingError(f"seed {self.seed!r}: expected a whole number") from None


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


def examples_notice(facts: Iterable[Fact], ctx: GIVFContext) -> list[str]:
    """Say which KGs of a run have no worked examples of their own (the default ones serve)."""
    if ctx.examples:
        return []
    lacking = sorted(d for d in {f.dataset for f in facts}
                     if examples_path("", d).name == DEFAULT_EXAMPLES)
    if not lacking:
        return []
    return [f"giv-f: no worked examples in the vocabulary of {', '.join(lacking)} "
            f"(prompts/examples/<kg>.json); using the KG-independent ones ({DEFAULT_EXAMPLES}). "
            "Give your own with --set examples=FILE."]


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
        data = safe_json.parse(path.read_text(encoding="utf-8"))
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


def render_examples(ctx: GIVFContext, fact: Fact) -> tuple[str, str]:
    """Write the fact's KG examples with the example template; return them and the file name."""
    path = examples_path(ctx.examples, fact.dataset)
    template = load_prompt(ctx.example_prompt, EXAMPLE_FIELDS)
    blocks = [
        # Quoted as the fact to check is, so that the examples show the model its format.
        render(template, subject=quote_term(readable_term(ex.subject)),
               predicate=quote_term(readable_term(ex.predicate)),
               object=quote_term(readable_term(ex.object)), answer=ex.answer,
               raw_subject=quote_term(ex.subject), raw_predicate=quote_term(ex.predicate),
               raw_object=quote_term(ex.object))
        for ex in order_examples(load_examples(path), ctx.seed, fact.id)
    ]
    return "\n\n".join(block.strip() for block in blocks), path.name


def first_prompt(ctx: GIVContext, fact: Fact) -> tuple[list[BaseMessage], str | None]:
    """Fill the variant's prompt for a fact (blocking: reads files); also the examples file.

    The guidelines (and examples) are the system message, the fact the user message.
    """
    values: dict[str, Any] = {"max_attempts": ctx.max_attempts}
    examples_file = None
    required = set(FACT_FIELDS)
    if ctx.FEW_SHOT:
        values["examples"], examples_file = render_examples(cast(GIVFContext, ctx), fact)
        required.add("examples")
    return fill_messages(ctx.prompt, required, fact, **values), examples_file


def attempts_phrase(remaining: int) -> str:
    """Say how many attempts remain: ``2 attempts remain``, ``1 attempt remains``."""
    return f"{remaining} attempt remains" if remaining == 1 else f"{remaining} attempts remain"


async def build_prompt(state: GIVState, runtime: Runtime[GIVContext], *,
                       context: type[GIVContext] = GIVContext) -> dict:
    """Write the first turn: guidelines, retry rule, examples (GIV-F) and the fact."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    if fact.defect:
        return {"verdict": verdicts.defect(fact, ctx.METHOD, ctx.model)}
    # Prompt and example files are blocking I/O; the dev server forbids it on the event loop.
    messages, examples_file = await asyncio.to_thread(first_prompt, ctx, fact)
    messages = await explain.asking(messages, explain.Requests.of(ctx))
    update: dict[str, Any] = {"messages": messages, "attempts": 0}
    if examples_file:
        update["examples_file"] = examples_file
    return update


async def ask_model(state: GIVState, runtime: Runtime[GIVContext], *,
                    context: type[GIVContext] = GIVContext) -> dict:
    """Send the conversation so far; count the attempt; a failure becomes an NA verdict."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    attempt = state.get("attempts", 0) + 1
    try:
        reply = await ask(ctx, state["messages"], fact, kgcheck_attempt=attempt)
    except Exception as exc:  # noqa: BLE001 - any model failure is recorded, not raised
        # Keep what the model said before it failed.
        return {"verdict": verdicts.failed(fact.id, ctx.METHOD, ctx.model, exc,
                                           calls=state.get("calls", []),
                                           extras={"conversation": _conversation(state, ctx)})}
    return {"messages": [reply.message], "calls": [reply.record()], "attempts": attempt}


async def check(state: GIVState, runtime: Runtime[GIVContext], *,
                context: type[GIVContext] = GIVContext) -> dict:
    """Tell whether the last answer follows the guidelines (a clear T or F)."""
    ctx = context_of(runtime, context)
    reading = explain.read_answer(ctx.parser, state["calls"][-1]["text"],
                                  explain.Requests.of(ctx)).reading
    update: dict[str, Any] = {"compliant": reading.problem is None}
    if reading.problem:
        update["problems"] = [f"attempt {state['attempts']}: {reading.problem}"]
    return update


async def after_check(state: GIVState, runtime: Runtime[GIVContext], *,
                      context: type[GIVContext] = GIVContext,
                      ) -> Literal["compliant", "retry", "out of attempts"]:
    """Decide on a compliant answer; re-prompt while attempts remain; else give up."""
    if state["compliant"]:
        return "compliant"
    ctx = context_of(runtime, context)
    return "retry" if state["attempts"] < ctx.max_attempts else "out of attempts"


# The outcome names label the edges in the graph's picture.
AFTER_CHECK: dict[Hashable, str] = {"compliant": "decide", "retry": "reprompt",
                                    "out of attempts": "give_up"}


async def reprompt(state: GIVState, runtime: Runtime[GIVContext], *,
                   context: type[GIVContext] = GIVContext) -> dict:
    """Tell the model its answer broke the guidelines and how many attempts remain."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    remaining = ctx.max_attempts - state["attempts"]
    # A later turn of the conversation: one user message, whatever the file's parts.
    messages = await render_messages(ctx.retry_prompt, RETRY_FIELDS, fact, system=False,
                                     attempts_left=attempts_phrase(remaining),
                                     remaining=remaining, max_attempts=ctx.max_attempts)
    return {"messages": messages}


def _details(state: GIVState, ctx: GIVContext, compliant: bool) -> dict[str, Any]:
    details: dict[str, Any] = {"compliant": compliant, "max_attempts": ctx.max_attempts,
                               "few_shot": ctx.FEW_SHOT}
    if state.get("problems"):
        details["problems"] = state["problems"]
    if state.get("examples_file"):
        details["examples"] = state["examples_file"]
    return details


def _conversation(state: GIVState, ctx: GIVContext) -> list[dict[str, Any]]:
    # Every turn: the guidelines, the fact, each answer and each re-prompt.
    return explain.turns(state.get("messages", [])) if ctx.transcript else []


async def decide(state: GIVState, runtime: Runtime[GIVContext], *,
                 context: type[GIVContext] = GIVContext) -> dict:
    """Record the compliant answer's verdict with every attempt's raw answer."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    calls = state["calls"]
    requests = explain.Requests.of(ctx)
    read = explain.read_answer(ctx.parser, calls[-1]["text"], requests)
    extras = explain.verdict_fields(fact, read, calls, requests=requests,
                                    conversation=_conversation(state, ctx))
    return {"verdict": verdicts.answered(fact, ctx.METHOD, ctx.model, read.reading.label, calls,
                                         extras=extras, **_details(state, ctx, compliant=True))}


async def give_up(state: GIVState, runtime: Runtime[GIVContext], *,
                  context: type[GIVContext] = GIVContext) -> dict:
    """Record NA: no attempt gave a compliant answer."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    extras = {"conversation": _conversation(state, ctx)}
    return {"verdict": verdicts.answered(fact, ctx.METHOD, ctx.model, "NA", state["calls"],
                                         extras=extras, **_details(state, ctx, compliant=False))}


def build(context: type[GIVContext] = GIVContext) -> AnyStateGraph:
    """Build the GIV graph for ``context`` (GIVContext, GIVFContext or a subclass)."""
    graph_builder = StateGraph(GIVState, context_schema=context, input_schema=GraphInput,
                               output_schema=GraphOutput)
    graph_builder.add_node("build_prompt", bind(build_prompt, context))
    graph_builder.add_node("ask_model", bind(ask_model, context))
    graph_builder.add_node("check", bind(check, context))
    graph_builder.add_node("reprompt", bind(reprompt, context))
    graph_builder.add_node("decide", bind(decide, context))
    graph_builder.add_node("give_up", bind(give_up, context))
    graph_builder.add_edge(START, "build_prompt")
    graph_builder.add_conditional_edges("build_prompt", unless_decided, then("ask_model"))
    graph_builder.add_conditional_edges("ask_model", unless_decided, then("check"))
    graph_builder.add_conditional_edges("check", bind(after_check, context), AFTER_CHECK)
    graph_builder.add_edge("reprompt", "ask_model")
    graph_builder.add_edge("decide", END)
    graph_builder.add_edge("give_up", END)
    return graph_builder


GIV_Z = register(Strategy(
    "giv-z", GIVContext, build,
    description="Guided iterative verification, zero-shot: guidelines and a retry rule; "
    "re-asked until the answer is T or F (3 attempts, then NA)."))
GIV_F = register(Strategy(
    "giv-f", GIVFContext, build,
    description="Guided iterative verification, few-shot: GIV-Z plus six worked examples "
    "in the KG's vocabulary (prompts/examples/<kg>.json).", preflight=examples_notice))
builder = GIV_Z.builder
graph = builder.compile(name="giv-z")
