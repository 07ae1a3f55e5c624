"""Trace runs with OpenTelemetry through OpenLIT: workflow, node, model and Chroma spans.

Tracing is on when ``kgcheck run --trace`` asks for it or when the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; spans then go over OTLP/HTTP to that endpoint (to
``http://127.0.0.1:4318``, OpenLIT's collector, when ``--trace`` is given without one). A
collector that does not answer stops ``--trace`` with an error at once, rather than a run
that retries every export; when only the environment asked, the run goes on untraced.

What stays off unless asked for:

- message content (prompts and answers) on spans: set
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` or pass ``capture_content=True``;
- a dump of every span on the console: set ``KGCHECK_TRACE_CONSOLE=1``;
- network at start-up: OpenLIT reads model prices from ``kgcheck/providers/pricing.json`` instead of
  fetching its price list.

OpenLIT wraps LangGraph's ``add_node`` when it starts, so tracing must start before the
strategy modules build their graphs: call :func:`setup_tracing` before ``get_strategy``.
Every span carries the run id and the fact id (``kgcheck.run_id``, ``kgcheck.fact_id``, and
the dataset, method and step when known), read from the graph's input and the run's metadata.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import os
import socket
import sys
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Coroutine,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from kgcheck.arguments import truthy
from kgcheck.providers.pricing import PRICING_FILE
from kgcheck.providers.secrets import MASK, is_secret_name, redact_url, redact_value

logger = logging.getLogger(__name__)

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CONSOLE_ENV = "KGCHECK_TRACE_CONSOLE"
SERVICE_ENV = "OTEL_SERVICE_NAME"
TIMEOUT_ENV = "OTEL_EXPORTER_OTLP_TIMEOUT"
TRACES_TIMEOUT_ENV = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
METRICS_TIMEOUT_ENV = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"
# Seconds an export may take (the OTLP default is 10, with retries inside it): a collector
# that answers 503 or hangs then delays the end of a run by a few seconds, not half a minute.
EXPORT_TIMEOUT = 3.0
# Loggers of the OTLP exporters, which log every failed batch.
QUIET_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                 "opentelemetry.exporter.otlp.proto.http.metric_exporter",
                 "opentelemetry.exporter.otlp.common.http")
DEFAULT_ENDPOINT = "http://127.0.0.1:4318"

SERVICE_NAME = "kgcheck"
# Run metadata keys (``kgcheck_run_id``, ``kgcheck_fact_id``, ...) become span attributes
# ``kgcheck.run_id``, ``kgcheck.fact_id``, ...
META_PREFIX = "kgcheck_"
ATTR_PREFIX = "kgcheck."
# The graphs reach every model through LangChain and every index through Chroma. OpenLIT's
# provider (openai, ollama) and HTTP instrumentors would only repeat those spans, and
# loading all of its seventy instrumentors costs seconds at start-up.
INSTRUMENTORS = ("langchain", "langgraph", "chroma")
# Span attributes that hold prompts, answers, documents or queries: dropped unless message
# content capture is on (OpenLIT's LangGraph node spans set some of them regardless).
CONTENT_ATTRIBUTES = frozenset({
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
    "gen_ai.workflow.input", "gen_ai.workflow.output", "gen_ai.content.prompt",
    "gen_ai.content.completion", "gen_ai.content.revised_prompt", "gen_ai.content.reasoning",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.retrieval.query",
    "gen_ai.retrieval.query.text", "gen_ai.retrieval.documents", "gen_ai.agent.step_messages",
    "gen_ai.message.content", "gen_ai.framework.query.text", "gen_ai.agent.instructions",
    "db.query.text", "db.query.summary", "db.where_document",
})

_RUN_ATTRIBUTES: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "kgcheck_run_attributes", default=None
)


class TracingError(ValueError):
    """A tracing setting has a value that cannot be used."""


@dataclass(frozen=True)
class TracingSetup:
    """How tracing was started: where spans go and what they may contain."""

    endpoint: str | None
    capture_content: bool
    console: bool
    own_provider: bool


_SETUP: TracingSetup | None = None


def tracing_requested() -> bool:
    """Whether the environment asks for traces (an OTLP endpoint is set)."""
    return bool(os.environ.get(ENDPOINT_ENV) or os.environ.get(TRACES_ENDPOINT_ENV))


def current_setup() -> TracingSetup | None:
    """Return the set-up of a started tracing, or None when tracing is off."""
    return _SETUP


def setup_tracing(force: bool = False, *, capture_content: bool | None = None,
                  console: bool | None = None) -> TracingSetup | None:
    """Start OpenLIT tracing once; a no-op when neither ``force`` nor the environment asks.

    Args:
        force: Trace even without ``OTEL_EXPORTER_OTLP_ENDPOINT`` (``--trace``); spans then
            go to ``http://127.0.0.1:4318``.
        capture_content: Put prompts and answers on spans; default: the
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` environment variable, else off.
        console: Also print every finished span; default: ``KGCHECK_TRACE_CONSOLE``, else off.

    A global ``TracerProvider`` set before this call (a test's in-memory exporter, an
    application's own exporters) is reused as it is; otherwise one is created that exports
    over OTLP/HTTP.

    Returns:
        The set-up in force, or None when tracing stays off.

    Raises:
        TracingError: ``force`` is set and no collector answers at the endpoint, or the
            endpoint is not an http(s) URL.

    """
    global _SETUP
    if _SETUP is not None:
        return _SETUP
    if not force and not tracing_requested():
        return None
    if capture_content is None:
        capture_content = truthy(os.environ.get(CONTENT_ENV))
    if console is None:
        console = truthy(os.environ.get(CONSOLE_ENV))
    if not PRICING_FILE.is_file():
        raise TracingError(f"pricing file {PRICING_FILE} is missing; reinstall kgcheck")

    found = trace.get_tracer_provider()
    own_provider = not isinstance(found, TracerProvider)
    endpoint: str | None = None
    if isinstance(found, TracerProvider):
        provider = found
    else:
        endpoint = traces_endpoint()
        if not _reachable(endpoint):
            message = (f"no OTLP collector answers at {endpoint}: start one (e.g. OpenLIT, "
                       f"Jaeger) or point {ENDPOINT_ENV} at yours")
            if force:
                raise TracingError(f"--trace: {message}")
            # Asked for by the environment only: run untraced rather than fail the run.
            logger.warning("tracing is off: %s", message)
            return None
        provider = _make_provider(endpoint, console)
        trace.set_tracer_provider(provider)
    provider.add_span_processor(RunAttributesProcessor(capture_content=capture_content))

    import openlit
    from openlit._instrumentors import MODULE_NAME_MAP

    env_endpoint = tracing_requested()
    if own_provider and env_endpoint and not os.environ.get(TIMEOUT_ENV):
        # OpenLIT builds its metrics exporter from the environment: bound it the same way.
        os.environ.setdefault(METRICS_TIMEOUT_ENV, f"{export_timeout():g}")
    openlit.init(
        service_name=os.environ.get(SERVICE_ENV) or SERVICE_NAME,
        environment=os.environ.get("OTEL_DEPLOYMENT_ENVIRONMENT") or "default",
        pricing_json=str(PRICING_FILE),
        capture_message_content=capture_content,
        disabled_instrumentors=[name for name in MODULE_NAME_MAP if name not in INSTRUMENTORS],
        # Metrics and events would fall back to console exporters without an endpoint.
        disable_metrics=not (own_provider and env_endpoint),
        disable_events=True,
    )
    _end_model_spans_in_async_runs()
    _wrap_graph_entry_points()
    # Graphs built before OpenLIT wrapped add_node would have no node spans: the registry's
    # are built anew at their next compile (module-level ``graph`` objects stay as built).
    from kgcheck.graphs.registry import forget_builders

    forget_builders()
    _SETUP = TracingSetup(endpoint=endpoint, capture_content=capture_content,
                          console=console, own_provider=own_provider)
    return _SETUP


def traces_endpoint() -> str:
    """Return the URL spans are posted to: the OTLP traces endpoint the environment names."""
    traces_url = os.environ.get(TRACES_ENDPOINT_ENV)
    if traces_url:
        return traces_url
    base = os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT
    if not base.startswith(("http://", "https://")):
        raise TracingError(f"{ENDPOINT_ENV}={base!r}: expected an http(s):// URL, "
                           f"e.g. {DEFAULT_ENDPOINT}")
    return base.rstrip("/") + "/v1/traces"


def _reachable(url: str, timeout: float = 2.0) -> bool:
    """Tell whether something accepts connections at the URL's host and port."""
    parsed = urlsplit(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


class DroppingExporter(SpanExporter):
    """Export through ``exporter`` until a batch fails; then drop and count every span.

    A collector that accepts connections but answers 503, or never answers, would otherwise
    cost every later batch its full timeout and retries, at exit too. What was not
    delivered is reported once (``report_dropped``), instead of one log line per batch.
    """

    def __init__(self, exporter: SpanExporter, endpoint: str) -> None:
        self.exporter = exporter
        self.endpoint = endpoint
        self.failed = False
        self.dropped = 0
        self.reported = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export a batch, or count it as dropped once the collector has failed."""
        if not self.failed:
            try:
                result = self.exporter.export(spans)
            except Exception:  # noqa: BLE001 - tracing must never break a run
                result = SpanExportResult.FAILURE
            if result is SpanExportResult.SUCCESS:
                return result
            self.failed = True
        self.dropped += len(spans)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        """Shut the wrapped exporter down."""
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the wrapped exporter."""
        return self.exporter.force_flush(timeout_millis)

    def report_dropped(self) -> str | None:
        """Say once how many spans were lost, and where they should have gone."""
        if not self.dropped or self.reported:
            return None
        self.reported = True
        return (f"tracing: {self.dropped} span{'s' if self.dropped != 1 else ''} could not be "
                f"sent to {redact_url(self.endpoint)} (the collector failed or did not answer "
                f"within {export_timeout():g} s) and were dropped")


_EXPORTER: DroppingExporter | None = None


def export_timeout() -> float:
    """Seconds one export may take: ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, else a few."""
    raw = os.environ.get(TRACES_TIMEOUT_ENV) or os.environ.get(TIMEOUT_ENV)
    try:
        return float(raw) if raw else EXPORT_TIMEOUT
    except ValueError:
        return EXPORT_TIMEOUT


def _make_provider(traces_url: str, console: bool) -> TracerProvider:
    """Build a TracerProvider that exports over OTLP/HTTP (and to the console if asked)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    global _EXPORTER
    resource = Resource.create({"service.name": os.environ.get(SERVICE_ENV) or SERVICE_NAME})
    provider = TracerProvider(resource=resource)
    _EXPORTER = DroppingExporter(OTLPSpanExporter(endpoint=traces_url, timeout=export_timeout()),
                                 traces_url)
    provider.add_span_processor(BatchSpanProcessor(_EXPORTER))
    if console:
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    # The exporters' own messages repeat for every failed batch; one line says it at exit.
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    # Registered after the provider's own exit hook, so it runs first (atexit is LIFO).
    atexit.register(finish_tracing)
    return provider


def finish_tracing() -> str | None:
    """Export what is buffered, end tracing, and say once on stderr what could not be sent.

    Runs at exit when kgcheck made its own exporter. Its time is bounded: one export of
    at most ``export_timeout()`` seconds, as every later batch is dropped once one failed.
    Returns the report line, or None when every span went out.
    """
    if _EXPORTER is None:
        return None
    provider = trace.get_tracer_provider()
    if not _EXPORTER.failed:
        flush_tracing(int(export_timeout() * 1000))
    shutdown = getattr(provider, "shutdown", None)
    if shutdown is not None:
        shutdown()
    report = _EXPORTER.report_dropped()
    if report:
        print(f"warning: {report}", file=sys.stderr, flush=True)
    return report


def flush_tracing(timeout_millis: int = 5000) -> bool:
    """Export the spans still buffered; True when everything went out in time."""
    provider = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    return bool(flush(timeout_millis)) if flush else True


# --- run and fact ids on every span ---------------------------------------------------------


def run_attributes() -> dict[str, str]:
    """Return the kgcheck attributes of the code running now (run metadata, graph input)."""
    from langchain_core.runnables.config import var_child_runnable_config

    attrs: dict[str, str] = {}
    config = var_child_runnable_config.get()
    if config:
        attrs.update(_metadata_attributes(config.get("metadata") or {}))
    attrs.update(_RUN_ATTRIBUTES.get() or {})
    return attrs


def _metadata_attributes(metadata: Mapping[str, Any]) -> dict[str, str]:
    return {
        ATTR_PREFIX + key[len(META_PREFIX):]: str(value)
        for key, value in metadata.items()
        if key.startswith(META_PREFIX) and value not in (None, "")
    }


def _invocation_attributes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, str]:
    """Attributes of one graph invocation: the fact in its input, the kgcheck metadata."""
    attrs = dict(_RUN_ATTRIBUTES.get() or {})
    config = kwargs.get("config") if "config" in kwargs else (args[1] if len(args) > 1 else None)
    if isinstance(config, Mapping):
        attrs.update(_metadata_attributes(config.get("metadata") or {}))
    payload = kwargs.get("input", args[0] if args else None)
    fact = payload.get("fact") if isinstance(payload, Mapping) else None
    if isinstance(fact, Mapping):
        for key, attr in (("id", "fact_id"), ("dataset", "dataset")):
            if fact.get(key):
                attrs[ATTR_PREFIX + attr] = str(fact[key])
    return attrs


class RunAttributesProcessor(SpanProcessor):
    """Copy the run id, fact id and their kin onto every span; keep content off if asked."""

    def __init__(self, capture_content: bool = False) -> None:
        self.capture_content = capture_content

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        """Set the kgcheck attributes of the running code on ``span``."""
        try:
            attrs = run_attributes()
        except Exception:  # noqa: BLE001 - tracing must never break a run
            attrs = {}
        if attrs:
            span.set_attributes(attrs)
        _filter_attributes(span, drop_content=not self.capture_content)

    def on_end(self, span: ReadableSpan) -> None:
        """Do nothing: the attributes are set at the start."""

    def shutdown(self) -> None:
        """Do nothing: this processor holds no resources."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Report success: nothing is buffered here."""
        return True


def _clean(key: str, value: Any) -> Any:
    """Mask credentials in an attribute value (a server URL with ``?token=``, a setting)."""
    if is_secret_name(key.rsplit(".", 1)[-1]) and isinstance(value, str) and value:
        return MASK
    return redact_value(value)


def _filter_attributes(span: Span, *, drop_content: bool) -> None:
    """Make ``span`` mask credentials, and ignore prompts, answers and documents if asked."""
    set_attribute = span.set_attribute
    set_attributes = span.set_attributes
    for key, value in (span.attributes or {}).items():
        cleaned = _clean(key, value)
        if cleaned != value:
            set_attribute(key, cleaned)

    def kept(key: str) -> bool:
        return not (drop_content and key in CONTENT_ATTRIBUTES)

    def filtered_attribute(key: str, value: Any) -> None:
        if kept(key):
            set_attribute(key, _clean(key, value))

    def filtered_attributes(attributes: Mapping[str, Any]) -> None:
        set_attributes({k: _clean(k, v) for k, v in attributes.items() if kept(k)})

    # Instrumentations write through these two methods; the span is the SDK's own object.
    span.set_attribute = filtered_attribute  # type: ignore[method-assign]
    span.set_attributes = filtered_attributes  # type: ignore[method-assign]


def _end_model_spans_in_async_runs() -> None:
    """Let OpenLIT's model spans end when a model answers in an async graph.

    OpenLIT's LangChain handler makes the model span current when a call starts and undoes
    that when it ends; LangChain reports the end from another asyncio task, where undoing
    fails, so the span never ends and is never exported. Undo it right after the start, in
    the context that made it current: the span still ends with the call, with its tokens.
    """
    from langchain_core.callbacks.manager import BaseCallbackManager
    from openlit.__helpers import reset_framework_llm_active
    from opentelemetry import context as otel_context

    # OpenLIT's wrapt wrapper, if it is installed: an untyped object.
    injector: Any = getattr(BaseCallbackManager.__init__, "_self_wrapper", None)
    handler = injector.get_handler() if hasattr(injector, "get_handler") else None
    if handler is None or getattr(handler, "_kgcheck_patched", False):
        return

    def release(run_id: Any) -> None:
        holder = handler.spans.get(run_id)
        if holder is None or not isinstance(holder.token, tuple):
            return
        framework_token, context_token = holder.token
        holder.token = None
        otel_context.detach(context_token)
        reset_framework_llm_active(framework_token)

    def describe(run_id: Any, metadata: Mapping[str, Any]) -> None:
        # The call's own metadata says which fact, method and step a model call is for,
        # and LangChain's ls_model_name names the model where the class name would not.
        holder = handler.spans.get(run_id)
        if holder is None:
            return
        holder.span.set_attributes(_metadata_attributes(metadata))
        model = metadata.get("ls_model_name")
        if model and holder.model_name in ("unknown", holder.span.name.removeprefix("chat ")):
            holder.model_name = str(model)
            holder.span.set_attribute("gen_ai.request.model", str(model))
            holder.span.update_name(f"chat {model}")

    for name in ("on_chat_model_start", "on_llm_start"):
        original = getattr(handler, name)

        def started(*args: Any, _original: Any = original, **kwargs: Any) -> None:
            _original(*args, **kwargs)
            try:
                release(kwargs.get("run_id"))
                describe(kwargs.get("run_id"), kwargs.get("metadata") or {})
            except Exception:  # noqa: BLE001 - tracing must never break a run
                logger.debug("could not release a model span", exc_info=True)

        setattr(handler, name, started)
    handler._kgcheck_patched = True


def _wrap_pregel(purpose: str, wrappers: Mapping[str, Any]) -> None:
    """Wrap methods of LangGraph's ``Pregel`` with wrapt, once per purpose per process.

    The one place kgcheck patches LangGraph: every compiled graph is a ``Pregel``, so
    wrapping the class reaches graphs built before and after, whoever compiled them.
    """
    from langgraph.pregel import Pregel
    from wrapt import wrap_function_wrapper

    marker = f"_kgcheck_{purpose}"
    if getattr(Pregel, marker, False):
        return
    for name, wrapper in wrappers.items():
        wrap_function_wrapper(Pregel.__module__, f"Pregel.{name}", wrapper)
    setattr(Pregel, marker, True)


def _wrap_graph_entry_points() -> None:
    """Remember each graph invocation's fact and run ids while it runs (outside OpenLIT's)."""
    def invoke(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        token = _RUN_ATTRIBUTES.set(_invocation_attributes(args, kwargs))
        try:
            return wrapped(*args, **kwargs)
        finally:
            _RUN_ATTRIBUTES.reset(token)

    async def ainvoke(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        token = _RUN_ATTRIBUTES.set(_invocation_attributes(args, kwargs))
        try:
            return await wrapped(*args, **kwargs)
        finally:
            _RUN_ATTRIBUTES.reset(token)

    def stream(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Iterator[Any]:
        token = _RUN_ATTRIBUTES.set(_invocation_attributes(args, kwargs))
        try:
            yield from wrapped(*args, **kwargs)
        finally:
            _reset_quietly(token)

    async def astream(wrapped: Any, instance: Any, args: tuple,
                      kwargs: dict) -> AsyncIterator[Any]:
        token = _RUN_ATTRIBUTES.set(_invocation_attributes(args, kwargs))
        try:
            async for item in wrapped(*args, **kwargs):
                yield item
        finally:
            _reset_quietly(token)

    _wrap_pregel("traced", {"invoke": invoke, "ainvoke": ainvoke, "stream": stream,
                            "astream": astream})


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


def trace_streams_whole() -> None:
    """Make ``Pregel.astream`` run each stream in one context, outside every other wrapper.

    Call it after :func:`setup_tracing` (the server that pulls streams item by item does):
    the wrapper put on last is the outermost.
    """

    def astream(wrapped: Any, instance: Any, args: tuple,
                kwargs: dict) -> AsyncGenerator[Any, None]:
        return _stream_in_one_context(wrapped(*args, **kwargs))

    _wrap_pregel("one_context", {"astream": astream})


def _reset_quietly(token: contextvars.Token) -> None:
    # A generator closed from another context (garbage collection) cannot reset the variable;
    # that context ends with it, so nothing is left behind.
    try:
        _RUN_ATTRIBUTES.reset(token)
    except ValueError:
        pass


__all__ = ["setup_tracing", "flush_tracing", "finish_tracing", "tracing_requested",
           "current_setup", "DroppingExporter",
           "run_attributes", "RunAttributesProcessor", "TracingSetup", "TracingError",
           "PRICING_FILE", "DEFAULT_ENDPOINT", "trace_streams_whole"]
