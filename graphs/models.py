"""Turn ``provider:model`` strings into chat models: the one place that knows providers.

``ollama:gemma2:9b`` (Ollama tags keep their colon), ``openai:gpt-4o-mini``,
``openai-compatible:<name>`` (vLLM, llama.cpp server; URL from ``base_url`` or
``OPENAI_BASE_URL``), ``replay:<model>`` (the study's recorded answers) and
``scripted:<name>`` (models registered by tests). Secrets come from the environment only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

from graphs.replay import ReplayChatModel

ChatRunnable = Runnable[Any, Any]


class UnknownModelError(ValueError):
    """A model spec names no known provider, or is malformed."""


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """Sampling and transport settings; defaults are the study's (REFERENCE.md section 2)."""

    temperature: float = 0.75
    top_p: float = 0.9
    top_k: int = 40
    max_tokens: int = 512
    repeat_penalty: float = 1.1
    timeout: float = 60.0
    max_retries: int = 3
    base_url: str = ""
    data_dir: str = ""
    replay_latency: float = 0.0

    @classmethod
    def from_context(cls, ctx: Any) -> ModelOptions:
        """Take the matching fields of a graph Context."""
        return cls(**{name: getattr(ctx, name) for name in cls.__dataclass_fields__
                      if hasattr(ctx, name)})


Provider = Callable[[str, ModelOptions], ChatRunnable]
PROVIDERS: dict[str, Provider] = {}
SCRIPTED: dict[str, Callable[[], BaseChatModel]] = {}

# Failures worth retrying: the connection, the clock, or a server-side hiccup.
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


def _with_transport_retries(model: BaseChatModel, options: ModelOptions) -> ChatRunnable:
    if options.max_retries <= 0:
        return model
    return model.with_retry(
        retry_if_exception_type=_is_transient,
        wait_exponential_jitter=True,
        exponential_jitter_params={"initial": 0.5, "max": 8.0},
        stop_after_attempt=options.max_retries + 1,
    )


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, TRANSPORT_ERRORS):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status >= 500 or status == 429)


@provider("ollama")
def _ollama(name: str, options: ModelOptions) -> ChatRunnable:
    from langchain_ollama import ChatOllama

    model = ChatOllama(
        model=name,
        base_url=options.base_url or os.environ.get("OLLAMA_HOST") or None,
        temperature=options.temperature,
        top_p=options.top_p,
        top_k=options.top_k,
        num_predict=options.max_tokens,
        repeat_penalty=options.repeat_penalty,
        client_kwargs={"timeout": options.timeout},
    )
    return _with_transport_retries(model, options)


def _openai_model(name: str, options: ModelOptions, base_url: str | None,
                  api_key: str | None) -> ChatRunnable:
    from langchain_openai import ChatOpenAI

    kwargs: dict[str, Any] = {}
    if api_key is not None:
        kwargs["api_key"] = api_key
    # The openai client retries connection errors, 429 and 5xx with exponential backoff.
    return ChatOpenAI(
        model=name,
        base_url=base_url,
        temperature=options.temperature,
        top_p=options.top_p,
        max_completion_tokens=options.max_tokens,
        timeout=options.timeout,
        max_retries=options.max_retries,
        stream_usage=True,
        **kwargs,
    )


@provider("openai")
def _openai(name: str, options: ModelOptions) -> ChatRunnable:
    if not os.environ.get("OPENAI_API_KEY"):
        raise UnknownModelError(f"openai:{name} needs OPENAI_API_KEY in the environment")
    return _openai_model(name, options, options.base_url or None, None)


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
    return _openai_model(name, options, base_url, api_key)


@provider("replay")
def _replay(name: str, options: ModelOptions) -> ChatRunnable:
    return ReplayChatModel(
        model_name=name, data_dir=options.data_dir, latency_scale=options.replay_latency
    )


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
    """The model part of a spec: ``replay:gemma2:9b`` -> ``gemma2:9b``."""
    return split_spec(spec)[1]
