"""The router every graph uses after a node that may already have decided the fact.

A node ends a fact early by writing its ``verdict`` (a dirty triple, a failed call); the
next edge then goes to END instead of on. Use it as
``builder.add_conditional_edges("build_prompt", unless_decided, then("ask_model"))``; the
path map names both ways, so the graph's picture labels the edges.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Final, Literal, NotRequired

from langgraph.graph import END
from typing_extensions import TypedDict

CONTINUE: Final = "continue"
DECIDED: Final = "decided"


class Decided(TypedDict):
    """The one key the router reads: LangGraph then hands it that channel, not the state."""

    verdict: NotRequired[Any]


async def unless_decided(state: Decided) -> Literal["continue", "decided"]:
    """Go on while the fact has no verdict; stop once a node has written one."""
    # Async on purpose: LangGraph runs a plain function router in a worker thread.
    return DECIDED if "verdict" in state else CONTINUE


def then(node: str) -> dict[Hashable, str]:
    """Return the path map of ``unless_decided``: on to ``node``, or END once decided."""
    return {CONTINUE: node, DECIDED: END}
