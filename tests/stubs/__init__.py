"""Stub model servers on 127.0.0.1 that speak the Ollama, OpenAI and Azure OpenAI protocols."""

from tests.stubs.azure import AzureStub
from tests.stubs.base import Behaviour, Seen, StubServer, refused_url
from tests.stubs.ollama import OllamaStub
from tests.stubs.openai import OpenAIStub

__all__ = ["AzureStub", "Behaviour", "OllamaStub", "OpenAIStub", "Seen", "StubServer",
           "refused_url"]
