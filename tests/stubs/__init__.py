"""Stub model servers on 127.0.0.1 that speak the Ollama and OpenAI wire protocols."""

from tests.stubs.base import Behaviour, Seen, StubServer, refused_url
from tests.stubs.ollama import OllamaStub
from tests.stubs.openai import OpenAIStub

__all__ = ["Behaviour", "OllamaStub", "OpenAIStub", "Seen", "StubServer", "refused_url"]
