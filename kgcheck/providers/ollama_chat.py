"""The ``ollama`` provider: ChatOllama with retries, for ``ollama:<model>``.

Ollama tags keep their colon (``ollama:gemma2:9b``); the server comes from ``base_url``,
else ``OLLAMA_HOST``, else 127.0.0.1:11434.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from functools import cache
from typing import Any

from langchain_core.language_models import BaseChatModel

from kgcheck.providers import pressure
from kgcheck.providers.constraints import with_ollama_format
from kgcheck.providers.ollama_models import check_pulled
from kgcheck.providers.provider import Provider
from kgcheck.providers.secrets import redact_url
from kgcheck.providers.settings import ModelSettings
from kgcheck.providers.transports import (
    ModelReplyError,
    RetryingModel,
    UnknownModelError,
    check_deadline,
    explain_failure,
    model_transports,
    reach,
    ssl_context,
)

OLLAMA_DEFAULT_HOST = "http://127.0.0.1:11434"

# Alternatives per answer token asked for with logprobs (as for OpenAI-API models).
TOP_LOGPROBS = 5


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
        """Seconds one attempt may take in all (also the HTTP client's timeout)."""

        def _where(self) -> str:
            return f"ollama:{self.model} at {redact_url(_ollama_host(self.base_url))}"

        def _cut_short(self) -> ModelReplyError:
            # Ollama ends every complete answer with a ``done`` chunk; without it the
            # text may be any prefix of the answer (a crashed runner, a dropped proxy).
            return ModelReplyError(
                f"{self._where()} ended its answer without Ollama's final \"done\" chunk: "
                "the reply is incomplete and was not used")

        async def _aiterate_over_stream(self, *args: Any,
                                        **kwargs: Any) -> AsyncIterator[Any]:
            done = False
            async for chunk in super()._aiterate_over_stream(*args, **kwargs):
                done = done or bool((chunk.generation_info or {}).get("done"))
                yield chunk
            if not done:
                raise self._cut_short()

        def _iterate_over_stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
            done = False
            for chunk in super()._iterate_over_stream(*args, **kwargs):
                check_deadline(self.request_timeout)
                done = done or bool((chunk.generation_info or {}).get("done"))
                yield chunk
            if not done:
                raise self._cut_short()

        def _fail(self, exc: BaseException, attempts: int) -> None:
            explain_failure(exc, spec=f"ollama:{self.model}", url=_ollama_host(self.base_url),
                            attempts=attempts, timeout=self.request_timeout)

        def _not_found(self, exc: Exception) -> None:
            # No other fact escapes a missing model: say so once, as a settings error.
            if getattr(exc, "status_code", None) == 404:
                raise UnknownModelError(
                    f"{self._where()}: "
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
        # 429 and 503 answers tell an adaptive concurrency limit to back off; replies are
        # decoded and capped in the transport (a gzip bomb is refused, not read).
        async_client_kwargs={"event_hooks": pressure.async_hooks(),
                             **model_transports(asynchronous=True)},
        sync_client_kwargs={"event_hooks": pressure.sync_hooks(),
                            **model_transports(asynchronous=False)},
        max_retries=max(0, settings.max_retries),
        retry_backoff=settings.retry_backoff,
        request_timeout=settings.timeout,
        # The verdict token's probabilities give the verdict's confidence (logprobs=on).
        **({"logprobs": True, "top_logprobs": TOP_LOGPROBS}
           if settings.wants_logprobs(compatible=False) else {}),
    )




def reach_server(name: str, settings: ModelSettings) -> None:
    """Ask the Ollama server for its version, to see that it answers, then for the model.

    A model the server lists no pull of stops the run here, with the fix; a server that
    does not list its models is not refused.
    """
    host = _ollama_host(settings.base_url or None)
    reach(host.rstrip("/") + "/api/version", where=f"ollama:{name} at {redact_url(host)}",
          timeout=settings.timeout,
          hint="start Ollama (`ollama serve`) or point --base-url / OLLAMA_HOST at it")
    check_pulled(name, host, settings.timeout)


PROVIDER = Provider(build, env=("OLLAMA_HOST",), reach=reach_server,
                    constrain=with_ollama_format)
