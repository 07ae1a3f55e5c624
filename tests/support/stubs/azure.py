"""A stub Azure OpenAI endpoint: ``/openai/deployments/<d>/chat/completions?api-version=...``.

Answers as the OpenAI stub does (JSON or SSE stream, with usage), after Azure's own checks:
the ``api-key`` header must hold the stub's key (else 401 with Azure's message), the
``api-version`` query must be present (else 404 ``Resource not found``) and the deployment
must exist (else 404 ``DeploymentNotFound``). Requests are recorded with their query.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.stubs.base import Behaviour
from tests.support.stubs.openai import OpenAIHandler, OpenAIStub

KEY = "stub-azure-key"
API_VERSION = "2024-10-21"
_PATH = re.compile(r"^/openai/deployments/([^/]+)/chat/completions$")


class AzureHandler(OpenAIHandler):
    """Azure's chat completions route, keyed by deployment."""

    deployments: tuple[str, ...] = ("gpt-4o-mini",)
    api_key: str = KEY

    def route(self, method: str, path: str) -> str | None:
        """Route every deployment's chat completions path to ``azure_completions``."""
        return "azure_completions" if method == "POST" and _PATH.match(path) else None

    def azure_error(self, status: int, code: str, message: str) -> None:
        """Send Azure's error body."""
        self.send_json(status, {"error": {"code": code, "message": message}})

    def azure_completions(self, body: Any) -> None:
        """Check the key, API version and deployment, then answer as OpenAI does."""
        parts = urlsplit(self.path)
        match = _PATH.match(parts.path)
        deployment = match.group(1) if match else ""
        if self.headers.get("api-key") != self.api_key:
            self.azure_error(401, "401", "Access denied due to invalid subscription key or "
                             "wrong API endpoint. Make sure to provide a valid key for an "
                             "active subscription and use a correct regional API endpoint "
                             "for your resource.")
            return
        if not parse_qs(parts.query).get("api-version"):
            self.azure_error(404, "404", "Resource not found")
            return
        if deployment not in self.deployments:
            self.azure_error(404, "DeploymentNotFound", "The API deployment for this resource "
                             "does not exist. If you created the deployment within the last 5 "
                             "minutes, please wait a moment and try again.")
            return
        self.completions(body)


class AzureStub(OpenAIStub):
    """A stub Azure OpenAI resource; ``url`` is the endpoint (``AZURE_OPENAI_ENDPOINT``)."""

    prefix = ""

    def __init__(self, behaviour: Behaviour | None = None, *,
                 deployments: tuple[str, ...] = ("gpt-4o-mini",), api_key: str = KEY) -> None:
        super().__init__(behaviour)
        self.handler = type("AzureDeployments", (AzureHandler,),
                            {"deployments": deployments, "api_key": api_key})

    def queries(self) -> list[dict[str, list[str]]]:
        """The query strings of the model calls received so far."""
        return [parse_qs(r.query) for r in self.calls()]
