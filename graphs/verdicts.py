"""The one way to build each kind of verdict a graph (or the runner) returns.

- ``answered``: the model answered (one or more calls); its label may be NA when the answer
  could not be read (counted as ``invalid``), with the reason in ``details``.
- ``unanswered``: NA without asking the model, with the reason (RAG with no evidence).
- ``failed``: NA because a call or the graph failed; ``error`` says why, and what the model
  said before the failure is kept.
- ``defect``: NA for a triple that cannot be sent to a model (a dirty row of the data).
- ``combined``: a verdict made of other verdicts (consensus: the members' and the judge's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from kgcheck.data.facts import Fact, Label, Verdict, VerdictDict
from kgcheck.providers.secrets import redact_text

DEFECT = "InvalidFact"


def _total(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _dump(verdict: Verdict) -> VerdictDict:
    return cast(VerdictDict, verdict.model_dump())


def all_cached(parts: Sequence[Mapping[str, Any]]) -> bool:
    """Tell whether every call (or part verdict) was served from the answer cache."""
    return bool(parts) and all(part.get("cached") for part in parts)


def call_fields(calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Sum up what a verdict keeps of its calls: raw answers, attempts, time, tokens.

    A verdict whose every call came from the answer cache is ``cached``: its time is what
    those calls took when they were made.
    """
    return {
        "raw": calls[-1]["text"] if calls else None,
        "raws": [c["text"] for c in calls],
        "attempts": len(calls),
        "seconds": sum(float(c.get("seconds") or 0.0) for c in calls),
        "tokens_in": _total([c.get("tokens_in") for c in calls]),
        "tokens_out": _total([c.get("tokens_out") for c in calls]),
        "cached": all_cached(calls),
    }


def answered(fact: Fact, method: str, model: str, label: Label,
             calls: Sequence[Mapping[str, Any]], *, extras: Mapping[str, Any] | None = None,
             **details: Any) -> VerdictDict:
    """Return the verdict after one or more model calls, summing their time and tokens.

    ``extras`` are the verdict's own fields beside its label (``confidence``,
    ``rationale``, ``citations``, ``correction``, ``conversation``, ``answer_problems``).
    """
    return _dump(Verdict(fact_id=fact.id, label=label, method=method, model=model,
                         details=details, **call_fields(calls), **(extras or {})))


def unanswered(fact: Fact, method: str, model: str, reason: str, *, label: Label = "NA",
               extras: Mapping[str, Any] | None = None, **details: Any) -> VerdictDict:
    """Return NA (or NEI) without a model answer, saying why (e.g. no evidence was found)."""
    return _dump(Verdict(fact_id=fact.id, label=label, method=method, model=model,
                         details={**details, "reason": reason}, **(extras or {})))


def error_text(exc: BaseException) -> str:
    """Render an exception as a verdict's ``error``: its type and message."""
    # Messages may quote a URL with its query credentials: mask them before they are kept.
    return redact_text(f"{type(exc).__name__}: {exc}")


def failed(fact_id: str, method: str, model: str, error: BaseException | str, *,
           error_type: str | None = None, calls: Sequence[Mapping[str, Any]] = (),
           extras: Mapping[str, Any] | None = None, **details: Any) -> VerdictDict:
    """Return the NA verdict of a failed call or graph, keeping the error and earlier calls."""
    if isinstance(error, BaseException):
        error_type = error_type or type(error).__name__
        error = error_text(error)
    return _dump(Verdict(fact_id=fact_id, label="NA", method=method, model=model, error=error,
                         details={**details, "error_type": error_type or "Error"},
                         **call_fields(calls), **(extras or {})))


def defect(fact: Fact, method: str, model: str) -> VerdictDict:
    """Return the NA verdict of a fact that cannot be sent to a model (a dirty triple)."""
    return failed(fact.id, method, model, f"invalid fact {fact.id!r}: {fact.defect}",
                  error_type=DEFECT)


def combined(fact_id: str, method: str, model: str, label: Label,
             parts: Sequence[Mapping[str, Any]], *, seconds: float, raw: str | None,
             error: str | None = None, error_type: str | None = None,
             extras: Mapping[str, Any] | None = None, **details: Any) -> VerdictDict:
    """Return a verdict made of other verdicts: their raw answers, attempts and tokens summed.

    ``seconds`` is given, since parts that ran at the same time do not add up.
    """
    if error:
        details = {**details, "error_type": error_type or "Error"}
    return _dump(Verdict(
        fact_id=fact_id, label=label, method=method, model=model, raw=raw,
        raws=[r for part in parts for r in (part.get("raws") or [])],
        attempts=sum(int(part.get("attempts") or 0) for part in parts),
        seconds=seconds,
        tokens_in=_total([part.get("tokens_in") for part in parts]),
        tokens_out=_total([part.get("tokens_out") for part in parts]),
        cached=all_cached(parts), error=error, details=details, **(extras or {})))


def is_defect(verdict: Mapping[str, Any]) -> bool:
    """Tell whether a verdict is that of a dirty triple (skipped input, not a failure)."""
    return (verdict.get("details") or {}).get("error_type") == DEFECT
