"""The ``azure`` provider: Azure OpenAI deployments through langchain-openai's AzureChatOpenAI.

``azure:<deployment>`` calls ``{AZURE_OPENAI_ENDPOINT}/openai/deployments/<deployment>/chat/
completions?api-version={OPENAI_API_VERSION}`` with the key of ``AZURE_OPENAI_API_KEY`` in
the ``api-key`` header, the FactCheck study's only commercial route. ``base_url``
(``--base-url``) overrides the endpoint. The openai client retries, and a call is bounded,
as for OpenAI (``OpenAIClientModel``); a spent error names the deployment and endpoint,
never the key.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache

from langchain_core.language_models import BaseChatModel

from kgcheck.providers.constraints import with_response_format
from kgcheck.providers.openai_chat import OpenAIClientModel, openai_http_clients
from kgcheck.providers.provider import Provider
from kgcheck.providers.settings import ModelSettings
from kgcheck.providers.transports import UnknownModelError, redact_url

ENV = ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "OPENAI_API_VERSION")


@cache
def explained_azure_chat_openai() -> type[BaseChatModel]:
    """Build (once) the AzureChatOpenAI class whose spent errors say where it tried."""
    import openai
    from langchain_openai import AzureChatOpenAI

    class ExplainedAzureChatOpenAI(OpenAIClientModel, AzureChatOpenAI):
        """AzureChatOpenAI whose spent transport errors name the deployment and endpoint."""

        spec: str = ""
        """The ``provider:model`` string, quoted in error messages."""

        def _explain(self, exc: BaseException) -> None:
            spec = self.spec or f"azure:{self.deployment_name}"
            url = redact_url(str(self.azure_endpoint or ""))
            if isinstance(exc, openai.NotFoundError):
                # An unknown deployment or API version: no other fact escapes it.
                raise UnknownModelError(
                    f"{spec} at {url}: {exc.message} (check the deployment name and "
                    "OPENAI_API_VERSION)") from exc
            if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
                raise UnknownModelError(
                    f"{spec} at {url}: the key was refused (check AZURE_OPENAI_API_KEY)"
                ) from exc
            self._explain_spent(exc, spec, url)

    return ExplainedAzureChatOpenAI


def build_azure(deployment: str, settings: ModelSettings) -> BaseChatModel:
    """Build ``azure:<deployment>`` from the Azure OpenAI environment variables."""
    endpoint = settings.base_url or os.environ.get("AZURE_OPENAI_ENDPOINT")
    missing = [name for name, value in (("AZURE_OPENAI_ENDPOINT", endpoint),
                                        ("AZURE_OPENAI_API_KEY",
                                         os.environ.get("AZURE_OPENAI_API_KEY")),
                                        ("OPENAI_API_VERSION",
                                         os.environ.get("OPENAI_API_VERSION")))
               if not value]
    if missing:
        raise UnknownModelError(
            f"azure:{deployment} needs {', '.join(missing)} in the environment (the endpoint "
            "https://<resource>.openai.azure.com, the key, and an API version such as "
            "2024-10-21)")
    # The class is made at first use, so its extra pydantic fields are not known statically.
    azure_chat: Callable[..., BaseChatModel] = explained_azure_chat_openai()
    return azure_chat(
        spec=f"azure:{deployment}",
        azure_deployment=deployment,
        azure_endpoint=endpoint,
        api_key=os.environ["AZURE_OPENAI_API_KEY"],
        api_version=os.environ["OPENAI_API_VERSION"],
        temperature=settings.temperature,
        top_p=settings.top_p,
        max_tokens=settings.max_tokens,
        timeout=settings.timeout,
        max_retries=max(0, settings.max_retries),
        stream_usage=True,
        **openai_http_clients(settings),
    )


PROVIDER = Provider(build_azure, env=ENV, constrain=with_response_format)
