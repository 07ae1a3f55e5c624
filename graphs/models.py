"""Turn ``provider:model`` strings into chat models: the one place that knows providers.

``ollama:gemma2:9b`` (Ollama tags keep their colon; server from ``base_url`` or
``OLLAMA_HOST``), ``openai:gpt-4o-mini`` (key from ``OPENAI_API_KEY``),
``openai-compatible:<name>`` (vLLM, llama.cpp server; URL from ``base_url`` or
``OPENAI_BASE_URL``), ``replay:<model>`` (the study's recorded answers) and
``scripted:<name>`` (models registered by tests). Secrets come from the environment only.

Transport failures (refused or dropped connections, timeouts, HTTP 5xx and 429) are retried
with exponential backoff: by our own loop for Ollama, by the openai client for the other
two. When the retries are spent the error keeps its type (so callers can tell an
unreachable server from a bad answer) and its message names the model, the server and the
number of attempts.
"""

from __future__ import annotations

import asyncio
import os
import random
import ssl
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from langchain_core.language_models import BaseChatModel
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable

from graphs.replay import ReplayChatModel

ChatRunnable = Runnable[Any, Any]

# The longest pause between two retries, whatever the backoff setting.
RETRY_BACKOFF_MAX = 8.0
OLLAMA_DEFAULT_HOST = "http://127.0.0.1:11434"
# Live models kept per event loop (see _per_loop); a bound on settings combinations.
MAX_CACHED_MODELS = 64
_LIVE_MODELS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Any]] = (
    weakref.WeakKeyDictionary()
)


class UnknownModelError(ValueError):
    """A model spec names no known provider, or is malformed."""


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """Sampling and transport settings; defaults are the study's (REFERENCE.md section 2).

    Attributes:
        temperature: Sampling temperature.
        top_p: Nucleus sampling.
        top_k: Top-k sampling (Ollama and OpenAI-compatible servers).
        max_tokens: Most tokens an answer may have (Ollama's ``num_predict``).
        repeat_penalty: Repetition penalty (Ollama and OpenAI-compatible servers).
        timeout: Seconds to wait for each HTTP exchange of one call.
        max_retries: Retries after a transport failure (0 = try once).
        retry_backoff: Seconds before the first retry; doubled for each further one.
        base_url: The model server; empty = the provider's environment variable or default.
        data_dir: Recorded answers for ``replay`` (upstream layout); empty = default.
        replay_latency: ``replay`` sleeps this multiple of each recorded response time.

    """

    temperature: float = 0.75
    top_p: float = 0.9
    top_k: int = 40
    max_tokens: int = 512
    repeat_penalty: float = 1.1
    timeout: float = 60.0
    max_retries: int = 3
    retry_backoff: float = 0.5
    base_url: str = ""
    data_dir: str = ""
    replay_latency: float = 0.0

    @classmethod
    def from_context(cls, ctx: Any) -> ModelOptions:
        """Take the matching fields of a graph Context; the others keep their defaults."""
        return cls(**{name: getattr(ctx, name) for name in cls.__dataclass_fields__
                      if hasattr(ctx, name)})


Provider = Callable[[str, ModelOptions], ChatRunnable]
PROVIDERS: dict[str, Provider] = {}
SCRIPTED: dict[str, Callable[[], BaseChatModel]] = {}

# Failures worth retrying: the connection or the clock (HTTP statuses are checked apart).
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.TransportError,
    ConnectionError,
    TimeoutError,
)


def provider(name: str) -> Callable[[Provider], Provider]:
    """Register a provider factory under ``name``."""

    def register(factory: Provider) -> Provider:
        PROVIDERS[name] = factory
        return factory

    return register


def register_scripted(name: str, factory: Callable[[], BaseChatModel]) -> None:
    """Make ``scripted:<name>`` build a fresh model from ``factory`` (used by tests)."""
    SCRIPTED[name] = factory


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
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs ~50 ms per httpx client; one context serves them all.
    return httpx.create_ssl_context()


def _ollama_host(base_url: str | None) -> str:
    host = base_url or os.environ.get("OLLAMA_HOST") or ""
    try:
        from ollama._client import _parse_host

        return _parse_host(host)
    except (ImportError, ValueError):
        return host or OLLAMA_DEFAULT_HOST


class _RetryingModel:
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


class _ExplainedModel:
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


@cache
def retrying_chat_ollama() -> type[BaseChatModel]:
    """Build (once) the ChatOllama class that retries transport failures.

    langchain-ollama is imported here, not at module import, to keep the CLI quick to start.
    """
    from langchain_ollama import ChatOllama

    class RetryingChatOllama(_RetryingModel, ChatOllama):
        """ChatOllama that retries transport failures with backoff and explains spent ones."""

        max_retries: int = 3
        """Retries after a transport failure (0 = try once)."""
        retry_backoff: float = 0.5
        """Seconds before the first retry; doubled for each further one."""
        request_timeout: float | None = None
        """The HTTP timeout given to the client, quoted in error messages."""

        def _fail(self, exc: BaseException, attempts: int) -> None:
            explain_failure(exc, spec=f"ollama:{self.model}", url=_ollama_host(self.base_url),
                            attempts=attempts, timeout=self.request_timeout)

        def _not_found(self, exc: Exception) -> None:
            # No other fact escapes a missing model: say so once, as a settings error.
            if getattr(exc, "status_code", None) == 404:
                raise UnknownModelError(
                    f"ollama:{self.model} at {redact_url(_ollama_host(self.base_url))}: "
                    f"{getattr(exc, 'error', exc)} (pull it with `ollama pull {self.model}`)"
                ) from exc

    return RetryingChatOllama


@cache
def explained_chat_openai() -> type[BaseChatModel]:
    """Build (once) the ChatOpenAI class whose spent transport errors say where it tried.

    The openai client itself retries connection errors, timeouts, 408, 409, 429 and 5xx
    ``max_retries`` times with exponential backoff, honouring ``retry-after`` headers.
    """
    import openai
    from langchain_openai import ChatOpenAI

    class ExplainedChatOpenAI(_ExplainedModel, ChatOpenAI):
        """ChatOpenAI whose spent transport errors name the model, server and attempts."""

        spec: str = ""
        """The ``provider:model`` string, quoted in error messages."""

        def _explain(self, exc: BaseException) -> None:
            spec = self.spec or f"openai:{self.model_name}"
            url = redact_url(str(self.openai_api_base or "https://api.openai.com/v1"))
            if isinstance(exc, openai.NotFoundError):
                # A wrong model name or a base URL without /v1: no other fact escapes it.
                raise UnknownModelError(
                    f"{spec} at {url}: {exc.message} (check the model name, and that the "
                    "server URL ends in /v1)"
                ) from exc
            spent = isinstance(exc, openai.APIConnectionError) or (
                isinstance(exc, openai.APIStatusError) and is_transient(exc))
            if not spent:
                return
            timeout = self.request_timeout
            explain_failure(
                exc, spec=spec, url=url, attempts=max(0, self.max_retries or 0) + 1,
                timeout=timeout if isinstance(timeout, int | float) else None,
            )

    return ExplainedChatOpenAI


def _per_loop(key: tuple[Any, ...], build: Callable[[], ChatRunnable]) -> ChatRunnable:
    """Reuse one model (and its HTTP connections) per event loop and settings.

    Graphs resolve their model on every call; building an HTTP client each time costs
    about half a millisecond and a new connection, and a new model is serialized again for
    the callbacks (about 0.2 ms). Clients are bound to the event loop they first ran in,
    hence one cache per loop, dropped with the loop.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return build()
    models = _LIVE_MODELS.setdefault(loop, {})
    if key not in models:
        if len(models) >= MAX_CACHED_MODELS:
            models.clear()
        models[key] = build()
    return models[key]


@provider("ollama")
def _ollama(name: str, options: ModelOptions) -> ChatRunnable:
    key = ("ollama", name, options, os.environ.get("OLLAMA_HOST"))
    return _per_loop(key, lambda: _build_ollama(name, options))


def _build_ollama(name: str, options: ModelOptions) -> ChatRunnable:
    # The class is made at first use, so its extra pydantic fields are not known statically.
    chat_ollama: Callable[..., ChatRunnable] = retrying_chat_ollama()
    return chat_ollama(
        model=name,
        # None lets the ollama client read OLLAMA_HOST in all its forms (host, host:port, URL).
        base_url=options.base_url or None,
        temperature=options.temperature,
        top_p=options.top_p,
        top_k=options.top_k,
        num_predict=options.max_tokens,
        repeat_penalty=options.repeat_penalty,
        client_kwargs={"timeout": options.timeout, "verify": _ssl_context()},
        max_retries=max(0, options.max_retries),
        retry_backoff=options.retry_backoff,
        request_timeout=options.timeout,
    )


def _openai_model(spec: str, name: str, options: ModelOptions, *, base_url: str | None,
                  api_key: str | None, compatible: bool) -> ChatRunnable:
    kwargs: dict[str, Any] = {}
    if api_key is not None:
        kwargs["api_key"] = api_key
    if compatible:
        # vLLM and llama.cpp take max_tokens (OpenAI itself wants max_completion_tokens) and
        # the study's top_k and repetition penalty (vLLM: repetition_penalty; llama.cpp:
        # repeat_penalty); each server ignores the names it does not know.
        kwargs["extra_body"] = {
            "max_tokens": options.max_tokens,
            "top_k": options.top_k,
            "repetition_penalty": options.repeat_penalty,
            "repeat_penalty": options.repeat_penalty,
        }
    else:
        kwargs["max_completion_tokens"] = options.max_tokens
    # The class is made at first use, so its extra pydantic fields are not known statically.
    chat_openai: Callable[..., ChatRunnable] = explained_chat_openai()
    return chat_openai(
        spec=spec,
        model=name,
        base_url=base_url,
        temperature=options.temperature,
        top_p=options.top_p,
        timeout=options.timeout,
        max_retries=max(0, options.max_retries),
        stream_usage=True,
        **kwargs,
    )


@provider("openai")
def _openai(name: str, options: ModelOptions) -> ChatRunnable:
    if not os.environ.get("OPENAI_API_KEY"):
        raise UnknownModelError(f"openai:{name} needs OPENAI_API_KEY in the environment")
    key = ("openai", name, options, os.environ.get("OPENAI_API_KEY"),
           os.environ.get("OPENAI_BASE_URL"))
    return _per_loop(key, lambda: _openai_model(
        f"openai:{name}", name, options, base_url=options.base_url or None, api_key=None,
        compatible=False))


@provider("openai-compatible")
def _openai_compatible(name: str, options: ModelOptions) -> ChatRunnable:
    base_url = options.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        raise UnknownModelError(
            f"openai-compatible:{name} needs a server URL: set base_url (--base-url) "
            "or OPENAI_BASE_URL, e.g. http://127.0.0.1:8000/v1"
        )
    # Local servers usually ignore the key, but the client insists on one.
    api_key = os.environ.get("OPENAI_API_KEY") or "not-needed"
    key = ("openai-compatible", name, options, base_url, api_key)
    return _per_loop(key, lambda: _openai_model(
        f"openai-compatible:{name}", name, options, base_url=base_url, api_key=api_key,
        compatible=True))


@provider("replay")
def _replay(name: str, options: ModelOptions) -> ChatRunnable:
    # Reused like the others: a fresh instance would be re-serialized for the callbacks on
    # its first call, which costs more than the replayed answer itself.
    key = ("replay", name, options.data_dir, options.replay_latency)
    return _per_loop(key, lambda: ReplayChatModel(
        model_name=name, data_dir=options.data_dir, latency_scale=options.replay_latency
    ))


@provider("scripted")
def _scripted(name: str, options: ModelOptions) -> ChatRunnable:
    if name not in SCRIPTED:
        known = ", ".join(sorted(SCRIPTED)) or "none registered"
        raise UnknownModelError(f"unknown scripted model {name!r}; known: {known}")
    return SCRIPTED[name]()


def split_spec(spec: str) -> tuple[str, str]:
    """Split ``provider:model`` at the first colon; check the provider is known."""
    provider_name, sep, name = spec.strip().partition(":")
    if not sep or not name:
        raise UnknownModelError(
            f"model {spec!r} is not of the form provider:model; providers: "
            + ", ".join(sorted(PROVIDERS))
        )
    if provider_name not in PROVIDERS:
        raise UnknownModelError(
            f"unknown model provider {provider_name!r} in {spec!r}; known: "
            + ", ".join(sorted(PROVIDERS))
        )
    return provider_name, name


def resolve_model(spec: str, options: ModelOptions | None = None) -> ChatRunnable:
    """Build the chat model for ``spec`` with sampling and transport ``options``."""
    provider_name, name = split_spec(spec)
    return PROVIDERS[provider_name](name, options or ModelOptions())


def model_name(spec: str) -> str:
    """Return the model part of a spec: ``replay:gemma2:9b`` -> ``gemma2:9b``."""
    return split_spec(spec)[1]
