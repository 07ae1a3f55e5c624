"""Review: a person confirms or overturns a verdict; the graph pauses until they answer.

``{"fact": ..., "verdict": ...}`` in (a verdict record as a run writes it): ``ask_person``
calls ``interrupt()`` with what a person needs to decide (the triple and its readable text,
the model's label and raw answer, the evidence with its sources, the votes of a consensus)
and waits. Resuming with ``Command(resume={"label": "T" | "F" | "skip", "note": "..."})``
gives ``{"verdict": {..., "review": {"label", "note", "reviewer", "reviewed_at"}}}``. A
malformed answer does not fail the run: the question is asked again, saying what was wrong.

It is registered with ``kind="review"``: Studio serves it (a person sees the pause there and
resumes it), ``kgcheck review`` drives it with a SQLite checkpointer, and ``kgcheck run``
refuses it as a method.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict

from kgcheck.data.facts import FactInput, VerdictDict
from kgcheck.data.runfolder import VERDICT_LABELS
from kgcheck.graphs.context import Context, bind, context_of
from kgcheck.graphs.explain import value_problem
from kgcheck.graphs.registry import AnyStateGraph, Strategy, register
from kgcheck.graphs.state import read_fact

Decision = Literal["T", "F", "skip"]
DECISIONS: tuple[Decision, ...] = ("T", "F", "skip")
ANSWER_SHAPE = ('{"label": "T" | "F" | "skip", "note": "... (optional)", "correction": '
                '"accept" | "edit" | "reject" (optional), "corrected_value": "... (for edit)"}')
# A note is for a sentence or two; a pasted page is cut rather than stored whole.
MAX_NOTE_CHARS = 2_000


@dataclass(kw_only=True)
class ReviewContext(Context):
    """Settings of a review: who is reviewing (the model settings are not used)."""

    METHOD: ClassVar[str] = "REVIEW"

    reviewer: str = field(
        default="",
        metadata={"description": "Who reviews (a name or e-mail), kept with each decision; "
                  "an answer may name its own reviewer instead."},
    )


class ReviewInput(TypedDict):
    """A fact and the verdict a run gave it."""

    fact: FactInput
    verdict: VerdictDict


class CorrectionDecision(TypedDict):
    """What a person did with a suggested correction, and the value they accepted."""

    decision: Literal["accept", "edit", "reject"]
    part: str
    value: str | None


class Review(TypedDict):
    """A person's decision on a verdict."""

    label: Decision
    note: str
    reviewer: str | None
    reviewed_at: str
    correction: NotRequired[CorrectionDecision | None]


class ReviewOutput(TypedDict):
    """The verdict, with the person's ``review`` added."""

    verdict: dict[str, Any]


class ReviewState(TypedDict):
    """The fact and verdict in; the question asked, then the reviewed verdict out."""

    fact: FactInput
    verdict: dict[str, Any]
    question: NotRequired[dict[str, Any]]


class MalformedAnswer(ValueError):
    """A resume value that is not a decision; the message says what is expected."""


def _sentence_of(chunk_id: Any) -> int | None:
    """Return the sentence index of a chunk id (``<doc id>#<index>``), if it has one."""
    _, sep, index = str(chunk_id).rpartition("#")
    return int(index) if sep and index.isdigit() else None


def _joined(first: str, second: str, *, adjacent: bool) -> str | None:
    """Join two windows of one document (None: the texts do not overlap as they should).

    Windows are sentences joined by spaces: an overlap starts and ends at a space, and
    windows that only touch are joined by one.
    """
    if adjacent:
        return f"{first} {second}"
    if second in first:
        return first
    if second.startswith(first):  # the first window was cut short by the document's start
        return second
    for size in range(min(len(first), len(second)) - 1, 1, -1):
        if first.endswith(second[:size]) and first[-size - 1] == " " and second[size] == " ":
            return first + second[size:]
    return None


def _evidence(details: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Lay out the evidence passages, one per stretch of a document.

    Each chunk is a sentence with ``window`` sentences on each side, so chunks a few
    sentences apart in one document repeat the same text: overlapping windows are shown
    once, merged, with the best similarity among them.
    """
    urls = {str(d.get("doc_id")): d.get("url") for d in details.get("documents") or []
            if isinstance(d, Mapping)}
    window = (details.get("retrieval") or {}).get("window")
    reach = int(window) if isinstance(window, int) and window >= 0 else None
    out: list[dict[str, Any]] = []
    last: dict[str, dict[str, Any]] = {}
    chunks = [c for c in details.get("evidence") or [] if isinstance(c, Mapping)]
    # By document and place in it, so that neighbouring windows meet.
    order = sorted(range(len(chunks)), key=lambda i: (
        str(chunks[i].get("doc_id", "")), _sentence_of(chunks[i].get("chunk_id")) or 0, i))
    for i in order:
        chunk = chunks[i]
        doc = str(chunk.get("doc_id", ""))
        text = str(chunk.get("text", ""))
        index = _sentence_of(chunk.get("chunk_id"))
        previous = last.get(doc)
        if previous is not None and reach is not None and index is not None and \
                previous["last"] is not None and index - reach <= previous["last"] + reach + 1:
            merged = _joined(previous["text"], text,
                             adjacent=index - reach == previous["last"] + reach + 1)
            if merged is not None:
                previous["text"] = merged
                previous["last"] = index
                previous["passages"] += 1
                similarity = chunk.get("similarity")
                if similarity is not None and (previous["similarity"] is None
                                               or similarity > previous["similarity"]):
                    previous["similarity"] = similarity
                continue
        item = {"source": chunk.get("url") or urls.get(doc) or doc, "doc_id": doc,
                "similarity": chunk.get("similarity"), "text": text, "passages": 1,
                "first": i, "last": index}
        out.append(item)
        last[doc] = item
    # Best first, as retrieval ranked them.
    out.sort(key=lambda e: (-(e["similarity"] or 0.0), e["first"]))
    return [{k: v for k, v in e.items() if k not in ("first", "last")} for e in out]


XSD = "http://www.w3.org/2001/XMLSchema#"
_LITERAL = re.compile(r'^"(?P<value>.*)"(?:@(?P<lang>[A-Za-z0-9-]+)|\^\^<(?P<type>[^>]+)>)?$',
                      re.DOTALL)


def _shown(raw: str, readable: str, term: str | None, named: bool) -> str:
    """Render a term for a person: a blank node as such, a literal with its datatype."""
    if raw.startswith("_:") and not named:
        return f"a blank node ({raw})"
    found = _LITERAL.match(term or "")
    if found and found.group("type") and found.group("type") != XSD + "string":
        datatype = found.group("type")
        short = "xsd:" + datatype[len(XSD):] if datatype.startswith(XSD) else datatype
        return f"{readable} ({short})"
    if found and found.group("lang"):
        return f"{readable} (@{found.group('lang')})"
    return readable


def _judge(details: Mapping[str, Any]) -> dict[str, Any] | None:
    """Name the judge of a consensus tie and what it answered, when it was asked."""
    if not details.get("judge_called"):
        return None
    return {"model": details.get("judge"), "label": details.get("judge_label") or "NA",
            "decided": bool(details.get("judge_decided")), "raw": details.get("judge_raw"),
            "error": details.get("judge_error")}


def _votes(details: Mapping[str, Any]) -> list[dict[str, Any]]:
    votes = details.get("votes")
    if isinstance(votes, list):
        return [{"model": v.get("model"), "label": v.get("label"), "raw": v.get("raw")}
                for v in votes if isinstance(v, Mapping)]
    if isinstance(votes, Mapping):  # self-consistency keeps counts, not voters
        return [{"model": f"{n} samples", "label": label, "raw": None}
                for label, n in votes.items()]
    return []


def is_tie(verdict: Mapping[str, Any]) -> bool:
    """Tell whether the verdict's voters split evenly (consensus or self-consistency)."""
    details = verdict.get("details") or {}
    return bool(details.get("tie")) or details.get("decision") == "tie"


def question_for(fact_input: FactInput, verdict: Mapping[str, Any]) -> dict[str, Any]:
    """Lay out what a person needs to decide on one verdict."""
    fact = read_fact({"fact": fact_input})
    details = verdict.get("details") or {}
    names = fact.names or {}
    # A run's record keeps the RDF terms of a fact read from RDF (datatype, language).
    given = verdict.get("rdf")
    terms = dict(given) if isinstance(given, Mapping) else (fact.rdf or {})
    subject, predicate, obj = (
        _shown(raw, readable, terms.get(key), key in names)
        for key, raw, readable in zip(("subject", "predicate", "object"),
                                      (fact.subject, fact.predicate, fact.object),
                                      fact.readable_terms(), strict=True))
    return {
        "fact": {"id": fact.id, "dataset": fact.dataset, "subject": fact.subject,
                 "predicate": fact.predicate, "object": fact.object,
                 # The RDF terms as given (datatype and language included), when from RDF.
                 "terms": dict(terms),
                 "readable": {"subject": subject, "predicate": predicate, "object": obj,
                              "text": " ".join((subject, predicate, obj))},
                 "sentence": fact.sentence or details.get("sentence")},
        "model": {"label": verdict.get("label", "NA"), "method": verdict.get("method"),
                  "model": verdict.get("model"), "raw": verdict.get("raw"),
                  "error": verdict.get("error")},
        "explanation": {"confidence": verdict.get("confidence"),
                        "confidence_source": verdict.get("confidence_source"),
                        "rationale": verdict.get("rationale"),
                        "problems": list(verdict.get("answer_problems") or [])},
        "citations": list(verdict.get("citations") or []),
        "suggestion": verdict.get("correction"),
        "conversation": list(verdict.get("conversation") or []),
        "evidence": _evidence(details),
        "votes": _votes(details),
        "tie": is_tie(verdict),
        "judge": _judge(details),
        "answer_with": ANSWER_SHAPE,
        "problem": None,
    }


class Answer(TypedDict):
    """A valid resume value, read."""

    label: Decision
    note: str
    reviewer: str | None
    reviewed_at: str | None
    correction: NotRequired[CorrectionDecision | None]


def read_correction(value: Mapping[str, Any],
                    suggestion: Mapping[str, Any] | None) -> CorrectionDecision | None:
    """Read what the person did with the suggested correction (None: nothing)."""
    decision = str(value.get("correction") or "").strip().lower()
    if not decision:
        return None
    if decision not in ("accept", "edit", "reject"):
        raise MalformedAnswer(f"correction {decision!r:.40} is not accept, edit or reject")
    if not suggestion:
        raise MalformedAnswer("correction: the verdict suggests no correction to decide on")
    part = str(suggestion.get("part") or "")
    if decision == "reject":
        return CorrectionDecision(decision="reject", part=part, value=None)
    chosen = (str(value.get("corrected_value") or "").strip() if decision == "edit"
              else str(suggestion.get("value") or ""))
    problem = value_problem(chosen)
    if problem:
        raise MalformedAnswer(f"corrected value {chosen!r:.60} is not a valid term: {problem}")
    return CorrectionDecision(decision="edit" if decision == "edit" else "accept", part=part,
                              value=chosen)


def read_answer(value: Any, suggestion: Mapping[str, Any] | None = None) -> Answer:
    """Read a resume value; raise MalformedAnswer if it is not a decision.

    A bare ``"T"`` / ``"F"`` / ``"skip"`` is accepted too (what a person types in Studio).
    ``reviewed_at`` (ISO 8601) may carry the time of a decision made earlier, when one is
    restored from a labels file.
    """
    if isinstance(value, str):
        value = {"label": value}
    if not isinstance(value, Mapping):
        raise MalformedAnswer(f"expected {ANSWER_SHAPE}, got {value!r:.80}")
    raw_label = value.get("label")
    label = str(raw_label).strip() if raw_label is not None else ""
    label = {"t": "T", "f": "F", "skip": "skip", "s": "skip"}.get(label.lower(), label)
    if label not in DECISIONS:
        raise MalformedAnswer(f"label {raw_label!r} is not one of T, F, skip; answer with "
                              f"{ANSWER_SHAPE}")
    note = value.get("note") or ""
    if not isinstance(note, str):
        raise MalformedAnswer(f"note must be text, got {note!r:.80}")
    reviewer = value.get("reviewer")
    if reviewer is not None and not isinstance(reviewer, str):
        raise MalformedAnswer(f"reviewer must be text, got {reviewer!r:.80}")
    when = value.get("reviewed_at")
    if when is not None:
        try:
            datetime.fromisoformat(str(when))
        except ValueError:
            raise MalformedAnswer(f"reviewed_at {when!r:.40} is not an ISO 8601 time") from None
    return Answer(label=label, note=note.strip()[:MAX_NOTE_CHARS],
                  reviewer=(reviewer or "").strip() or None,
                  reviewed_at=str(when) if when else None,
                  correction=read_correction(value, suggestion))


def now() -> str:
    """Return the current UTC time as ISO 8601, to the millisecond (decisions sort by it)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


async def prepare(state: ReviewState) -> dict[str, Any]:
    """Check the input and lay out the question once, before the pause."""
    verdict = state.get("verdict")
    if not isinstance(verdict, Mapping) or verdict.get("label") not in VERDICT_LABELS:
        raise MalformedAnswer('the review graph takes {"fact": {...}, "verdict": {...}} with '
                              'the verdict a run wrote (its "label" T, F, NA or NEI)')
    return {"question": question_for(state["fact"], verdict)}


async def ask_person(state: ReviewState, runtime: Runtime[ReviewContext], *,
                     context: type[ReviewContext] = ReviewContext) -> dict[str, Any]:
    """Pause for the person's decision; ask again, saying why, until it is a valid one."""
    ctx = context_of(runtime, context)
    question = dict(state["question"])
    while True:
        # On resume the node runs again from the top: earlier answers replay in order.
        answer = interrupt(question)
        try:
            read = read_answer(answer, state["verdict"].get("correction"))
        except MalformedAnswer as exc:
            question = {**question, "problem": str(exc)}
            continue
        break
    review = Review(label=read["label"], note=read["note"],
                    reviewer=read["reviewer"] or ctx.reviewer or None,
                    reviewed_at=read["reviewed_at"] or now(),
                    correction=read.get("correction"))
    return {"verdict": {**state["verdict"], "review": review}}


def build(context: type[ReviewContext] = ReviewContext) -> AnyStateGraph:
    """Build the review graph: prepare -> ask_person (interrupts) -> END."""
    builder = StateGraph(ReviewState, context_schema=context, input_schema=ReviewInput,
                         output_schema=ReviewOutput)
    builder.add_node("prepare", prepare)
    builder.add_node("ask_person", bind(ask_person, context))
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "ask_person")
    builder.add_edge("ask_person", END)
    return builder


strategy = register(Strategy(
    "review", ReviewContext, build, kind="review",
    description="Human review: pauses with the fact, the model's answer and its evidence; "
                'resume with {"label": "T" | "F" | "skip", "note": "...", "correction": '
                '"accept" | "edit" | "reject", "corrected_value": "..."}.'))
