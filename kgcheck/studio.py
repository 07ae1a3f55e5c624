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

import logging
from typing import Any

from kgcheck.providers.secrets import redact_logs
from kgcheck.tracing import TracingError, setup_tracing, trace_streams_whole

logger = logging.getLogger(__name__)


# The dev server logs requests and errors; httpx logs model URLs: mask credentials in all.
redact_logs()
try:
    _setup = setup_tracing()
except TracingError as exc:
    # A dev server that refuses to serve over a tracing setting helps nobody: run untraced.
    logger.warning("tracing is off: %s", exc)
    _setup = None
if _setup is not None:
    trace_streams_whole()
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
