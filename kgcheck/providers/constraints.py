"""Constrained output: ask a model for an answer format it cannot leave, where it can be asked.

An ``AnswerFormat`` says a format twice: as a GBNF grammar (llama.cpp samples only tokens
the grammar allows) and as a JSON schema of an object (OpenAI's ``response_format``,
Ollama's ``format``, OpenAI-compatible servers). Each provider says how it applies one
(``Provider.constrain``); a provider that cannot is used unconstrained, with a notice.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

# Alternatives per token a grammar-held call asks for (the OpenAI API's most).
HELD_TOP_LOGPROBS = 20


class ConstraintIgnoredWarning(UserWarning):
    """Constrained output was asked for, but the model or the answer format has none."""


@dataclass(frozen=True)
class AnswerFormat:
    """One answer format as a GBNF grammar and as a JSON schema (of an object).

    ``choices`` are the values the grammar lets the verdict take, each with the label the
    parser reads from it (``("yes", "T")``); ``opening`` and ``closing`` are the fixed text
    the grammar writes just before and after the value (``{"output": "`` and ``"}``). They
    say which tokens could stand where the verdict is written: a verdict's confidence is
    read from those alone.
    """

    name: str
    grammar: str
    schema: Mapping[str, Any]
    choices: tuple[tuple[str, str], ...] = ()
    opening: str = ""
    closing: str = ""
    # A GBNF expression the grammar allows before the opening (reasoning lines).
    preamble: str = ""
    # The verdict is the last such token (after reasoning lines), not the first.
    verdict_last: bool = False

    def verdict_tokens(self) -> dict[str, tuple[str, str]]:
        """Return every token text that writes a choice at the verdict's place.

        Each maps to ``(lead, label)``: a token may also carry the end of the opening text
        (``lead``) and the start of the closing text around the value (a tokenizer may
        merge ``"`` and ``yes``). Tokens at one place of an answer share their lead.
        """
        tokens: dict[str, tuple[str, str]] = {}
        for value, label in self.choices:
            for cut in range(len(self.opening) + 1):
                lead = self.opening[len(self.opening) - cut:]
                for trail in range(len(self.closing) + 1):
                    tokens.setdefault(lead + value + self.closing[:trail], (lead, label))
        return tokens


def openai_response_format(fmt: AnswerFormat) -> dict[str, Any]:
    """Return OpenAI's ``response_format`` for ``fmt`` (a strict JSON schema)."""
    return {"type": "json_schema",
            "json_schema": {"name": fmt.name, "schema": dict(fmt.schema), "strict": True}}


def with_response_format(chat: BaseChatModel, fmt: AnswerFormat) -> Runnable:
    """Constrain an OpenAI-API model with a JSON schema (OpenAI, Azure, compatible servers)."""
    return chat.bind(response_format=openai_response_format(fmt))


def with_grammar(chat: BaseChatModel, fmt: AnswerFormat) -> Runnable:
    """Constrain a llama.cpp server's model with the GBNF grammar (sent in the body).

    The repetition penalty is off for a held answer: it lowers the scores of tokens the
    prompt holds (its ``T``, ``F``, ``yes``) before the grammar picks among them, so the
    sampled verdict could differ from the one the reported probabilities favour, and the
    grammar already keeps the answer from running on.
    """
    # A call's extra_body replaces the model's: keep its sampling fields.
    body = {**(getattr(chat, "extra_body", None) or {}), "grammar": fmt.grammar,
            "repeat_penalty": 1.0, "repetition_penalty": 1.0}
    if getattr(chat, "logprobs", None):
        # The other choice is often not among the top 5 tokens (a held answer's confidence
        # would then read 0 or 1): ask for the most alternatives the API allows.
        body["top_logprobs"] = HELD_TOP_LOGPROBS
    return chat.bind(extra_body=body)


def with_ollama_format(chat: BaseChatModel, fmt: AnswerFormat) -> Runnable:
    """Constrain an Ollama model with the JSON schema (Ollama's ``format``)."""
    return chat.bind(format=dict(fmt.schema))


_NOTICED: set[str] = set()


def notice(message: str) -> None:
    """Warn once per process and message that a constraint was not applied."""
    if message in _NOTICED:
        return
    _NOTICED.add(message)
    warnings.warn(message, ConstraintIgnoredWarning, stacklevel=3)
