"""What every strategy graph takes and returns: a fact in, its verdict out.

Graphs declare ``GraphInput`` and ``GraphOutput`` as their input and output schemas, so
Studio and SDK callers see ``{"fact": ...}`` in and ``{"verdict": ...}`` out, not the steps
in between. ``read_fact`` validates the input with an error that shows the expected shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from typing_extensions import TypedDict

from kgcheck.data.facts import Fact, FactInput, VerdictDict

EXPECTED_INPUT = ('{"fact": {"subject": "...", "predicate": "...", "object": "...", '
                  '"id": "... (optional)", "dataset": "... (optional)"}}')


class GraphInput(TypedDict):
    """A strategy's input: the fact to check."""

    fact: FactInput


class GraphOutput(TypedDict):
    """A strategy's output: the verdict on the fact."""

    verdict: VerdictDict


class InvalidGraphInput(ValueError):
    """A graph was invoked with something other than ``{"fact": {...}}``."""


def read_fact(state: Mapping[str, Any]) -> Fact:
    """Validate the ``fact`` of a graph's state into a ``Fact``; ids default to ``adhoc``."""
    data = state.get("fact")
    if not isinstance(data, Mapping):
        got = "no 'fact'" if data is None else f"'fact' = {data!r:.80}"
        raise InvalidGraphInput(f"a strategy graph takes {EXPECTED_INPUT}; got {got}")
    payload = {"id": "adhoc", "dataset": "", **dict(data)}
    try:
        return Fact.model_validate(payload)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                             for e in exc.errors())
        raise InvalidGraphInput(
            f"the fact is malformed ({problems}); a strategy graph takes {EXPECTED_INPUT}"
        ) from None
