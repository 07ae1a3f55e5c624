"""The shape of a verdict record: what each field of a ``verdicts.jsonl`` line may hold.

A record is the verdict (``kgcheck.data.facts.Verdict``) with its fact's fields
(``kgcheck.runs.records.verdict_record``). A folder imported, edited by hand or written by
another tool may hold a record of another shape (``details`` a list, ``seconds`` a string):
``shape_problem`` names the first field that is wrong, so that a reader refuses the record
with its line instead of failing deep inside an export or a display.

Checked by pydantic in strict mode (no silent conversion: ``"1.5"`` is no number), on the
record as parsed; the record itself is kept as it is (its field order too). Fields not named
here, and fields a record does not have, are not checked: older records and other
strategies' details stay readable.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

__all__ = ["shape_problem"]

_OPEN = ConfigDict(extra="allow")


@with_config(_OPEN)
class _Turn(TypedDict):
    role: str
    content: str


@with_config(_OPEN)
class _Citation(TypedDict, total=False):
    passage: str | None
    url: str | None
    text: str


@with_config(_OPEN)
class _Correction(TypedDict):
    part: str
    value: str
    current: NotRequired[str | None]


@with_config(_OPEN)
class _Terms(TypedDict):
    subject: str
    predicate: str
    object: str


@with_config(_OPEN)
class _Details(TypedDict, total=False):
    reason: str | None
    strategy: str | None
    documents: list[Any] | None
    votes: list[dict[str, Any]] | None
    counts: dict[str, int] | None


@with_config(_OPEN)
class _Record(TypedDict, total=False):
    fact_id: str | int
    label: Literal["T", "F", "NA", "NEI"]
    method: str | None
    model: str | None
    raw: str | None
    raws: list[str] | None
    attempts: int | None
    seconds: float | None
    tokens_in: int | None
    tokens_out: int | None
    error: str | None
    details: _Details | None
    confidence: float | None
    confidence_source: str | None
    rationale: str | None
    citations: list[_Citation] | None
    correction: _Correction | None
    conversation: list[_Turn] | None
    answer_problems: list[str] | None
    dataset: str | None
    gold: str | None
    run_id: str | None
    subject: str | None
    predicate: str | None
    object: str | None
    checked_at: str | None
    rdf: _Terms | None
    names: dict[str, str] | None
    name_terms: dict[str, str] | None


_RECORD = TypeAdapter(_Record)
_KINDS = {dict: "an object", list: "a list", str: "a string", int: "a number",
          float: "a number", bool: "true or false", type(None): "null"}


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def shape_problem(record: dict[str, Any]) -> str | None:
    """Say which field of a verdict record has the wrong shape, and how (None: none has).

    ``record`` is a parsed JSON object with a ``fact_id`` and a ``label``
    (``runfolder.record_problem`` says so first).
    """
    try:
        _RECORD.validate_python(record, strict=True)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        if first["type"] == "missing":
            return f"{_where(first['loc'])} is missing{more}"
        given = _KINDS.get(type(first.get("input")), type(first.get("input")).__name__)
        message = str(first["msg"])
        return (f"{_where(first['loc'])}: {message[:1].lower()}{message[1:]}, got {given}"
                f"{more}")
    return None
