"""Transport failures of model calls: which are worth a retry, the backoff, clear messages.

Ollama calls are retried by kgcheck (``RetryingModel`` mixed into ChatOllama); OpenAI calls
by the openai client itself, and ``ExplainedModel`` only rewrites the error once its
retries are spent. Either way a spent error keeps its type (so a run loop can tell an
unreachable server from a bad answer) and its message names the model, the server and the
number of attempts, with any credentials removed from the URL.
"""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from functools import cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from langchain_core.outputs import ChatGenerationChunk, ChatResult

from kgcheck.providers import pressure

# The longest pause between two retries, whatever the backoff setting.
RETRY_BACKOFF_MAX = 8.0

# Failures worth retrying: the connection or the clock (HTTP statuses are checked apart).
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.TransportError,
    ConnectionError,
    TimeoutError,
)


class UnknownModelError(ValueError):
    """A model spec names no known provider, is malformed, or names a model the server lacks."""


def is_transient(exc: BaseException) -> bool:
    """Tell whether a failed call is worth retrying: transport trouble, 5xx, 429 or 408."""
    if isinstance(exc, TRANSPORT_ERRORS):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status >= 500 or status in (408, 429))


def backoff_delay(retry: int, initial: float) -> float:
    """Seconds to wait before retry number ``retry`` (1-based): doubling, capped, jittered."""
    delay = min(RETRY_BACKOFF_MAX, initial * 2 ** (retry - 1))
    # Jitter down to 3/4 so that many facts failing together do not retry in lockstep.
    return delay * (0.75 + 0.25 * random.random())


def redact_url(url: str) -> str:
    """Drop any user:password part of a URL so it can go into messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def explain_failure(exc: BaseException, *, spec: str, url: str, attempts: int,
                    timeout: float | None) -> BaseException:
    """Rewrite a spent transport error's message to name the model, server and attempts.

    The exception keeps its type: run loops tell an unreachable server by it.
    """
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    where = f"{spec} at {redact_url(url)}"
    detail = str(exc).strip()
    said = f": {detail}" if detail else ""
    status = getattr(exc, "status_code", None)
    if isinstance(exc, httpx.TimeoutException | TimeoutError) or "timed out" in detail.lower():
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


@cache
def ssl_context() -> ssl.SSLContext:
    """Return the one TLS context every HTTP client shares."""
    # Loading the CA bundle costs ~50 ms per httpx client; one context serves them all.
    return httpx.create_ssl_context()


class RetryingModel:
    """Retry loop for a chat model's four call paths; mixed in before the provider's class.

    Retrying inside the model keeps it a chat model (``bind_tools``,
    ``with_structured_output``), and streamed calls (LangGraph's ``messages`` stream mode)
    are retried too, as long as nothing has been streamed yet.
    """

    max_retries: int
    retry_backoff: float

    def _fail(self, exc: BaseException, attempts: int) -> None:
        raise NotImplementedError

    def _give_up(self, exc: Exception, attempt: int) -> bool:
        # Not worth a retry, or retries spent (then the message is made to say so).
        if not is_transient(exc):
            self._not_found(exc)
            return True
        # Overloaded or slow: an adaptive concurrency limit backs off on this.
        pressure.report(exc)
        if attempt > self.max_retries:
            self._fail(exc, attempt)
            return True
        return False

    def _not_found(self, exc: Exception) -> None:
        """Raise UnknownModelError for a model the server does not have."""

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        attempt = 0
        while True:
            attempt += 1
            try:
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
                async for chunk in super()._astream(*args, **kwargs):  # type: ignore[misc]
                    started = True
                    yield chunk
                return
            except Exception as exc:
                # Once text has gone out, a retry would repeat it: fail instead.
                if started or self._give_up(exc, attempt):
                    raise
            await asyncio.sleep(backoff_delay(attempt, self.retry_backoff))

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        attempt = 0
        while True:
            attempt += 1
            started = False
            try:
                for chunk in super()._stream(*args, **kwargs):  # type: ignore[misc]
                    started = True
                    yield chunk
                return
            except Exception as exc:
                if started or self._give_up(exc, attempt):
                    raise
            time.sleep(backoff_delay(attempt, self.retry_backoff))


class ExplainedModel:
    """Explain a spent transport error on each call path; the client did the retrying."""

    def _explain(self, exc: BaseException) -> None:
        raise NotImplementedError

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
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
            async for chunk in super()._astream(*args, **kwargs):  # type: ignore[misc]
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


