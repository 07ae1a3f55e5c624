"""The event loop kgcheck's own entry points run on: uvloop where it is installed.

A run against a fast model server spends its CPU in the event loop, LangGraph and the HTTP
stack. uvloop (libuv, written in C) does the loop's part (scheduling callbacks and tasks,
socket reads and writes) for less: a bare request costs 1.23 x less CPU, a chat model's
call 1.13 x (``benchmarks/bench_client_cpu.py --loops asyncio,uvloop``). The command line,
``kgcheck.run`` and the other sync twins, and the Ray pipeline's shard workers run their
coroutines here; an async caller (``await kgcheck.arun(...)``) keeps its own loop.

What a loop opened for its coroutines (model clients' connection pools) is closed on it
before it closes: the modules that open such things register a closer
(``close_at_loop_end``), and every loop made here runs them at its end.

``KGCHECK_EVENT_LOOP=asyncio`` picks the standard loop (to compare, or to debug with
asyncio's debug mode); ``uvloop`` requires it; unset or ``auto``, uvloop when it imports.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["ENV_VAR", "EventLoopError", "close_at_loop_end", "loop_factory", "run", "runner"]

ENV_VAR = "KGCHECK_EVENT_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")

T = TypeVar("T")


class EventLoopError(ValueError):
    """``KGCHECK_EVENT_LOOP`` names no loop, or asks for uvloop where it is not installed."""


def _choice() -> str:
    value = os.environ.get(ENV_VAR, "").strip().lower() or "auto"
    if value not in CHOICES:
        raise EventLoopError(f"{ENV_VAR}={value!r} is not one of {', '.join(CHOICES)}")
    return value


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """Return the factory of the loop to run on: uvloop's, or None for asyncio's own.

    Raises:
        EventLoopError: the environment variable is malformed, or asks for uvloop and
            uvloop does not import.

    """
    choice = _choice()
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise EventLoopError(f"{ENV_VAR}=uvloop, but uvloop is not installed "
                                 "(pip install uvloop; it does not run on Windows)") from None
        return None
    return uvloop.new_event_loop


# What runs on a loop before it closes (see close_at_loop_end), in the order registered.
_CLOSERS: list[Callable[[], Awaitable[None]]] = []


def close_at_loop_end(closer: Callable[[], Awaitable[None]]) -> None:
    """Have every loop made here await ``closer()`` before it closes (once per closer).

    A closer releases what the loop it runs on opened (HTTP sessions, connections); left
    open, they would be reported as unclosed when the loop or the process ends.
    """
    if closer not in _CLOSERS:
        _CLOSERS.append(closer)


async def _close_resources() -> None:
    for closer in list(_CLOSERS):
        try:
            await closer()
        except Exception:  # one closer failing must not keep the others from running
            pass


# Final in typeshed, not at run time: close() is the one place every way out passes through
# (``with``, an explicit close, the loop's error).
class _Runner(asyncio.Runner):  # type: ignore[misc]
    """An ``asyncio.Runner`` that runs the registered closers on its loop before closing."""

    def close(self) -> None:
        loop = getattr(self, "_loop", None)
        if loop is not None and not loop.is_closed() and _CLOSERS:
            try:
                self.run(_close_resources())
            except BaseException:  # a Ctrl-C while closing: the loop closes all the same
                pass
        super().close()


def runner() -> asyncio.Runner:
    """Return an ``asyncio.Runner`` on kgcheck's loop (several coroutines, one loop)."""
    return _Runner(loop_factory=loop_factory())


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to the end on a new loop of kgcheck's kind, as ``asyncio.run`` does."""
    try:
        loop = runner()
    except EventLoopError:
        main.close()  # never awaited: say nothing about it beyond the error
        raise
    with loop:
        return loop.run(main)
