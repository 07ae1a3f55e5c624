"""Fixtures of the integration lane shared by several files: the real local model's server."""

from __future__ import annotations

import pytest

from kgcheck.providers import ModelSettings, llama_server, reach_model
from kgcheck.providers.llama_server import LlamaServer
from kgcheck.providers.local import server_key

LOCAL_MODEL = "local:smollm2-135m"


@pytest.fixture(scope="session")
def local_server() -> LlamaServer:
    """Start the session's llama.cpp server for SmolLM2-135M (default settings)."""
    settings = ModelSettings()
    reach_model(LOCAL_MODEL, settings)
    server = llama_server.running(server_key("smollm2-135m", settings))
    assert server is not None and server.alive()
    return server
