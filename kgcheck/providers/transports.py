"""Transport failures of model calls: which are worth a retry, the backoff, clear messages.

Ollama calls are retried by kgcheck (``RetryingModel`` mixed into ChatOllama); OpenAI calls
by the openai client itself, and ``ExplainedModel`` only rewrites the error once its
retries are spent. Either way a spent error keeps its type (so a run loop can tell an
unreachable server from a bad answer) and its message names the model, the server and the
number of attempts, with any credentials removed from the URL.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import random
import ssl
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import httpx
from langchain_core.outputs import ChatGenerationChunk, ChatResult

from kgcheck.data.httpbody import BodyTooLargeError, CappedTransport
from kgcheck.event_loop import close_at_loop_end
from kgcheck.failures import Failure, classify, is_transient
from kgcheck.providers import pressure
from kgcheck.providers.secrets import redact_text, redact_url

# Seconds a whole call may run past its timeout before it is cut (see RetryingModel._bound).
BOUND_MARGIN = 0.25

# The largest model reply read (decoded): a long answer is a few KB; a streamed one with
# token details a few hundred. Past it the reply is refused, not read on (a gzip bomb).
MAX_REPLY_BYTES = 16 * 2**20

# The longest pause between two retries, whatever the backoff setting.
RETRY_BACKOFF_MAX = 8.0

class UnknownModelError(ValueError):
    """A model spec names no known provider, is malformed, or names a model the server lacks."""


class ModelUnreachableError(ValueError):
    """Nothing answers at a live model's server (checked once before a run starts)."""

# The longest wait for the one request that checks a server is there before a run.
REACH_TIMEOUT = 10.0


def reach(url: str, *, where: str, hint: str, timeout: float,
          headers: dict[str, str] | None = None) -> None:
    """GET ``url`` once; raise ModelUnreachableError unless some HTTP answer comes back.

    Any status counts as reached (a server without the probed route still answers): what is
    checked is that a server listens and speaks HTTP, before facts are sent to it.
    """
    try:
        # Streamed and closed unread: the answer's status is all that is checked, and a
        # body (however large, however compressed) is never read.
        with httpx.stream("GET", url, headers=headers, verify=ssl_context(),
                          timeout=min(timeout, REACH_TIMEOUT) if timeout > 0 else REACH_TIMEOUT):
            pass
    except httpx.HTTPError as exc:
        detail = redact_text(str(exc).strip()) or type(exc).__name__
        raise ModelUnreachableError(f"cannot reach {where}: {detail}; {hint}") from None


def backoff_delay(retry: int, initial: float) -> float:
    """Seconds to wait before retry number ``retry`` (1-based): doubling, capped, jittered."""
    delay = min(RETRY_BACKOFF_MAX, initial * 2 ** (retry - 1))
    # Jitter down to 3/4 so that many facts failing together do not retry in lockstep.
    return delay * (0.75 + 0.25 * random.random())


def explain_failure(exc: BaseException, *, spec: str, url: str, attempts: int,
                    timeout: float | None) -> BaseException:
    """Rewrite a spent transport error's message to name the model, server and attempts.

    The exception keeps its type: run loops tell an unreachable server by it.
    """
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    where = f"{spec} at {redact_url(url)}"
    # Transport errors quote the URL they tried, query string and all.
    detail = redact_text(str(exc).strip())
    said = f": {detail}" if detail else ""
    status = getattr(exc, "status_code", None)
    if classify(exc) is Failure.TIMEOUT or "timed out" in detail.lower():
        limit = f" within {timeout:g} s" if timeout else ""
        message = f"{where} gave no answer{limit} ({tries}){said}"
    elif isinstance(status, int) and status > 0:
        message = f"{where} failed with HTTP {status} ({tries}){said}"
    else:
        message = f"cannot reach {where} ({tries}){said}"
    if hasattr(exc, "error"):
        # ollama.ResponseError renders ``error`` and appends the status itself.
        exc.error = message.replace(f" (status code: {status})", "")
    if hasattr(exc, "message"):
        exc.message = message
    exc.args = (message, *exc.args[1:])
    return exc


def capped_transport(*, asynchronous: bool) -> CappedTransport:
    """Return an httpx transport for a model client: TLS as shared, replies capped.

    Bodies are decoded in the transport (gzip, deflate, zstd) and a reply past
    ``MAX_REPLY_BYTES`` decoded ends in ``BodyTooLargeError``, however it was compressed.
    """
    inner = (_aiohttp_transport()(verify=ssl_context()) if asynchronous
             else httpx.HTTPTransport(verify=ssl_context()))
    return CappedTransport(inner, MAX_REPLY_BYTES)


def model_transports(*, asynchronous: bool) -> dict[str, Any]:
    """Return an httpx client's ``transport`` and ``mounts`` for a model client.

    httpx reads HTTP(S)_PROXY, ALL_PROXY and NO_PROXY only when it builds its own transport;
    a model client is given kgcheck's, so without ``mounts`` it would go straight past a
    proxy the user set. Each proxy gets a capped transport of its own; a NO_PROXY host
    maps to None, which httpx reads as "the client's own transport".
    """
    # httpx's own reading of the environment (curl's NO_PROXY rules, lowercase names too).
    from httpx._utils import get_environment_proxies

    mounts: dict[str, CappedTransport | None] = {}
    for pattern, proxy in get_environment_proxies().items():
        if proxy is None:
            mounts[pattern] = None
            continue
        inner = (httpx.AsyncHTTPTransport(proxy=proxy, verify=ssl_context()) if asynchronous
                 else httpx.HTTPTransport(proxy=proxy, verify=ssl_context()))
        mounts[pattern] = CappedTransport(inner, MAX_REPLY_BYTES)
    return {"transport": capped_transport(asynchronous=asynchronous), "mounts": mounts}


# The model transports whose aiohttp session is open, by the loop it was opened on. Held
# until closed: a session collected open is reported as unclosed.
_OPENED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, set[httpx.AsyncBaseTransport]] = (
    weakref.WeakKeyDictionary())


async def close_sessions() -> None:
    """Close the aiohttp sessions that model calls opened on the running loop."""
    opened = _OPENED.pop(asyncio.get_running_loop(), set())
    for transport in opened:
        try:
            await transport.aclose()
        except Exception:  # a session that fails to close is left to the loop's end
            continue
    if opened:
        # The connections close on the loop's next turn; let it come before the loop ends.
        await asyncio.sleep(0)


close_at_loop_end(close_sessions)


@cache
def _aiohttp_transport() -> Callable[..., httpx.AsyncBaseTransport]:
    """Build (once) the async transport of model calls: httpx's interface over aiohttp.

    aiohttp's C-accelerated connections cost about half the client CPU of httpx's own
    (``benchmarks/bench_client_cpu.py``), which is what lets one process keep a fast server
    busy. httpx-aiohttp maps every aiohttp connection failure to ``ConnectTimeout`` (a
    refused connection, a server that hung up); they are mapped here to what httpx itself
    raises, so retries and messages tell a dead server from a slow one.
    """
    from aiohttp import ClientSession
    from httpx_aiohttp import AiohttpTransport

    class Transport(AiohttpTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if isinstance(self.client, ClientSession) and self.client.closed:
                self.client = None  # closed at a loop's end: a new loop gets a new session
            if not isinstance(self.client, ClientSession):
                # Its session is opened now, on the running loop: closed at the loop's end.
                _OPENED.setdefault(asyncio.get_running_loop(), set()).add(self)
            try:
                response = await super().handle_async_request(request)
            except httpx.TransportError as exc:
                raise _httpx_error(exc) from exc.__cause__
            return httpx.Response(response.status_code, headers=response.headers,
                                  stream=_MappedStream(response.stream),
                                  extensions=response.extensions, request=request)

    return Transport


class _MappedStream(httpx.AsyncByteStream):
    """An aiohttp response body whose failures are httpx's own (see ``_aiohttp_transport``)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self.raw:
                yield piece
        except httpx.TransportError as exc:
            raise _httpx_error(exc) from exc.__cause__

    async def aclose(self) -> None:
        """Release the connection."""
        await self.raw.aclose()


def _httpx_error(exc: httpx.TransportError) -> httpx.TransportError:
    """Return the httpx error that the aiohttp failure behind ``exc`` stands for."""
    import aiohttp

    cause = exc.__cause__
    kinds: list[tuple[type[BaseException], type[httpx.TransportError]]] = [
        (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
        (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
        (TimeoutError, httpx.TimeoutException),
        (aiohttp.ClientConnectorError, httpx.ConnectError),
        (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
        (aiohttp.ClientConnectionError, httpx.ReadError),
    ]
    for aiohttp_kind, httpx_kind in kinds:
        if isinstance(cause, aiohttp_kind):
            return exc if type(exc) is httpx_kind else httpx_kind(str(exc))
    return exc


@cache
def ssl_context() -> ssl.SSLContext:
    """Return the one TLS context every HTTP client shares."""
    # Loading the CA bundle costs ~50 ms per httpx client; one context serves them all.
    return httpx.create_ssl_context()


class RetryingModel:
    """Retry loop for a chat model's four call paths; mixed in before the provider's class.

    Retrying inside the model keeps it a chat model (``bind_tools``,
    ``with_structured_output``), and streamed calls (LangGraph's ``messages`` stream mode)
    are retried too, as long as nothing has been streamed yet. Each attempt is bounded as a
    whole by ``request_timeout``: a server that keeps a stream alive with empty chunks
    resets the HTTP read timeout with every chunk, so that timeout alone bounds nothing.
    """

    max_retries: int
    retry_backoff: float
    request_timeout: float | None

    def _where(self) -> str:
        """Name the model and its server (credentials removed) for messages."""
        raise NotImplementedError

    def _fail(self, exc: BaseException, attempts: int) -> None:
        raise NotImplementedError

    def _give_up(self, exc: Exception, attempt: int) -> bool:
        # Not worth a retry, or retries spent (then the message is made to say so).
        if not is_transient(exc):
            self._not_found(exc)
            raise_bad_reply(exc, self._where())
            return True
        # Overloaded or slow: an adaptive concurrency limit backs off on this.
        pressure.report(exc)
        if attempt > self.max_retries:
            self._fail(exc, attempt)
            return True
        return False

    def _not_found(self, exc: Exception) -> None:
        """Raise UnknownModelError for a model the server does not have."""

    def _bound(self) -> float | None:
        timeout = self.request_timeout
        # A little over the HTTP timeout, so that a silent server still ends in the
        # client's own timeout error; a server that keeps talking ends here.
        return float(timeout) + BOUND_MARGIN if timeout and timeout > 0 else None

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        attempt = 0
        while True:
            attempt += 1
            try:
                # A deadline on this task, not wait_for's task per call.
                async with asyncio.timeout(self._bound()):
                    return await super()._agenerate(*args, **kwargs)  # type: ignore[misc]
            except Exception as exc:
                if self._give_up(exc, attempt):
                    raise
            await asyncio.sleep(backoff_delay(attempt, self.retry_backoff))

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        attempt = 0
        while True:
            attempt += 1
            try:
                with _sync_deadline(self._bound()):
                    return super()._generate(*args, **kwargs)  # type: ignore[misc]
            except Exception as exc:
                if self._give_up(exc, attempt):
                    raise
            time.sleep(backoff_delay(attempt, self.retry_backoff))

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        attempt = 0
        while True:
            attempt += 1
            started = False
            try:
                stream = super()._astream(*args, **kwargs)  # type: ignore[misc]
                async for chunk in bounded_stream(stream, self._bound()):
                    started = True
                    yield chunk
                return
            except Exception as exc:
                # Once text has gone out, a retry would repeat it: fail instead.
                if started:
                    if is_transient(exc):
                        self._fail(exc, attempt)
                    raise
                if self._give_up(exc, attempt):
                    raise
            await asyncio.sleep(backoff_delay(attempt, self.retry_backoff))

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        attempt = 0
        while True:
            attempt += 1
            started = False
            try:
                with _sync_deadline(self._bound()):
                    for chunk in super()._stream(*args, **kwargs):  # type: ignore[misc]
                        started = True
                        yield chunk
                return
            except Exception as exc:
                if started:
                    if is_transient(exc):
                        self._fail(exc, attempt)
                    raise
                if self._give_up(exc, attempt):
                    raise
            time.sleep(backoff_delay(attempt, self.retry_backoff))


class ModelReplyError(RuntimeError):
    """A model server answered, but not with a complete reply (not JSON, cut short)."""


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """Yield ``exc`` and what it was raised from (SDKs wrap transport errors twice)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__ or seen.__context__


def raise_bad_reply(exc: BaseException, where: str) -> None:
    """Raise ModelReplyError naming the model and server for a reply that cannot be read."""
    if isinstance(exc, ModelReplyError):
        return
    if any(isinstance(cause, BodyTooLargeError) for cause in _causes(exc)):
        raise ModelReplyError(
            f"{where} sent a reply larger than {MAX_REPLY_BYTES:,} bytes (decoded); it was "
            "not read further (is the URL the model server's?)") from exc
    if isinstance(exc, json.JSONDecodeError):
        raise ModelReplyError(
            f"{where} sent a reply that is not JSON ({redact_text(str(exc))}); is the URL "
            "the model server's, and not a proxy's or a web page's?") from exc


# The deadline of the synchronous call running in this thread (checked between chunks).
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "kgcheck_call_deadline", default=None)


@contextmanager
def _sync_deadline(seconds: float | None) -> Iterator[None]:
    token = _DEADLINE.set(time.monotonic() + seconds if seconds else None)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_deadline(timeout: float | None) -> None:
    """Raise TimeoutError when the synchronous call in progress has used up its time."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError(f"the call took longer than {timeout:g} s" if timeout else
                           "the call took too long")


async def bounded_stream(stream: AsyncIterator[ChatGenerationChunk],
                         seconds: float | None) -> AsyncIterator[ChatGenerationChunk]:
    """Yield from ``stream`` until it ends; raise TimeoutError once ``seconds`` are spent."""
    if not seconds:
        async for chunk in stream:
            yield chunk
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    iterator = stream.__aiter__()
    try:
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"the call took longer than {seconds:g} s")
            try:
                chunk = await asyncio.wait_for(iterator.__anext__(), remaining)
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


class ExplainedModel:
    """Explain a spent transport error on each call path; the client did the retrying.

    The asynchronous paths are bounded as a whole by ``_bound()`` seconds, as in
    ``RetryingModel``: the client's own timeout restarts with every byte received.
    """

    def _explain(self, exc: BaseException) -> None:
        raise NotImplementedError

    def _bound(self) -> float | None:
        return None

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            async with asyncio.timeout(self._bound()):
                return await super()._agenerate(*args, **kwargs)  # type: ignore[misc]
        except Exception as exc:
            self._explain(exc)
            raise

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            return super()._generate(*args, **kwargs)  # type: ignore[misc]
        except Exception as exc:
            self._explain(exc)
            raise

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        try:
            stream = super()._astream(*args, **kwargs)  # type: ignore[misc]
            async for chunk in bounded_stream(stream, self._bound()):
                yield chunk
        except Exception as exc:
            self._explain(exc)
            raise

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        try:
            yield from super()._stream(*args, **kwargs)  # type: ignore[misc]
        except Exception as exc:
            self._explain(exc)
            raise
