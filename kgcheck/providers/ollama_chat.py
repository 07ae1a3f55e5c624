"""The ``ollama`` provider: ChatOllama with retries, for ``ollama:<model>``.

Ollama tags keep their colon (``ollama:gemma2:9b``); the server comes from ``base_url``,
else ``OLLAMA_HOST``, else 127.0.0.1:11434.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache

from langchain_core.language_models import BaseChatModel

from kgcheck.providers import pressure
from kgcheck.providers.provider import Provider
from kgcheck.providers.settings import ModelSettings
from kgcheck.providers.transports import (
    RetryingModel,
    UnknownModelError,
    explain_failure,
    redact_url,
    ssl_context,
)

OLLAMA_DEFAULT_HOST = "http://127.0.0.1:11434"


def _ollama_host(base_url: str | None) -> str:
    host = base_url or os.environ.get("OLLAMA_HOST") or ""
    try:
        from ollama._client import _parse_host

        return _parse_host(host)
    except (ImportError, ValueError):
        return host or OLLAMA_DEFAULT_HOST


@cache
def retrying_chat_ollama() -> type[BaseChatModel]:
    """Build (once) the ChatOllama class that retries transport failures.

    langchain-ollama is imported here, not at module import, to keep the CLI quick to start.
    """
    from langchain_ollama import ChatOllama

    class RetryingChatOllama(RetryingModel, ChatOllama):
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


def build(name: str, settings: ModelSettings) -> BaseChatModel:
    """Build the chat model ``ollama:<name>`` with the study's sampling as Ollama options."""
    # The class is made at first use, so its extra pydantic fields are not known statically.
    chat_ollama: Callable[..., BaseChatModel] = retrying_chat_ollama()
    return chat_ollama(
        model=name,
        # None lets the ollama client read OLLAMA_HOST in all its forms (host, host:port, URL).
        base_url=settings.base_url or None,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k,
        num_predict=settings.max_tokens,
        repeat_penalty=settings.repeat_penalty,
        client_kwargs={"timeout": settings.timeout, "verify": ssl_context()},
        # 429 and 503 answers tell an adaptive concurrency limit to back off.
        async_client_kwargs={"event_hooks": pressure.async_hooks()},
        sync_client_kwargs={"event_hooks": pressure.sync_hooks()},
        max_retries=max(0, settings.max_retries),
        retry_backoff=settings.retry_backoff,
        request_timeout=settings.timeout,
    )




PROVIDER = Provider(build, env=("OLLAMA_HOST",))
