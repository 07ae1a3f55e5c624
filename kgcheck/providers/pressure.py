"""Back-pressure signals: a model server saying it is overloaded (429, 503, timeouts).

The retrying transports report every transient failure here, retried or not, so that an
adaptive concurrency limit can back off before failures reach a verdict. A run may also
set a gate that every request awaits before it goes out (the limit takes back a slot the
fact lent while its client waited to retry). Listeners and gates are per run (context
variables), so two runs in one process do not slow each other down.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from kgcheck.failures import OVERLOAD_STATUS

Listener = Callable[[BaseException], None]
Gate = Callable[[], Awaitable[None]]


class Overloaded(Exception):
    """A server answered with an overload status (the signal; nothing raises it)."""

    def __init__(self, status_code: int, url: str) -> None:
        super().__init__(f"{url} answered {status_code}")
        self.status_code = status_code

_LISTENERS: contextvars.ContextVar[tuple[Listener, ...]] = contextvars.ContextVar(
    "kgcheck_pressure_listeners", default=())
_GATES: contextvars.ContextVar[tuple[Gate, ...]] = contextvars.ContextVar(
    "kgcheck_pressure_gates", default=())


def report(exc: BaseException) -> None:
    """Tell the current run's listeners that a call failed in a way worth backing off for."""
    for listener in _LISTENERS.get():
        listener(exc)


@contextmanager
def listening(listener: Listener, gate: Gate | None = None) -> Iterator[None]:
    """Call ``listener`` with every overload signal raised inside this block.

    Every async request sent inside it awaits ``gate`` first.
    """
    token = _LISTENERS.set((*_LISTENERS.get(), listener))
    gates = _GATES.set((*_GATES.get(), gate) if gate is not None else _GATES.get())
    try:
        yield
    finally:
        _GATES.reset(gates)
        _LISTENERS.reset(token)


async def _on_request(request: httpx.Request) -> None:
    for gate in _GATES.get():
        await gate()


async def _on_response(response: httpx.Response) -> None:
    if response.status_code in OVERLOAD_STATUS:
        report(Overloaded(response.status_code, str(response.request.url.host)))


def _on_response_sync(response: httpx.Response) -> None:
    if response.status_code in OVERLOAD_STATUS:
        report(Overloaded(response.status_code, str(response.request.url.host)))


def async_hooks() -> dict[str, list[Any]]:
    """Return httpx event hooks for an ``AsyncClient``: gate requests, report overloads.

    SDK clients retry 429 and 503 on their own; the hooks see every attempt.
    """
    return {"request": [_on_request], "response": [_on_response]}


def sync_hooks() -> dict[str, list[Any]]:
    """Return the same hooks for a blocking ``httpx.Client``."""
    return {"response": [_on_response_sync]}
