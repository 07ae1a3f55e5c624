"""Graphs by name: the CLI, the Python API, Studio, engines and consensus members resolve here.

A strategy is a ``Strategy``: its name (what the CLI and Studio call it), its Context class
(the settings, and in ``METHOD`` / ``REPLAYS`` the label its verdicts carry and the recorded
answers replay serves it), and the function that builds its graph for that Context class.
Built-in strategies are the modules of ``kgcheck.graphs.strategies``, each registering its
own; installed packages add theirs under the ``kgcheck.strategies`` entry-point group
(``dka-cot = "my_package.cot:strategy"``). Graphs take ``{"fact": FactInput}`` and return
``{"verdict": ...}``.

An entry's ``kind`` says what its graph is for: ``strategy`` (a fact-checking strategy, what
``kgcheck run``, the Python API and consensus members use), ``consensus`` (a graph that runs
a strategy as its members' method: ``around`` builds it for one) or ``review`` (a graph that
pauses for a person, served in Studio and driven by ``kgcheck review``, never run as a
method). ``strategies()`` lists the strategies; ``graphs()`` lists every entry, which is
what Studio serves. ``compile_graph`` is the one way to get a compiled graph: the local and
Ray engines, Studio, the Python API and the review session all call it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, TypeAlias

from langgraph.graph.state import CompiledStateGraph, StateGraph

from kgcheck.data.facts import Fact, Label
from kgcheck.graphs.context import Context, make_context
from kgcheck.registry import Registry, UnknownNameError

# Each strategy has its own state and Context classes: the registry holds any of them.
AnyStateGraph: TypeAlias = StateGraph[Any, Any, Any, Any]
AnyCompiledGraph: TypeAlias = CompiledStateGraph[Any, Any, Any, Any]
# Checks a batch run makes before starting: (facts, context) -> warnings to print.
Preflight = Callable[[Iterable[Fact], Any], list[str]]
Kind = Literal["strategy", "consensus", "review"]
STRATEGY: Kind = "strategy"
# A graph named by kind and name: ("strategy", "giv-z"), ("review", "review"); a consensus
# key names its members' method: ("consensus", "dka").
GraphKey = tuple[Kind, str]


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
        kind: ``strategy`` for a fact-checking strategy, ``consensus`` for a graph built
            around one (``around``), ``review`` for a graph that pauses for a person
            (served, never run as a method).
        around: For ``consensus``: build the graph around a strategy, by its name.
        calls_model: False for a strategy that asks no model (``schema``): its runs need
            no model, and its verdicts name none.
        labels: The labels its verdicts take (``schema``: F, NEI, NA). Tables of its runs
            give each label besides T and F a column of its own, headed by the label.

    """

    name: str
    context: type[Context]
    # Takes the strategy's Context class (each build function names its own base class).
    build: Callable[[Any], AnyStateGraph] = field(repr=False)
    description: str = ""
    preflight: Preflight | None = field(default=None, repr=False)
    kind: Kind = STRATEGY
    around: Callable[[str], AnyStateGraph] | None = field(default=None, repr=False)
    calls_model: bool = True
    labels: tuple[Label, ...] = ("T", "F", "NA")

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
# Graphs of the other kinds, each registering itself on import (after the strategies).
OTHER_GRAPHS = ("kgcheck.graphs.review", "kgcheck.graphs.consensus.graph")


def _builtin_graphs() -> None:
    # Every module of the package registers its strategies on import: nothing lists them.
    package = importlib.import_module(BUILTIN_PACKAGE)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{BUILTIN_PACKAGE}.{module.name}")
    for name in OTHER_GRAPHS:
        importlib.import_module(name)


STRATEGIES: Registry[Strategy] = Registry(
    "strategy", group="kgcheck.strategies", discover=_builtin_graphs,
    unknown=UnknownStrategyError)


def register(strategy: Strategy) -> Strategy:
    """Register a graph under its name; returns it (so a module can keep it)."""
    if strategy.kind == STRATEGY and not strategy.context.METHOD:
        raise ValueError(f"strategy {strategy.name!r}: its Context class "
                         f"{strategy.context.__name__} sets no METHOD (the verdicts' label)")
    STRATEGIES.register(strategy.name, strategy, origin=strategy.build.__module__)
    return strategy


def graphs() -> dict[str, Strategy]:
    """Every registered graph by name, whatever its kind (what Studio serves)."""
    return STRATEGIES.items()


def strategies() -> dict[str, Strategy]:
    """Every registered fact-checking strategy, by name."""
    return {name: s for name, s in STRATEGIES.items().items() if s.kind == STRATEGY}


def get_graph(name: str) -> Strategy:
    """Look up a registered graph of any kind; an unknown name lists the known ones."""
    return STRATEGIES.get(name)


def get_strategy(name: str) -> Strategy:
    """Look up a fact-checking strategy; an unknown name lists the known strategies."""
    if name not in STRATEGIES:
        known = ", ".join(strategies()) or "none"
        raise UnknownStrategyError(f"unknown strategy {name.strip()!r}; known: {known}")
    found = STRATEGIES.get(name)
    if found.kind != STRATEGY:
        known = ", ".join(strategies())
        advice = ("it pauses for a person: review a run with `kgcheck review RUN`"
                  if found.kind == "review" else
                  "it runs a strategy's graph for several models: give consensus members")
        raise NotAStrategyError(f"{found.name} is a {found.kind} graph ({advice}), not a "
                                f"fact-checking strategy; strategies: {known}")
    return found


def verdict_labels(name: str | None) -> tuple[Label, ...]:
    """Return the labels a strategy's verdicts take (T, F, NA for a name not registered)."""
    if not name or name not in STRATEGIES:
        return Strategy.labels
    return STRATEGIES.get(name).labels


def forget_builders() -> None:
    """Drop every registered graph's cached builder: the next compile builds it anew.

    A tracer that wraps ``StateGraph.add_node`` (OpenLIT does, for node spans) sees only
    graphs built after it starts; tracing calls this once it has started.
    """
    for entry in STRATEGIES.items().values():
        entry.__dict__.pop("builder", None)


def compile_graph(key: GraphKey | str, **kwargs: Any) -> AnyCompiledGraph:
    """Compile the graph a key or name names; ``kwargs`` go to ``compile`` (``checkpointer``).

    Every process compiles its own (the Ray workers build what the local engine builds).
    """
    kind, name = (key if isinstance(key, tuple) else (get_graph(key).kind, key))
    if kind == "consensus":
        consensus = next(g for g in STRATEGIES.items().values() if g.kind == "consensus")
        if name == consensus.name or consensus.around is None:
            return consensus.compile(**kwargs)
        return consensus.around(name).compile(name=consensus.name, **kwargs)
    found = get_strategy(name) if kind == STRATEGY else get_graph(name)
    if found.kind != kind:
        raise NotAStrategyError(f"{name} is a {found.kind} graph, not a {kind} graph")
    return found.compile(**kwargs)
