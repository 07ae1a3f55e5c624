"""Explained verdicts: what a model says beside its label, read apart from the label.

When a Context asks for them (``reasons``, ``citations``, ``corrections``), the prompt gets
an extra instruction (``prompts/explain_*.txt``) and the answer has lines after its verdict::

    T                                  <- the verdict, read by the method's own parser
    Reason: one or two sentences.
    Cited: P1, P3                      <- evidence strategies: passage ids the prompt gave
    Wrong part: object                 <- a fact judged false: which part is wrong
    Right value: Paris                 <- and the value the model believes right

``read_answer`` cuts the answer at the first such line: the part above goes to the parser
(so a label is read exactly as without the request), the lines below are read apart. When
nothing is asked the answer goes to the parser whole, so the study's prompts and numbers
do not change. A bad answer (the label inside the reason, an invented passage id, a
correction that is no valid term) is never fatal: it is recorded in ``answer_problems``.

This module also reads a verdict's confidence, the probability that the fact is true
(P(T), whatever the label), from token log-probabilities, builds the grammar that holds an
explained answer to its lines, and lays out the conversation a verdict keeps.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from kgcheck.data.facts import Fact, Label
from kgcheck.data.rdf_terms import iri_problem, is_iri, looks_like_iri
from kgcheck.graphs.parsing import (
    EMPTY,
    NO_OUTPUT,
    NO_VERDICT,
    Reading,
    format_named,
    read_with,
)
from kgcheck.prompts import load_prompt
from kgcheck.providers.constraints import AnswerFormat

REASON_PROMPT = "explain_reason.txt"
CITATIONS_PROMPT = "explain_citations.txt"
CORRECTION_PROMPT = "explain_correction.txt"
PARTS = ("subject", "predicate", "object")
MAX_REASON_CHARS = 600
MAX_VALUE_CHARS = 300
# Log-probabilities kept per call: enough for a verdict and a few words around it.
MAX_LOGPROB_TOKENS = 48

# "Reason:", "**Reason**:", "- Cited -", case-insensitive, at the start of a line.
_KEYS = {"reason": "reason", "rationale": "reason", "cited": "cited", "citations": "cited",
         "cites": "cited", "sources": "cited", "wrong part": "part", "wrong": "part",
         "right value": "value", "correct value": "value", "correction": "value"}
_EXTRA_LINE = re.compile(
    r"^\s*[*_`#>\-]*\s*(reason|rationale|citations|cited|cites|sources|wrong part|wrong|"
    r"right value|correct value|correction)\s*[*_`]*\s*[:=\-]\s*(.*)$",
    re.IGNORECASE)
_PASSAGE = re.compile(r"\b(\d+|[A-Za-z][\w.:/-]*\d[\w.:/-]*)\b")
_NONE = re.compile(r"^\W*(none|nothing|n/?a|no passages?)\W*$", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# Problems of an answer's extras, as counted in a verdict's ``answer_problems``.
SWALLOWED = "the reason holds the verdict: no verdict before the reason line"
NO_REASON = "no reason given"
CITES_NOTHING = "cites no passage"
NOT_SHOWN = "cites passage {id!r}, which the prompt did not show"
BAD_PART = "correction names {part!r}, not subject, predicate or object"
BAD_VALUE = "correction value is not a valid term: {why}"
NOT_FALSE = "offers a correction for a fact not judged false"


@dataclass(frozen=True)
class Requests:
    """What a Context asks the model for beside the verdict."""

    reasons: bool = False
    citations: bool = False
    corrections: bool = False

    @classmethod
    def of(cls, ctx: Any, *, evidence: bool = False) -> Requests:
        """Read the requests of a Context; citations only where evidence is shown."""
        return cls(reasons=bool(getattr(ctx, "reasons", False)),
                   citations=evidence and bool(getattr(ctx, "citations", False)),
                   corrections=bool(getattr(ctx, "corrections", False)))

    def __bool__(self) -> bool:
        return self.reasons or self.citations or self.corrections


@dataclass
class Explained:
    """An answer read: the label's reading and what came beside it."""

    reading: Reading
    # Characters of the answer before its extras (where the verdict token must be).
    head_chars: int | None = None
    reason: str | None = None
    cited: list[str] | None = None
    part: str | None = None
    value: str | None = None
    problems: list[str] = field(default_factory=list)


def instructions(requests: Requests) -> str:
    """Return the extra instructions for ``requests`` (empty when nothing is asked)."""
    names = [name for name, wanted in ((REASON_PROMPT, requests.reasons),
                                       (CITATIONS_PROMPT, requests.citations),
                                       (CORRECTION_PROMPT, requests.corrections)) if wanted]
    return "\n".join(load_prompt(name, set()).strip() for name in names)


def with_requests(messages: Sequence[BaseMessage], requests: Requests) -> list[BaseMessage]:
    """Add the instructions for ``requests`` to a prompt: to its system message, if any.

    Without requests the messages are returned as they are (the study's prompts).
    """
    messages = list(messages)
    if not requests:
        return messages
    extra = instructions(requests)
    for n, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            messages[n] = SystemMessage(f"{message.content}\n\n{extra}")
            return messages
    last = messages[-1]
    messages[-1] = HumanMessage(f"{extra}\n\n{last.content}")
    return messages


async def asking(messages: Sequence[BaseMessage], requests: Requests) -> list[BaseMessage]:
    """Add the instructions for ``requests`` from a graph node (files read off the loop)."""
    if not requests:
        return list(messages)
    return await asyncio.to_thread(with_requests, messages, requests)


def split_answer(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Cut an answer at its first extras line: (the verdict part, [(key, value), ...])."""
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if _EXTRA_LINE.match(line):
            extras: list[tuple[str, str]] = []
            for rest in lines[n:]:
                match = _EXTRA_LINE.match(rest)
                if match:
                    extras.append((_KEYS[match[1].lower()], match[2].strip()))
                elif extras and rest.strip():
                    key, value = extras[-1]
                    extras[-1] = (key, f"{value} {rest.strip()}".strip())
            return "\n".join(lines[:n]), extras
    return text, []


def _one_line(text: str) -> str:
    return " ".join(text.strip().strip('"').strip("*").split())


def read_answer(parser: str, text: str | None, requests: Requests) -> Explained:
    """Read an answer's label with ``parser`` and, when asked, its extras apart from it."""
    if not requests or not text:
        return Explained(read_with(parser, text))
    head, extras = split_answer(text)
    reading = read_with(parser, head)
    found: dict[str, str] = {}
    for key, value in extras:
        found.setdefault(key, value)
    problems: list[str] = []
    if extras and reading.problem in (EMPTY, NO_VERDICT, NO_OUTPUT):
        # The label is not before the extras: reading it from the reason would be a guess.
        problems.append(SWALLOWED)
        reading = Reading("NA", SWALLOWED)
    out = Explained(reading, head_chars=len(head), problems=problems)
    if requests.reasons:
        reason = _one_line(found.get("reason", ""))[:MAX_REASON_CHARS]
        out.reason = reason or None
        if not reason:
            problems.append(NO_REASON)
    if requests.citations:
        cited = found.get("cited", "")
        ids = [] if _NONE.match(cited or "none") else _PASSAGE.findall(cited)
        # A bare number stands for the passage of that number ("[2]" is P2).
        out.cited = list(dict.fromkeys(f"P{i}" if i.isdigit() else i for i in ids))
    if requests.corrections and ("part" in found or "value" in found):
        out.part = _one_line(found.get("part", "")).lower() or None
        out.value = _one_line(found.get("value", "")) or None
    return out


# --- citations -------------------------------------------------------------------------


def passage_id(n: int) -> str:
    """Return the id the prompt gives the n-th passage (from 0): P1, P2, ..."""
    return f"P{n + 1}"


def cited_passages(cited: Sequence[str] | None, shown: Sequence[Mapping[str, Any]],
                   problems: list[str]) -> list[dict[str, Any]] | None:
    """Keep the cited ids the prompt really showed, as passages with their source URL.

    ``shown`` holds the passages in prompt order (``doc_id``, ``url``, ``text``); a cited
    document id stands for its first passage. Invented ids are left out and counted.
    """
    if cited is None:
        return None
    by_id: dict[str, int] = {}
    for n, passage in enumerate(shown):
        by_id.setdefault(passage_id(n).lower(), n)
        by_id.setdefault(str(passage.get("doc_id", "")).lower(), n)
    kept: list[dict[str, Any]] = []
    seen: set[int] = set()
    for ident in cited:
        found = by_id.get(ident.lower())
        if found is None:
            problems.append(NOT_SHOWN.format(id=ident))
            continue
        if found in seen:
            continue
        seen.add(found)
        passage = shown[found]
        kept.append({"passage": passage_id(found), "doc_id": passage.get("doc_id"),
                     "chunk_id": passage.get("chunk_id"), "url": passage.get("url") or "",
                     "text": str(passage.get("text", ""))[:MAX_REASON_CHARS]})
    if not kept:
        problems.append(CITES_NOTHING)
    return kept


# --- corrections -----------------------------------------------------------------------


def value_problem(value: str) -> str | None:
    """Say why a suggested value cannot be a term (None: it can)."""
    if not value:
        return "empty"
    if len(value) > MAX_VALUE_CHARS:
        return f"{len(value)} characters long (at most {MAX_VALUE_CHARS})"
    if _CONTROL.search(value):
        return "holds control characters"
    if looks_like_iri(value) and not is_iri(value):
        # Checked by the parser that writes it in an export: what it refuses is no IRI.
        return iri_problem(value) or "an IRI needs // after its scheme"
    return None


def correction_for(fact: Fact, label: Label, part: str | None, value: str | None,
                   problems: list[str]) -> dict[str, Any] | None:
    """Check a suggested correction; return it (part, value, current term) or None."""
    if part is None and value is None:
        return None
    if label != "F":
        problems.append(NOT_FALSE)
        return None
    part = {"s": "subject", "p": "predicate", "o": "object"}.get(part or "", part or "")
    if part not in PARTS:
        problems.append(BAD_PART.format(part=part))
        return None
    why = value_problem(value or "")
    current = getattr(fact, part)
    readable = dict(zip(PARTS, fact.readable_terms(), strict=True))[part]
    if why is None and (value or "") in (current, readable):
        why = "the same as the current term"
    if why is not None:
        problems.append(BAD_VALUE.format(why=why))
        return None
    return {"part": part, "value": value, "current": current}


# --- confidence ------------------------------------------------------------------------
#
# A verdict's confidence is one number: the probability that the fact is TRUE, P(T), in
# [0, 1], whatever the label (a verdict F with confidence 0.1 is a sure F). It is read from
# the log-probabilities of the one token where the answer writes its verdict: the mass of
# the alternatives there that read as T over that of those that read as T or F. Held to an
# answer format (``constrain``), only the tokens its grammar allows at that place count
# (``T``/``F``, ``yes``/``no``), never ``True`` or ``The``, which the grammar forbids.

_SIDES = {"t": "T", "true": "T", "yes": "T", "f": "F", "false": "F", "no": "F"}
_TOKEN_EDGE = re.compile(r"^[\W_]+|[\W_]+$")


def _side(token: str) -> str | None:
    return _SIDES.get(_TOKEN_EDGE.sub("", token).lower())


def reply_logprobs(logprobs: Any) -> list[Mapping[str, Any]] | None:
    """Return a reply's answer tokens from its ``logprobs``, in either wire format.

    OpenAI's chat API (and llama.cpp's, vLLM's) sends ``{"content": [token, ...]}``;
    Ollama's sends the list of tokens itself (which its client turns into pydantic
    objects). Each token is ``{"token", "logprob", "top_logprobs": [{"token", "logprob"},
    ...]}`` in both.
    """
    if isinstance(logprobs, Mapping):
        logprobs = logprobs.get("content")
    if not isinstance(logprobs, list):
        return None
    return [item.model_dump() if hasattr(item, "model_dump") else item for item in logprobs]


def compact_logprobs(content: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Keep what a verdict needs of a reply's answer tokens: the first tokens.

    Each kept token is ``{"token", "logprob", "top": [[token, logprob], ...]}``.
    """
    if content is None:
        return None
    kept: list[dict[str, Any]] = []
    for item in content:
        if len(kept) >= MAX_LOGPROB_TOKENS:
            break
        if not isinstance(item, Mapping) or "token" not in item:
            continue
        top = [[str(t.get("token", "")), float(t.get("logprob", -math.inf))]
               for t in item.get("top_logprobs") or [] if isinstance(t, Mapping)]
        kept.append({"token": str(item["token"]), "logprob": float(item.get("logprob", 0.0)),
                     "top": top})
    return kept


def _alternatives(token: Mapping[str, Any]) -> list[tuple[str, float]]:
    """Return a token and its alternatives as (text, logprob), each text once."""
    pairs = [(str(token.get("token", "")), float(token.get("logprob", 0.0)))]
    pairs += [(str(t), float(lp)) for t, lp in token.get("top") or []]
    seen: set[str] = set()
    unique = []
    for text, logprob in pairs:
        if text not in seen:
            seen.add(text)
            unique.append((text, logprob))
    return unique


def _p_true(mass: Mapping[str, float]) -> float | None:
    total = mass.get("T", 0.0) + mass.get("F", 0.0)
    return mass.get("T", 0.0) / total if total > 0 else None


def logprob_confidence(tokens: Sequence[Mapping[str, Any]] | None,
                       label: Label, upto: int | None = None,
                       fmt: AnswerFormat | None = None) -> float | None:
    """Return P(T), the probability that the fact is true, from the verdict token.

    Without ``fmt`` (an unheld answer) the verdict token is the first token (within the
    first ``upto`` characters) that reads as the label (``T``, ``true``, ``yes`` / ``F``,
    ``false``, ``no``), and every alternative there that reads as T or F counts. Held to
    ``fmt``, the verdict token is the one that writes one of its choices (the last one for
    formats whose verdict ends the answer), and only the alternatives that write another of
    its choices at the same place count: what the grammar let the model pick from (an
    unlisted other choice counts at the least listed probability, its upper bound). The
    result is P(T) / (P(T) + P(F)); None when the label is not T or F or no verdict token
    is found.
    """
    if not tokens or label not in ("T", "F"):
        return None
    if fmt is not None and fmt.choices:
        return _held_confidence(tokens, label, upto, fmt)
    offset = 0
    for token in tokens:
        text = str(token.get("token", ""))
        if upto is not None and offset >= upto:
            return None
        offset += len(text)
        if _side(text) != label:
            continue
        mass = {"T": 0.0, "F": 0.0}
        for alt, logprob in _alternatives(token):
            side = _side(alt)
            if side is not None:
                mass[side] += math.exp(logprob)
        return _p_true(mass)
    return None


def _held_confidence(tokens: Sequence[Mapping[str, Any]], label: Label, upto: int | None,
                     fmt: AnswerFormat) -> float | None:
    allowed = fmt.verdict_tokens()
    found: Mapping[str, Any] | None = None
    offset = 0
    for token in tokens:
        text = str(token.get("token", ""))
        if upto is not None and offset >= upto:
            break
        offset += len(text)
        if text in allowed and allowed[text][1] == label:
            found = token
            if not fmt.verdict_last:
                break
    if found is None:
        return None
    lead = allowed[str(found.get("token", ""))][0]
    mass = {"T": 0.0, "F": 0.0, "NEI": 0.0}
    listed = _alternatives(found)
    for alt, logprob in listed:
        place = allowed.get(alt)
        if place is not None and place[0] == lead:
            mass[place[1]] += math.exp(logprob)
    other = "F" if label == "T" else "T"
    if mass[other] == 0.0 and found.get("top"):
        # The other choice is not among the listed alternatives: each of its spellings is at
        # most as likely as the least likely one listed. That bound, not 0, is used: the
        # confidence never claims more certainty than the listed probabilities show.
        spellings = sum(1 for place in allowed.values() if place == (lead, other))
        mass[other] = spellings * math.exp(min(logprob for _, logprob in listed))
    return _p_true(mass)


def confidence_fields(calls: Sequence[Mapping[str, Any]], label: Label,
                      upto: int | None = None) -> dict[str, Any]:
    """Return a verdict's confidence, P(T), from its last call's log-probabilities, if any.

    The call's answer format (``constraint``, when it was held to one) says which tokens
    count.
    """
    if not calls:
        return {}
    last = calls[-1]
    value = logprob_confidence(last.get("logprobs"), label, upto,
                               format_named(last.get("constraint")))
    if value is None:
        return {}
    return {"confidence": round(value, 6), "confidence_source": "logprobs"}


# --- held explanations -------------------------------------------------------------------

# Longest reason, citation list or value a grammar lets a held answer write, in characters.
HELD_LINE_CHARS = 300


def _gbnf_literal(text: str) -> str:
    return json.dumps(text)


def explained_format(fmt: AnswerFormat, requests: Requests) -> AnswerFormat:
    """Return ``fmt`` extended with the lines ``requests`` ask for, as a grammar.

    The verdict comes first, exactly as ``fmt`` writes it, then ``Reason:``, ``Cited:``
    and, after a verdict read as F only, ``Wrong part:`` and ``Right value:``: the lines
    ``read_answer`` reads. The JSON schema stays the verdict's (a schema-held answer has no
    lines). Without requests, or for a format without choices, ``fmt`` is returned.
    """
    if not requests or not fmt.choices:
        return fmt
    asked = [name for name, wanted in (("reason", requests.reasons),
                                       ("cited", requests.citations),
                                       ("correction", requests.corrections)) if wanted]
    common = ""
    if requests.reasons:
        common += ' "\\nReason: " line'
    if requests.citations:
        common += ' "\\nCited: " line'
    correction = (' "\\nWrong part: " ("subject" | "predicate" | "object")'
                  ' "\\nRight value: " line') if requests.corrections else ""
    # After a preamble the opening (its last line's newline) is the preamble's to write.
    opening = "" if fmt.preamble else fmt.opening
    branches = []
    for value, label in fmt.choices:
        tail = common + (correction if label == "F" else "")
        branches.append(f"{_gbnf_literal(opening + value + fmt.closing)}{tail}")
    lead = f"{fmt.preamble} " if fmt.preamble else ""
    grammar = (f"root ::= {lead}({' | '.join(branches)})\n"
               f"line ::= [^\\n]{{1,{HELD_LINE_CHARS}}}")
    # What every branch writes right after the value: a verdict token may carry its start.
    after = "\nReason: " if requests.reasons else "\nCited: " if requests.citations else ""
    return AnswerFormat("+".join([fmt.name, *asked]), grammar, fmt.schema,
                        choices=fmt.choices, opening=fmt.opening, closing=fmt.closing + after,
                        preamble=fmt.preamble, verdict_last=fmt.verdict_last)


# --- conversation ----------------------------------------------------------------------

_ROLES = {"system": "system", "human": "user", "ai": "assistant"}


def turns(messages: Iterable[BaseMessage], **where: Any) -> list[dict[str, Any]]:
    """Lay out messages as a verdict keeps them: ``{"role", "content"}`` plus ``where``."""
    out = []
    for message in messages:
        content = message.content if isinstance(message.content, str) else str(message.content)
        out.append({"role": _ROLES.get(message.type, message.type), "content": content,
                    **where})
    return out


def verdict_fields(fact: Fact, explained: Explained, calls: Sequence[Mapping[str, Any]], *,
                   requests: Requests, conversation: Sequence[Mapping[str, Any]] = (),
                   shown: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Return what a verdict keeps beside its label: confidence, reason, citations, ...

    ``calls`` are the verdict's model calls (the last one gave the label); ``shown`` the
    evidence passages in prompt order; ``conversation`` what ``turns`` laid out.
    """
    label = explained.reading.label
    fields: dict[str, Any] = dict(confidence_fields(calls, label, explained.head_chars))
    fields.update(explained_fields(fact, explained, shown=shown, requests=requests))
    if conversation:
        fields["conversation"] = list(conversation)
    return fields


def explained_fields(fact: Fact, explained: Explained, *, shown: Sequence[Mapping[str, Any]]
                     = (), requests: Requests) -> dict[str, Any]:
    """Return a verdict's reason, citations, correction and answer problems."""
    problems = list(explained.problems)
    fields: dict[str, Any] = {}
    if requests.reasons:
        fields["rationale"] = explained.reason
    if requests.citations:
        fields["citations"] = cited_passages(explained.cited, shown, problems)
    if requests.corrections:
        fields["correction"] = correction_for(fact, explained.reading.label, explained.part,
                                              explained.value, problems)
    if problems:
        fields["answer_problems"] = problems
    return fields
