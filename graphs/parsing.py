"""Read verdicts from model answers: T, F, or NA (with the reason) when an answer is not one.

Readers are pluggable by name (the Context's ``parser`` setting), like every other plugin
kind (``kgcheck.registry``):

- ``strict`` (DKA, GIV): a verdict counts when it stands on a line of its own (``T``,
  ``F`` and a newline, ``**False**``) or follows a label (``Judgment: T``, ``**Answer**:
  false``). Prose that merely mentions truth ("The fact is false", "my answer would be T")
  is not a verdict: upstream read anything starting with T as true, which turns "The fact
  is false" into T.
- ``last-line``: chain-of-thought answers, whose reasoning may mention both letters; only
  the last non-blank line counts, read strictly.
- ``yes-no-json`` (RAG): a JSON ``{"output": "yes"|"no"}`` somewhere in the text.
- ``strict-nei`` and ``yes-no-nei-json``: the same readers for the not-enough-evidence
  prompt variants, where ``NEI`` (``"output": "not enough evidence"``) is an answer of its
  own: the model abstains. The study's parsers never give NEI.

Each built-in parser also has an answer format (``ANSWER_FORMATS``): what a model is held
to when a run asks for constrained output (``constrain``), written so that the parser reads
it (``{"verdict": "T"}`` is a labelled verdict).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kgcheck.data.facts import Label
from kgcheck.providers.constraints import AnswerFormat
from kgcheck.registry import Registry, UnknownNameError

_TOKENS: dict[str, Label] = {"t": "T", "true": "T", "f": "F", "false": "F"}
# Words a labelled verdict may carry instead of T/F: an explicit refusal to decide.
_UNDECIDED = {"na", "n", "nan", "none", "unknown", "unsure", "undecided", "uncertain"}
# "Judgment: T", "**Answer**: false", "Verdict - F"; "Judgment: T/F" and "T or F" say both.
_LABELLED = re.compile(
    r"\b(?:judg(?:e)?ment|answer|verdict|label|reply|response)[*_`\"']*(?:\s+is)?\s*[:=\-]\s*[*_`\"'(\[]*\s*"
    r"([A-Za-z]+)\b(?!\s*/|\s+(?:or|and)\b)",
    re.IGNORECASE,
)
_DECORATION = re.compile(r"[*_`\"'.!()\[\]]")

# Why an answer is not compliant, as kept in a verdict's details.
NO_VERDICT = "no T/F verdict"
BOTH = "says both T and F"
UNDECIDED = "declines to decide"
EMPTY = "empty answer"
BOTH_NEI = "says both NEI and T/F"


@dataclass(frozen=True)
class Reading:
    """What an answer says: its label, and why it is NA when it is."""

    label: Label
    problem: str | None = None


def _line_token(line: str) -> Label | None:
    return _TOKENS.get(_DECORATION.sub("", line).strip().lower())


def read_verdict(answer: str | None) -> Reading:
    """Read a T/F verdict from a model's answer, saying why when there is none.

    Every line that is a verdict on its own and every labelled verdict counts; the answer
    is T or F when all of them agree, NA when they disagree, when a label says NA, or when
    there is none.
    """
    if answer is None or not answer.strip():
        return Reading("NA", EMPTY)
    found: set[Label] = set()
    for match in _LABELLED.finditer(answer):
        word = match.group(1).lower()
        if word in _TOKENS:
            found.add(_TOKENS[word])
        elif word in _UNDECIDED:
            found.add("NA")
        # Any other word after "answer:" is prose ("my answer: I think..."), not a verdict.
    for line in answer.splitlines():
        token = _line_token(line)
        if token:
            found.add(token)
    if not found:
        return Reading("NA", NO_VERDICT)
    if "NA" in found:
        return Reading("NA", UNDECIDED)
    if len(found) > 1:
        return Reading("NA", BOTH)
    return Reading(found.pop())


def parse_verdict(answer: str | None) -> Label:
    """Read a T/F verdict from a model's answer; NA when it says neither or both.

    Accepted: ``T``, ``F``, ``T`` with trailing blanks or newlines, ``**F**``,
    ``True``/``False``, ``Judgment: T``, and a verdict on its own line after a preamble
    ("I'm ready to retry." then "Judgment: T"). Prose such as "The fact is false" is not a
    compliant answer and gives NA.
    """
    return read_verdict(answer).label


def read_last_line(answer: str | None) -> Reading:
    """Read the verdict on the last non-blank line only (chain-of-thought answers)."""
    lines = [line for line in (answer or "").splitlines() if line.strip()]
    if not lines:
        return Reading("NA", EMPTY)
    return read_verdict(lines[-1])


_VALUES: dict[str, Label] = {"yes": "T", "true": "T", "no": "F", "false": "F"}
# "output": "yes" with either quote style, or none, around key and value.
_OUTPUT = re.compile(
    r"""["']?\boutput\b["']?\s*[:=]\s*["']?\s*(yes|no|true|false)\b""", re.IGNORECASE
)
_BARE = re.compile(r"^\W*(yes|no)\W*$", re.IGNORECASE)
NO_OUTPUT = "no readable yes/no output"
CONTRADICTS = "contradicting yes/no outputs"


def read_yes_no_json(answer: str | None) -> Reading:
    """Read RAG's ``{"output": "yes"|"no"}``: yes is T (supported), no is F.

    Recorded answers show the shapes to accept: fenced JSON, Python-dict quoting
    (``{'output': 'yes'}``), prose before or after the object, a bare ``Yes.``/``No.``.
    Anything else, or objects that contradict each other, is NA, never a guess.
    """
    if not answer or not answer.strip():
        return Reading("NA", EMPTY)
    found = {_VALUES[m.lower()] for m in _OUTPUT.findall(answer)}
    if len(found) == 1:
        return Reading(found.pop())
    if found:
        return Reading("NA", CONTRADICTS)
    bare = _BARE.match(answer.strip())
    if bare:
        return Reading(_VALUES[bare[1].lower()])
    return Reading("NA", NO_OUTPUT)


# What an abstaining answer may say instead of T/F (or yes/no) in the NEI variants.
_NEI_WORDS = {"nei", "not enough evidence", "not enough information", "abstain",
              "insufficient evidence", "not enough info"}
_NEI_OUTPUT = re.compile(
    r"""["']?\boutput\b["']?\s*[:=]\s*["']?\s*(nei|not enough (?:evidence|information|info)"""
    r"""|insufficient evidence|abstain)\b""", re.IGNORECASE)
_NEI_LABELLED = re.compile(
    r"\b(?:judg(?:e)?ment|answer|verdict|label|reply|response)[*_`\"']*(?:\s+is)?\s*[:=\-]"
    r"\s*[*_`\"'(\[]*\s*(nei|not enough (?:evidence|information))\b", re.IGNORECASE)


def _says_nei_line(answer: str) -> bool:
    return any(_DECORATION.sub("", line).strip().lower() in _NEI_WORDS
               for line in answer.splitlines()) or bool(_NEI_LABELLED.search(answer))


def read_verdict_nei(answer: str | None) -> Reading:
    """Read T, F or NEI (the abstain variants of DKA and GIV); anything else as ``strict``.

    NEI counts when it is the only verdict the answer gives (``NEI`` on a line of its own,
    ``Answer: NEI``, ``not enough information``); NEI beside a T or F says both: NA.
    """
    reading = read_verdict(answer)
    if not answer or not _says_nei_line(answer):
        return reading
    if reading.problem in (NO_VERDICT, UNDECIDED):
        return Reading("NEI")
    return Reading("NA", BOTH_NEI)


def read_yes_no_nei_json(answer: str | None) -> Reading:
    """Read ``{"output": "yes"|"no"|"not enough evidence"}``: T, F or NEI.

    The evidence strategies' variant that tells "the documents refute it" (F) from "the
    documents do not say" (NEI).
    """
    reading = read_yes_no_json(answer)
    if not answer or not _NEI_OUTPUT.search(answer):
        if reading.problem == NO_OUTPUT and _BARE_NEI.match(answer or ""):
            return Reading("NEI")
        return reading
    if reading.problem is None:
        return Reading("NA", CONTRADICTS)  # an NEI output beside a yes/no output
    return Reading("NEI")


_BARE_NEI = re.compile(r"^\W*(nei|not enough (?:evidence|information))\W*$", re.IGNORECASE)

Reader = Callable[[str | None], Reading]


class UnknownParserError(UnknownNameError):
    """No verdict parser is registered under that name."""


PARSERS: Registry[Reader] = Registry("verdict parser", group="kgcheck.parsers",
                                     unknown=UnknownParserError)
PARSERS.register("strict", read_verdict)
PARSERS.register("last-line", read_last_line)
PARSERS.register("yes-no-json", read_yes_no_json)
PARSERS.register("strict-nei", read_verdict_nei)
PARSERS.register("yes-no-nei-json", read_yes_no_nei_json)


def read_with(parser: str, answer: str | None) -> Reading:
    """Read ``answer`` with the parser named ``parser``."""
    return PARSERS.get(parser)(answer)


_VERDICT_SCHEMA = {"type": "object",
                   "properties": {"verdict": {"type": "string", "enum": ["T", "F"]}},
                   "required": ["verdict"], "additionalProperties": False}

_TF = (("T", "T"), ("F", "F"))
_YES_NO = (("yes", "T"), ("no", "F"))
_OUTPUT_OPENING = '{"output": "'
_OUTPUT_CLOSING = '"}'

# What each parser's answers look like, as a grammar (llama.cpp) and a JSON schema.
ANSWER_FORMATS: dict[str, AnswerFormat] = {
    "strict": AnswerFormat("verdict", 'root ::= "T" | "F"', _VERDICT_SCHEMA, choices=_TF),
    # Reasoning lines may come first; the verdict stands alone on the last.
    "last-line": AnswerFormat(
        "reasoned_verdict", 'root ::= ([^\\n]+ "\\n"){0,8} ("T" | "F")',
        {"type": "object",
         "properties": {"reasoning": {"type": "string"},
                        "verdict": {"type": "string", "enum": ["T", "F"]}},
         "required": ["reasoning", "verdict"], "additionalProperties": False},
        choices=_TF, opening="\n", preamble='([^\\n]+ "\\n"){0,8}', verdict_last=True),
    "yes-no-json": AnswerFormat(
        "output", 'root ::= "{\\"output\\": \\"" ("yes" | "no") "\\"}"',
        {"type": "object", "properties": {"output": {"type": "string", "enum": ["yes", "no"]}},
         "required": ["output"], "additionalProperties": False},
        choices=_YES_NO, opening=_OUTPUT_OPENING, closing=_OUTPUT_CLOSING),
    "strict-nei": AnswerFormat(
        "verdict_or_nei", 'root ::= "T" | "F" | "NEI"',
        {"type": "object",
         "properties": {"verdict": {"type": "string", "enum": ["T", "F", "NEI"]}},
         "required": ["verdict"], "additionalProperties": False},
        choices=(*_TF, ("NEI", "NEI"))),
    "yes-no-nei-json": AnswerFormat(
        "output_or_nei",
        'root ::= "{\\"output\\": \\"" ("yes" | "no" | "not enough evidence") "\\"}"',
        {"type": "object",
         "properties": {"output": {"type": "string",
                                   "enum": ["yes", "no", "not enough evidence"]}},
         "required": ["output"], "additionalProperties": False},
        choices=(*_YES_NO, ("not enough evidence", "NEI")), opening=_OUTPUT_OPENING,
        closing=_OUTPUT_CLOSING),
}


def answer_format(parser: str) -> AnswerFormat | None:
    """Return the answer format of the parser named ``parser``; None when it has none."""
    return ANSWER_FORMATS.get(parser)


def format_named(name: str | None) -> AnswerFormat | None:
    """Return the built-in answer format called ``name`` (a call record keeps the name)."""
    base = (name or "").split("+", 1)[0]
    return next((fmt for fmt in ANSWER_FORMATS.values() if fmt.name == base), None)
