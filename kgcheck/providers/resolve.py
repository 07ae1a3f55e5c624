"""Turn ``provider:model`` into a chat model: the one place that knows the providers.

``ollama:gemma2:9b`` (Ollama tags keep their colon), ``openai:gpt-4o-mini``,
``openai-compatible:<name>``, ``azure:<deployment>``, ``local:<name or .gguf path>`` (llama.cpp
on this machine) and ``replay:<model>`` are built in;
other providers come from the ``kgcheck.providers`` entry-point group or
``PROVIDERS.register``.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

from kgcheck.event_loop import close_at_loop_end
from kgcheck.providers.constraints import AnswerFormat, notice
from kgcheck.providers.provider import Provider
from kgcheck.providers.settings import ModelSettings
from kgcheck.providers.transports import UnknownModelError
from kgcheck.registry import Registry, UnknownNameError


class UnknownProviderError(UnknownModelError, UnknownNameError):
    """No model provider is registered under that name."""


def _builtin_providers() -> None:
    # Lazy references: a provider's client library is imported by the runs that use it.
    PROVIDERS.register("ollama", "kgcheck.providers.ollama_chat:PROVIDER")
    PROVIDERS.register("openai", "kgcheck.providers.openai_chat:OPENAI")
    PROVIDERS.register("openai-compatible", "kgcheck.providers.openai_chat:COMPATIBLE")
    PROVIDERS.register("replay", "kgcheck.providers.replay:PROVIDER")
    PROVIDERS.register("azure", "kgcheck.providers.azure_chat:PROVIDER")
    PROVIDERS.register("local", "kgcheck.providers.local:PROVIDER")


PROVIDERS: Registry[Provider] = Registry(
    "model provider", group="kgcheck.providers", discover=_builtin_providers,
    unknown=UnknownProviderError)

# Live models kept per event loop (see _per_loop); a bound on settings combinations.
MAX_CACHED_MODELS = 64
_LIVE_MODELS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...],
                                                                        BaseChatModel]] = (
    weakref.WeakKeyDictionary()
)


def split_spec(spec: str) -> tuple[str, str]:
    """Split ``provider:model`` at the first colon; check the provider is known."""
    provider_name, sep, name = spec.strip().partition(":")
    if not sep or not name:
        raise UnknownModelError(
            f"model {spec!r} is not of the form provider:model; providers: "
            + ", ".join(PROVIDERS.names())
        )
    if provider_name not in PROVIDERS:
        raise UnknownProviderError(
            f"unknown model provider {provider_name!r} in {spec!r}; known: "
            + ", ".join(PROVIDERS.names())
        )
    return provider_name, name


def resolve_model(spec: str, settings: ModelSettings | None = None) -> BaseChatModel:
    """Build (or reuse) the chat model for ``spec`` with these sampling and transport settings.

    ``settings`` may be any ModelSettings, a strategy Context included: only its model
    settings count.
    """
    provider_name, name = split_spec(spec)
    provider = PROVIDERS.get(provider_name)
    given = settings or ModelSettings()
    if not provider.reuse:
        return provider.build(name, ModelSettings.of(given))
    # Keyed by the settings' values: a Context is not copied unless a model is built.
    key = (provider_name, name, given.key(), *(os.environ.get(v) for v in provider.env))
    return _per_loop(key, lambda: provider.build(name, ModelSettings.of(given)))


# Models whose provider has prepared them in this process (see aprepare_model).
_PREPARED: set[tuple[Any, ...]] = set()


async def aprepare_model(spec: str, settings: ModelSettings | None = None) -> None:
    """Prepare ``spec``'s model off the event loop, once per process (a local server starts).

    Async nodes call this before resolving the model, so that no blocking work (a file
    check, a process start) runs on the event loop, which ``langgraph dev`` forbids.
    """
    provider_name, name = split_spec(spec)
    provider = PROVIDERS.get(provider_name)
    if provider.prepare is None:
        return
    given = ModelSettings.of(settings or ModelSettings())
    key = (provider_name, name, given.key())
    if key in _PREPARED:
        return
    await asyncio.to_thread(provider.prepare, name, given)
    _PREPARED.add(key)


def reach_model(spec: str, settings: ModelSettings | None = None) -> None:
    """Contact a live model's server once; raise ModelUnreachableError when none answers.

    Models without a server (replay, scripted) are not contacted.
    """
    provider_name, name = split_spec(spec)
    provider = PROVIDERS.get(provider_name)
    if provider.reach is not None:
        provider.reach(name, ModelSettings.of(settings or ModelSettings()))


def model_note(spec: str) -> str | None:
    """Return what a user should know about ``spec``'s answers (its provider says), if any."""
    provider_name, name = split_spec(spec)
    provider = PROVIDERS.get(provider_name)
    return provider.note(name) if provider.note else None


def constrains_by_default(spec: str) -> bool:
    """Tell whether ``spec``'s provider holds its models to an answer format by default."""
    provider_name, _ = split_spec(spec)
    return PROVIDERS.get(provider_name).constrain_by_default


def constrained_model(spec: str, chat: BaseChatModel, fmt: AnswerFormat) -> Runnable:
    """Bind ``chat`` to answer in ``fmt`` where its provider can; else warn once, unbound."""
    provider_name, _ = split_spec(spec)
    provider = PROVIDERS.get(provider_name)
    if provider.constrain is None:
        notice(f"{provider_name}: models cannot be asked for constrained output; "
               "constrain is ignored for them")
        return chat
    return provider.constrain(chat, fmt)


async def _forget_loop_models() -> None:
    """Drop the running loop's models as it ends (they hold it: it would never be freed)."""
    _LIVE_MODELS.pop(asyncio.get_running_loop(), None)


close_at_loop_end(_forget_loop_models)


def _per_loop(key: tuple[Any, ...], build: Any) -> BaseChatModel:
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
