"""Model providers: ``provider:model`` strings to LangChain chat models, with retries.

Built in: ``ollama`` (``ollama_chat``), ``openai`` and ``openai-compatible``
(``openai_chat``), ``replay`` (the study's recorded answers). ``settings`` declares the
sampling and transport settings once; ``transports`` holds the retry and error rules;
``resolve`` the registry and the resolver; ``metadata`` the keys a call carries; ``secrets``
the redaction every writer of settings, URLs and messages goes through.
"""

from kgcheck.providers.provider import Provider
from kgcheck.providers.resolve import (
    PROVIDERS,
    UnknownProviderError,
    reach_model,
    resolve_model,
    split_spec,
)
from kgcheck.providers.secrets import redact_settings, redact_text, redact_url
from kgcheck.providers.settings import ModelSettings
from kgcheck.providers.transports import ModelUnreachableError, UnknownModelError

__all__ = [
    "PROVIDERS",
    "ModelSettings",
    "ModelUnreachableError",
    "Provider",
    "UnknownModelError",
    "UnknownProviderError",
    "redact_settings",
    "redact_text",
    "redact_url",
    "reach_model",
    "resolve_model",
    "split_spec",
]
