"""Strategies by name: the CLI, the Python API, Studio and consensus members resolve here.

A strategy is a ``Strategy``: its name (what the CLI and Studio call it), its Context class
(the settings, and in ``METHOD`` / ``REPLAYS`` the label its verdicts carry and the recorded
answers replay serves it), and the function that builds its graph for that Context class.
Built-in strategies are the modules of ``kgcheck.graphs.strategies``, each registering its
own; installed packages add theirs under the ``kgcheck.strategies`` entry-point group
(``dka-cot = "my_package.cot:strategy"``). Graphs take ``{"fact": FactInput}`` and return
``{"verdict": ...}``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeAlias

from langgraph.graph.state import CompiledStateGraph, StateGraph

from kgcheck.data.facts import Fact
from kgcheck.graphs.context import Context, make_context
from kgcheck.registry import Registry, UnknownNameError

# Each strategy has its own state and Context classes: the registry holds any of them.
AnyStateGraph: TypeAlias = StateGraph[Any, Any, Any, Any]
AnyCompiledGraph: TypeAlias = CompiledStateGraph[Any, Any, Any, Any]
# Checks a batch run makes before starting: (facts, context) -> warnings to print.
Preflight = Callable[[Sequence[Fact], Any], list[str]]


class UnknownStrategyError(UnknownNameError):
    """No strategy is registered under that name."""


@dataclass(frozen=True)
class Strategy:
    """A strategy: its name, its Context class and how its graph is built.

    Attributes:
        name: What the CLI, the Python API and Studio call it (``giv-f``).
        context: Its Context class; ``context.METHOD`` labels its verdicts (``GIV-F``) and
            ``context.REPLAYS`` names the study's recorded answers replay serves it.
        build: Build the (uncompiled) graph for a Context class.
        description: One line for listings and Studio.
        preflight: Optional checks before a batch run: ``(facts, context) -> warnings``.

    """

    name: str
    context: type[Context]
    # Takes the strategy's Context class (each build function names its own base class).
    build: Callable[[Any], AnyStateGraph] = field(repr=False)
    description: str = ""
    preflight: Preflight | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """The ``method`` its verdicts carry."""
        return self.context.METHOD

    @property
    def replays(self) -> str | None:
        """Which of the study's recorded answers replay serves it (None: none)."""
        return self.context.REPLAYS

    @cached_property
    def builder(self) -> AnyStateGraph:
        """The strategy's graph builder, built once."""
        return self.build(self.context)

    def compile(self, **kwargs: Any) -> AnyCompiledGraph:
        """Compile a fresh graph (pass ``checkpointer=`` for resumable state)."""
        return self.builder.compile(name=self.name, **kwargs)

    def make_context(self, **values: Any) -> Context:
        """Build this strategy's Context; keys it does not define are ignored."""
        return make_context(self.context, values)


BUILTIN_PACKAGE = "kgcheck.graphs.strategies"


def _builtin_strategies() -> None:
    # Every module of the package registers its strategies on import: nothing lists them.
    package = importlib.import_module(BUILTIN_PACKAGE)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{BUILTIN_PACKAGE}.{module.name}")


STRATEGIES: Registry[Strategy] = Registry(
    "strategy", group="kgcheck.strategies", discover=_builtin_strategies,
    unknown=UnknownStrategyError)


def register(strategy: Strategy) -> Strategy:
    """Register a strategy under its name; returns it (so a module can keep it)."""
    if not strategy.context.METHOD:
        raise ValueError(f"strategy {strategy.name!r}: its Context class "
                         f"{strategy.context.__name__} sets no METHOD (the verdicts' label)")
    STRATEGIES.register(strategy.name, strategy, origin=strategy.build.__module__)
    return strategy


def strategies() -> dict[str, Strategy]:
    """Every registered strategy, by name."""
    return STRATEGIES.items()


def get_strategy(name: str) -> Strategy:
    """Look up a strategy; an unknown name lists the known ones."""
    return STRATEGIES.get(name)
