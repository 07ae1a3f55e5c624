"""Strategies by name: the CLI, Studio graphs and consensus members all resolve here.

Adding a strategy is one module that builds a graph plus one ``register`` call (see
``graphs/dka_sc.py``). Graphs take ``{"fact": FactInput}`` and return ``{"verdict": ...}``.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from langgraph.graph.state import CompiledStateGraph, StateGraph

from graphs.context import Context
from graphs.state import Fact

# Each strategy has its own state and Context classes: the registry holds any of them.
AnyStateGraph: TypeAlias = StateGraph[Any, Any, Any, Any]
AnyCompiledGraph: TypeAlias = CompiledStateGraph[Any, Any, Any, Any]


# Checks a batch run makes before starting: (facts, context) -> warnings to print.
Preflight = Callable[[Sequence[Fact], Any], list[str]]


class UnknownStrategyError(ValueError):
    """No strategy is registered under that name."""


@dataclass(frozen=True)
class Strategy:
    """A registered strategy: its graph builder, Context class and recorded-method name."""

    name: str
    builder: AnyStateGraph
    context: type[Context]
    method: str
    description: str
    defaults: dict[str, Any]
    preflight: Preflight | None = None

    def compile(self, **kwargs: Any) -> AnyCompiledGraph:
        """Compile a fresh graph (pass ``checkpointer=`` for resumable state)."""
        return self.builder.compile(name=self.name, **kwargs)

    def make_context(self, **values: Any) -> Context:
        """Build this strategy's Context from its defaults overlaid with ``values``."""
        from graphs.context import make_context

        return make_context(self.context, {**self.defaults, **values})


_STRATEGIES: dict[str, Strategy] = {}
# Built-in strategies, imported on first lookup so that importing the registry stays cheap.
_BUILTIN_MODULES = ("graphs.dka", "graphs.giv", "graphs.rag", "graphs.dka_sc")


def register(name: str, builder: AnyStateGraph, context: type[Context], *, method: str,
             description: str, preflight: Preflight | None = None, **defaults: Any) -> None:
    """Register a strategy; ``defaults`` are Context values this strategy starts from.

    ``preflight(facts, context)`` may return warnings that a batch run prints before it
    starts (e.g. facts that RAG has no evidence for).
    """
    _STRATEGIES[name] = Strategy(name, builder, context, method, description, defaults,
                                 preflight)


@functools.cache
def _load_builtins() -> None:
    from importlib.metadata import entry_points

    for module in _BUILTIN_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            # A strategy module that is not there yet is simply not offered.
            if exc.name != module:
                raise
    # Installed packages add strategies through the "kgcheck.strategies" entry-point group.
    for entry in entry_points(group="kgcheck.strategies"):
        entry.load()


def strategies() -> dict[str, Strategy]:
    """Every registered strategy, by name."""
    _load_builtins()
    return dict(sorted(_STRATEGIES.items()))


def get_strategy(name: str) -> Strategy:
    """Look up a strategy; an unknown name lists the known ones."""
    known = strategies()
    key = name.strip().lower()
    if key not in known:
        raise UnknownStrategyError(
            f"unknown strategy {name!r}; known: {', '.join(known) or 'none'}"
        )
    return known[key]


