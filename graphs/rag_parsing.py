"""Read RAG answers: a JSON ``{"output": "yes"|"no"}`` somewhere in the model's text.

Recorded answers show the shapes to accept: fenced JSON, Python-dict quoting
(``{'output': 'yes'}``), prose before or after the object, a bare ``Yes.``/``No.``.
Anything else, or objects that contradict each other, is NA (invalid), never a guess.
"""

from __future__ import annotations

import re

from graphs.state import Label

_VALUES: dict[str, Label] = {"yes": "T", "true": "T", "no": "F", "false": "F"}
# "output": "yes" with either quote style, or none, around key and value.
_OUTPUT = re.compile(
    r"""["']?\boutput\b["']?\s*[:=]\s*["']?\s*(yes|no|true|false)\b""", re.IGNORECASE
)
_BARE = re.compile(r"^\W*(yes|no)\W*$", re.IGNORECASE)


def parse_rag_answer(answer: str | None) -> Label:
    """Turn a RAG answer into T (supported), F (not supported) or NA (unreadable)."""
    if not answer or not answer.strip():
        return "NA"
    found = {_VALUES[m.lower()] for m in _OUTPUT.findall(answer)}
    if len(found) == 1:
        return found.pop()
    if found:
        return "NA"
    bare = _BARE.match(answer.strip())
    if bare:
        return _VALUES[bare[1].lower()]
    return "NA"
