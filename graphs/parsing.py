"""Parse model answers strictly: a verdict is T, F, or NA when the answer is not one."""

from __future__ import annotations

import re

from graphs.state import Label

_TOKENS = {"t": "T", "true": "T", "f": "F", "false": "F"}
# "Judgment: T", "Answer - F", "verdict: true"
_LABELLED = re.compile(
    r"(?:judg(?:e)?ment|answer|verdict|label|output)\s*[:\-=]\s*\**\s*([A-Za-z]+)", re.IGNORECASE
)
_DECORATION = re.compile(r"[*_`\"'.!()\[\]]")


def _token(text: str) -> Label | None:
    cleaned = _DECORATION.sub("", text).strip().lower()
    return _TOKENS.get(cleaned)  # type: ignore[return-value]


def parse_verdict(answer: str | None) -> Label:
    """Read a T/F verdict from a model's answer; NA when it says neither or both.

    Accepted: ``T``, ``F``, ``T \\n``, ``**F**``, ``True``/``False``, ``Judgment: T``, and an
    answer whose last line is one of those after a preamble. Prose such as "The fact is
    false" is not a compliant answer and gives NA.
    """
    if not answer or not answer.strip():
        return "NA"
    whole = _token(answer)
    if whole:
        return whole
    labelled = {_TOKENS.get(m.lower()) for m in _LABELLED.findall(answer)}
    labelled.discard(None)
    if len(labelled) == 1:
        return labelled.pop()  # type: ignore[return-value]
    if labelled:
        return "NA"
    lines = [line for line in answer.strip().splitlines() if line.strip()]
    last = _token(lines[-1]) if lines else None
    return last or "NA"


def is_compliant(answer: str | None) -> bool:
    """Tell whether an answer follows the guidelines: a clear T or F verdict."""
    return parse_verdict(answer) != "NA"
