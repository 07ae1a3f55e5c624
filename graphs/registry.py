"""Strategies by name: the CLI, the Python API, Studio and consensus members resolve here.

A strategy is a ``Strategy``: its name (what the CLI and Studio call it), its Context class
(the settings, and in ``METHOD`` / ``REPLAYS`` the label its verdicts carry and the recorded
answers replay serves it), and the function that builds its graph for that Context class.
Built-in strategies are the modules of ``kgcheck.graphs.strategies``, each registering its
own; installed packages add theirs under the ``kgcheck.strategies`` entry-point group
(``dka-cot = "my_package.cot:strategy"``). Graphs take ``{"fact": FactInput}`` and return
``{"verdict": ...}``.

An entry's ``kind`` says what its graph is for: ``check`` (a fact-checking strategy, what
``kgcheck run``, the Python API and consensus members use) or ``review`` (a graph that
pauses for a person, served in Studio and driven by ``kgcheck review``, never run as a
method). ``strategies()`` lists the checking ones; ``graphs()`` lists every entry.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, TypeAlias

from langgraph.graph.state import CompiledStateGraph, StateGraph

from kgcheck.data.facts import Fact
from kgcheck.graphs.context import Context, make_context
from kgcheck.registry import Registry, UnknownNameError

# Each strategy has its own state and Context classes: the registry holds any of them.
AnyStateGraph: TypeAlias = StateGraph[Any, Any, Any, Any]
AnyCompiledGraph: TypeAlias = CompiledStateGraph[Any, Any, Any, Any]
# Checks a batch run makes before starting: (facts, context) -> warnings to print.
Preflight = Callable[[Sequence[Fact], Any], list[str]]
Kind = Literal["check", "review"]
CHECK: Kind = "check"


class UnknownStrategyError(UnknownNameError):
    """No strategy is registered under that name."""


class NotAStrategyError(ValueError):
    """The name is a registered graph that does not check facts (the ``review`` graph)."""


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
        kind: ``check`` for a fact-checking strategy, ``review`` for a graph that pauses
            for a person (served, never run as a method).

    """

    name: str
    context: type[Context]
    # Takes the strategy's Context class (each build function names its own base class).
    build: Callable[[Any], AnyStateGraph] = field(repr=False)
    description: str = ""
    preflight: Preflight | None = field(default=None, repr=False)
    kind: Kind = CHECK

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


def graphs() -> dict[str, Strategy]:
    """Every registered graph by name, whatever its kind (what Studio serves)."""
    return STRATEGIES.items()


def strategies() -> dict[str, Strategy]:
    """Every registered fact-checking strategy, by name."""
    return {name: s for name, s in STRATEGIES.items().items() if s.kind == CHECK}


def get_graph(name: str) -> Strategy:
    """Look up a registered graph of any kind; an unknown name lists the known ones."""
    return STRATEGIES.get(name)


def get_strategy(name: str) -> Strategy:
    """Look up a fact-checking strategy; an unknown name lists the known ones."""
    found = STRATEGIES.get(name)
    if found.kind != CHECK:
        known = ", ".join(strategies())
        raise NotAStrategyError(
            f"{found.name} is a {found.kind} graph (it pauses for a person), not a "
            f"fact-checking strategy: review a run with `kgcheck review RUN`; strategies: "
            f"{known}")
    return found
