"""Engines: where a run's graphs execute. ``local`` (the default) or ``ray``.

The runner decides which facts to check, writes each verdict as it arrives and keeps the
run resumable; an engine only runs one graph on one input. A graph is named by a key
(``("strategy", "giv-z")`` or ``("consensus", "dka")``) that any process can compile, so the
Ray engine's workers build the same graphs the local engine does. Engines are plugins of
the one registry (``ENGINES``; packages add theirs under the ``kgcheck.engines`` group).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig

from kgcheck.graphs.registry import AnyCompiledGraph, GraphKey, compile_graph
from kgcheck.registry import Registry, UnknownNameError

__all__ = ["ENGINES", "Engine", "LocalEngine", "UnknownEngineError", "make_engine"]


class UnknownEngineError(UnknownNameError):
    """No engine is registered under that name."""


class Engine(Protocol):
    """Runs graphs by key; ``close`` releases what it holds (workers, a cluster)."""

    name: str

    async def invoke(self, key: GraphKey, state: Mapping[str, Any], context: Any,
                     config: RunnableConfig) -> dict[str, Any]:
        """Run the graph named ``key`` on ``state`` with ``context``; return its output."""
        ...

    def stats(self) -> dict[str, Any]:
        """Return what the summary reports about the engine (workers, cache hits)."""
        ...

    def close(self) -> None:
        """Release the engine's resources."""
        ...


class LocalEngine:
    """Graphs run on this process's event loop (asyncio; the runner bounds concurrency)."""

    name = "local"

    def __init__(self, **_: Any) -> None:
        self._graphs: dict[GraphKey, AnyCompiledGraph] = {}

    def graph(self, key: GraphKey) -> AnyCompiledGraph:
        """Return the compiled graph for ``key``, compiling it on first use."""
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = compile_graph(key)
        return graph

    async def invoke(self, key: GraphKey, state: Mapping[str, Any], context: Any,
                     config: RunnableConfig) -> dict[str, Any]:
        """Run the graph in this process."""
        return await self.graph(key).ainvoke(dict(state), context=context, config=config)

    def stats(self) -> dict[str, Any]:
        """Return the engine's name (nothing else to report)."""
        return {"name": self.name}

    def close(self) -> None:
        """Nothing to release."""


def _builtin_engines() -> None:
    ENGINES.register("local", LocalEngine)
    # Lazy: Ray is an optional extra, imported only by runs that ask for it.
    ENGINES.register("ray", "kgcheck.runs.ray_engine:RayEngine")


ENGINES: Registry[Any] = Registry("engine", group="kgcheck.engines", discover=_builtin_engines,
                                  unknown=UnknownEngineError)


def make_engine(name: str = "local", **options: Any) -> Engine:
    """Build the engine ``name`` (``local``, ``ray``) with its options."""
    factory = ENGINES.get(name)
    engine: Engine = factory(**options)
    return engine
