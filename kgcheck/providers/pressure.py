"""Back-pressure signals: a model server saying it is overloaded (429, 503, timeouts).

The retrying transports report every transient failure here, retried or not, so that an
adaptive concurrency limit can back off before failures reach a verdict. Listeners are
per run (a context variable), so two runs in one process do not slow each other down.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Listener = Callable[[BaseException], None]

_LISTENERS: contextvars.ContextVar[tuple[Listener, ...]] = contextvars.ContextVar(
    "kgcheck_pressure_listeners", default=())


def report(exc: BaseException) -> None:
    """Tell the current run's listeners that a call failed in a way worth backing off for."""
    for listener in _LISTENERS.get():
        listener(exc)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Call ``listener`` with every overload signal raised inside this block."""
    token = _LISTENERS.set((*_LISTENERS.get(), listener))
    try:
        yield
    finally:
        _LISTENERS.reset(token)
