"""Stub model servers on 127.0.0.1 that speak the Ollama, OpenAI and Azure OpenAI protocols."""

from tests.support.stubs.azure import AzureStub
from tests.support.stubs.base import Behaviour, Seen, StubServer, refused_url
from tests.support.stubs.ollama import OllamaStub
from tests.support.stubs.openai import OpenAIStub

__all__ = ["AzureStub", "Behaviour", "OllamaStub", "OpenAIStub", "Seen", "StubServer",
           "refused_url"]
