"""Pieces every strategy graph uses: prompt values for a fact, model calls, verdicts."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from graphs.calls import CallRecord, ModelReply, ask
from graphs.context import Context
from graphs.models import ChatRunnable, ModelOptions, resolve_model
from graphs.state import Fact, Label, Verdict, VerdictDict
from prompts import is_loaded, kg_note, load_prompt, render


def prompt_values(fact: Fact) -> dict[str, Any]:
    """Values a prompt template may use: raw and readable terms, the KG's note."""
    subject, predicate, obj = fact.readable_terms()
    return {
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "fact": f"{subject} {predicate} {obj}",
        "raw_subject": fact.subject,
        "raw_predicate": fact.predicate,
        "raw_object": fact.object,
        "dataset": fact.dataset,
        "sentence": fact.sentence or "",
        "kg_note": kg_note(fact.dataset),
    }


async def render_prompt(name: str, required: set[str], fact: Fact, **extra: Any) -> str:
    """Fill the prompt file ``name`` with a fact's values (and ``extra``).

    The first use of a file reads it in a worker thread (the dev server forbids blocking
    I/O on the event loop); later uses are served from memory without a thread hop.
    """
    if is_loaded(name):
        template = load_prompt(name, required)
    else:
        template = await asyncio.to_thread(load_prompt, name, required)
    return render(template, **{**prompt_values(fact), **extra})


def model_for(ctx: Context, spec: str | None = None) -> ChatRunnable:
    """Resolve the context's model (or ``spec``) with the context's sampling options."""
    return resolve_model(spec or ctx.model, ModelOptions.from_context(ctx))


def defect_verdict(fact: Fact, method: str, model: str) -> VerdictDict:
    """Return the NA verdict of a fact that cannot be sent to a model (a dirty triple)."""
    return cast(VerdictDict, Verdict(
        fact_id=fact.id, label="NA", method=method, model=model,
        error=f"invalid fact {fact.id!r}: {fact.defect}",
        details={"error_type": "InvalidFact"},
    ).model_dump())


def error_verdict(fact: Fact, method: str, model: str, exc: BaseException,
                  **fields: Any) -> VerdictDict:
    """Return the NA verdict of a fact whose model call failed, keeping the error."""
    return cast(VerdictDict, Verdict(
        fact_id=fact.id, label="NA", method=method, model=model,
        error=f"{type(exc).__name__}: {exc}",
        details={"error_type": type(exc).__name__}, **fields,
    ).model_dump())


def answered_verdict(fact: Fact, method: str, model: str, label: Label,
                     calls: list[CallRecord], **details: Any) -> VerdictDict:
    """Return the verdict after one or more model calls, summing time and tokens."""
    def total(values: list[int | None]) -> int | None:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    return cast(VerdictDict, Verdict(
        fact_id=fact.id, label=label, method=method, model=model,
        raw=calls[-1]["text"] if calls else None,
        raws=[c["text"] for c in calls],
        attempts=len(calls),
        seconds=sum(c["seconds"] for c in calls),
        tokens_in=total([c["tokens_in"] for c in calls]),
        tokens_out=total([c["tokens_out"] for c in calls]),
        details=details,
    ).model_dump())


__all__ = [
    "ask", "CallRecord", "ModelReply", "prompt_values", "render_prompt", "model_for",
    "defect_verdict", "error_verdict", "answered_verdict",
]
