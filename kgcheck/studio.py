"""Serve the graphs to ``langgraph dev`` (Studio), traced when an endpoint is set.

Every registered strategy is an attribute here (``kgcheck.studio:dka``,
``kgcheck.studio:giv_f``, a plugin's ``kgcheck.studio:dka_cot``), and so is ``consensus``:
``langgraph.json`` (or the config ``kgcheck studio`` writes) names them. They are served
from here rather than from ``kgcheck.graphs`` so that the server starts tracing before it
builds them: OpenLIT gives nodes spans of their own only when it starts before
``add_node`` runs, and the graphs layer does not know about tracing.

Tracing follows the environment (``.env`` or the shell): with ``OTEL_EXPORTER_OTLP_ENDPOINT``
set, every run served gets workflow, node and model spans in one trace, as with
``kgcheck run``; without it, nothing is traced. A collector that does not answer, or an
endpoint that is not an http(s) URL, leaves the server serving untraced, with one warning
in its log that says why.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Coroutine, Generator
from typing import Any

from kgcheck.providers.secrets import redact_logs
from kgcheck.tracing import TracingError, setup_tracing

logger = logging.getLogger(__name__)


class _InContext(Awaitable[Any]):
    """Await a coroutine with every step of it run in one given context."""

    def __init__(self, coro: Coroutine[Any, Any, Any], context: contextvars.Context) -> None:
        self.coro = coro
        self.context = context

    def __await__(self) -> Generator[Any, Any, Any]:
        send: Any = self.coro.send
        value: Any = None
        while True:
            try:
                pending = self.context.run(send, value)
            except StopIteration as stop:
                return stop.value
            try:
                value, send = (yield pending), self.coro.send
            except GeneratorExit:
                self.context.run(self.coro.close)
                raise
            except BaseException as exc:  # noqa: BLE001 - cancellation goes to the coroutine
                value, send = exc, self.coro.throw


async def _stream_in_one_context(stream: AsyncIterator[Any]) -> AsyncGenerator[Any, None]:
    """Yield from ``stream``, advancing it always in the context it was started in.

    The server pulls each item of a run's stream from a task of its own, and a task runs
    in a copy of its creator's context: the workflow span made current at the start, and
    the run's fact id, would not reach the nodes of later steps. Their spans would start
    traces of their own, and OpenLIT could not end its span where it began it.
    """
    context = contextvars.copy_context()
    try:
        while True:
            try:
                item = await _InContext(stream.__anext__(), context)  # type: ignore[arg-type]
            except StopAsyncIteration:
                return
            yield item
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await _InContext(aclose(), context)


def _trace_streams_whole() -> None:
    """Make ``Pregel.astream`` run each stream in one context, outside every other wrapper."""
    from langgraph.pregel import Pregel
    from wrapt import wrap_function_wrapper

    if getattr(Pregel, "_kgcheck_one_context", False):
        return

    def astream(wrapped: Any, instance: Any, args: tuple,
                kwargs: dict) -> AsyncGenerator[Any, None]:
        return _stream_in_one_context(wrapped(*args, **kwargs))

    wrap_function_wrapper(Pregel.__module__, "Pregel.astream", astream)
    Pregel._kgcheck_one_context = True  # type: ignore[attr-defined]


# The dev server logs requests and errors; httpx logs model URLs: mask credentials in all.
redact_logs()
try:
    _setup = setup_tracing()
except TracingError as exc:
    # A dev server that refuses to serve over a tracing setting helps nobody: run untraced.
    logger.warning("tracing is off: %s", exc)
    _setup = None
if _setup is not None:
    _trace_streams_whole()
    logger.info("tracing Studio runs: spans go to %s",
                _setup.endpoint or "the tracer provider already set")

# Built only now, after tracing started, so that OpenLIT wraps every node. The server reads
# the graphs from the module's namespace, so each is compiled here, plugins included.
from kgcheck.graphs.served import served_graphs  # noqa: E402

SERVED = {graph.attribute: graph.compile() for graph in served_graphs().values()}
globals().update(SERVED)


def __getattr__(attribute: str) -> Any:
    """Explain a graph name the module does not serve (``kgcheck.studio:nope``)."""
    raise AttributeError(f"kgcheck.studio serves no graph {attribute!r}; it serves "
                         + ", ".join(sorted(SERVED)))
