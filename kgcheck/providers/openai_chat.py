"""The ``openai`` and ``openai-compatible`` providers: ChatOpenAI with clear errors.

``openai:<model>`` needs ``OPENAI_API_KEY``; ``openai-compatible:<name>`` (vLLM, llama.cpp's
server, LM Studio) needs a URL from ``base_url`` or ``OPENAI_BASE_URL``. The openai client
retries; a spent error is rewritten to say where it tried.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel

from kgcheck.failures import is_transient
from kgcheck.providers import pressure
from kgcheck.providers.constraints import with_response_format
from kgcheck.providers.provider import Provider
from kgcheck.providers.secrets import redact_url
from kgcheck.providers.settings import ModelSettings
from kgcheck.providers.transports import (
    BOUND_MARGIN,
    ExplainedModel,
    UnknownModelError,
    explain_failure,
    model_transports,
    raise_bad_reply,
    reach,
)

# Alternatives per answer token asked for with logprobs (OpenAI allows up to 20).
TOP_LOGPROBS = 5
# Slack per client retry in the bound of a whole call: the client pauses between retries.
RETRY_PAUSE_SLACK = 2.0


class OpenAIClientModel(ExplainedModel):
    """What the OpenAI SDK's chat classes share (OpenAI, compatible servers, Azure).

    The openai client itself retries connection errors, timeouts, 408, 409, 429 and 5xx
    ``max_retries`` times with exponential backoff, honouring ``retry-after`` headers, so a
    whole call is bounded by every attempt's timeout plus the pauses between them.
    """

    def _bound(self) -> float | None:
        # The client retries inside one call: each attempt may take the timeout.
        timeout = getattr(self, "request_timeout", None)
        if not isinstance(timeout, int | float) or timeout <= 0:
            return None
        retries = max(0, getattr(self, "max_retries", 0) or 0)
        return float(timeout) * (retries + 1) + RETRY_PAUSE_SLACK * retries + BOUND_MARGIN

    def _explain_spent(self, exc: BaseException, spec: str, url: str) -> None:
        """Say, for a reply that cannot be read or retries that are spent, where it tried."""
        import openai

        raise_bad_reply(exc, f"{spec} at {url}")
        spent = isinstance(exc, openai.APIConnectionError | TimeoutError) or (
            isinstance(exc, openai.APIStatusError) and is_transient(exc))
        if not spent:
            return
        timeout = getattr(self, "request_timeout", None)
        explain_failure(
            exc, spec=spec, url=url, attempts=max(0, getattr(self, "max_retries", 0) or 0) + 1,
            timeout=timeout if isinstance(timeout, int | float) else None,
        )


def openai_http_clients(settings: ModelSettings) -> dict[str, Any]:
    """Return the SDK's HTTP clients for one model: its own, with the back-pressure hooks.

    Compressed replies (streamed ones too) are decoded with a cap on their size.

    langchain-openai's default async client is cached process-wide and bound to the first
    event loop, so a second run in one process (a new loop) would meet dead pooled
    connections and send each call twice. Models are built once per event loop.
    """
    # Redirects are followed as the SDK's own clients do (httpx's default is not to).
    return {
        "http_async_client": httpx.AsyncClient(
            timeout=settings.timeout, **model_transports(asynchronous=True),
            event_hooks=pressure.async_hooks(), follow_redirects=True),
        "http_client": httpx.Client(
            timeout=settings.timeout, **model_transports(asynchronous=False),
            event_hooks=pressure.sync_hooks(), follow_redirects=True),
    }


@cache
def explained_chat_openai() -> type[BaseChatModel]:
    """Build (once) the ChatOpenAI class whose spent transport errors say where it tried."""
    import openai
    from langchain_openai import ChatOpenAI

    class ExplainedChatOpenAI(OpenAIClientModel, ChatOpenAI):
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
            self._explain_spent(exc, spec, url)

    return ExplainedChatOpenAI


def openai_api_model(spec: str, name: str, settings: ModelSettings, *, base_url: str | None,
                  api_key: str | None, compatible: bool,
                  chat_class: Callable[..., BaseChatModel] | None = None,
                  extra_body: dict[str, Any] | None = None,
                  **fields: Any) -> BaseChatModel:
    """Build an OpenAI-API chat model (``chat_class``, else ExplainedChatOpenAI).

    ``extra_body`` adds request fields for a compatible server; ``fields`` are further
    fields of ``chat_class``.
    """
    kwargs: dict[str, Any] = dict(fields)
    if api_key is not None:
        kwargs["api_key"] = api_key
    if compatible:
        # vLLM and llama.cpp take max_tokens (OpenAI itself wants max_completion_tokens) and
        # the study's top_k and repetition penalty (vLLM: repetition_penalty; llama.cpp:
        # repeat_penalty); each server ignores the names it does not know.
        kwargs["extra_body"] = {
            "max_tokens": settings.max_tokens,
            "top_k": settings.top_k,
            "repetition_penalty": settings.repeat_penalty,
            "repeat_penalty": settings.repeat_penalty,
            **(extra_body or {}),
        }
    else:
        kwargs["max_completion_tokens"] = settings.max_tokens
    if settings.wants_logprobs(compatible):
        # The verdict token's probabilities give the verdict's confidence.
        kwargs["logprobs"] = True
        kwargs["top_logprobs"] = TOP_LOGPROBS
    # The class is made at first use, so its extra pydantic fields are not known statically.
    chat_openai: Callable[..., BaseChatModel] = chat_class or explained_chat_openai()
    kwargs.update(openai_http_clients(settings))
    return chat_openai(
        spec=spec,
        model=name,
        base_url=base_url,
        temperature=settings.temperature,
        top_p=settings.top_p,
        timeout=settings.timeout,
        max_retries=max(0, settings.max_retries),
        stream_usage=True,
        **kwargs,
    )


def build_openai(name: str, settings: ModelSettings) -> BaseChatModel:
    """Build ``openai:<name>``; the key comes from ``OPENAI_API_KEY`` only."""
    if not os.environ.get("OPENAI_API_KEY"):
        raise UnknownModelError(f"openai:{name} needs OPENAI_API_KEY in the environment")
    return openai_api_model(f"openai:{name}", name, settings, base_url=settings.base_url or None,
                         api_key=None, compatible=False)


def build_compatible(name: str, settings: ModelSettings) -> BaseChatModel:
    """Build ``openai-compatible:<name>`` against ``base_url`` or ``OPENAI_BASE_URL``."""
    base_url = settings.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        raise UnknownModelError(
            f"openai-compatible:{name} needs a server URL: set base_url (--base-url) "
            "or OPENAI_BASE_URL, e.g. http://127.0.0.1:8000/v1"
        )
    # Local servers usually ignore the key, but the client insists on one.
    api_key = os.environ.get("OPENAI_API_KEY") or "not-needed"
    return openai_api_model(f"openai-compatible:{name}", name, settings, base_url=base_url,
                         api_key=api_key, compatible=True)


def _reach(spec: str, base_url: str, settings: ModelSettings) -> None:
    key = os.environ.get("OPENAI_API_KEY")
    reach(base_url.rstrip("/") + "/models", where=f"{spec} at {redact_url(base_url)}",
          timeout=settings.timeout, headers={"Authorization": f"Bearer {key}"} if key else None,
          hint="start the server or fix --base-url (it usually ends in /v1)")


def reach_openai(name: str, settings: ModelSettings) -> None:
    """List the server's models once to see that it answers (the list is not read)."""
    _reach(f"openai:{name}", settings.base_url or os.environ.get("OPENAI_BASE_URL")
           or "https://api.openai.com/v1", settings)


def reach_compatible(name: str, settings: ModelSettings) -> None:
    """List the server's models once to see that it answers (the list is not read)."""
    _reach(f"openai-compatible:{name}",
           settings.base_url or os.environ.get("OPENAI_BASE_URL") or "", settings)


OPENAI = Provider(build_openai, env=("OPENAI_API_KEY", "OPENAI_BASE_URL"), reach=reach_openai,
                  constrain=with_response_format)
COMPATIBLE = Provider(build_compatible, env=("OPENAI_API_KEY", "OPENAI_BASE_URL"),
                      reach=reach_compatible, constrain=with_response_format)
