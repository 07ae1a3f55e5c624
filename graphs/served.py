"""The graphs kgcheck serves (Studio, ``kgcheck graph``): every registered graph.

The strategies, the ``review`` graph and ``consensus`` (which runs any strategy as its
members' method), in the registry's order. One list: ``langgraph.json`` is written from it
(``kgcheck studio --write-config``), ``kgcheck.studio`` serves it, and a test fails when
they disagree.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kgcheck.graphs.registry import AnyCompiledGraph, compile_graph, graphs

STUDIO_MODULE = "kgcheck.studio"


@dataclass(frozen=True)
class ServedGraph:
    """A graph as Studio lists it: its name, one line about it, and how to compile it."""

    name: str
    description: str
    compile: Callable[[], AnyCompiledGraph]

    @property
    def attribute(self) -> str:
        """The name ``kgcheck.studio`` exports it under (``giv-f`` -> ``giv_f``)."""
        return attribute_of(self.name)


def attribute_of(name: str) -> str:
    """Turn a graph name into a Python identifier: ``dka-sc`` -> ``dka_sc``."""
    return name.replace("-", "_").replace(".", "_")


def served_graphs() -> dict[str, ServedGraph]:
    """Every graph served, by name, in the registry's order."""
    return {name: ServedGraph(name, graph.description,
                              functools.partial(compile_graph, (graph.kind, name)))
            for name, graph in graphs().items()}


def langgraph_config(env: str = ".env") -> dict[str, Any]:
    """Return the ``langgraph.json`` that serves every graph through ``kgcheck.studio``."""
    return {
        "python_version": "3.11",
        "dependencies": ["."],
        "graphs": {name: {"path": f"{STUDIO_MODULE}:{graph.attribute}",
                          "description": graph.description}
                   for name, graph in served_graphs().items()},
        "env": env,
    }
