"""The ``scripted`` model provider, for tests only: ``scripted:<name>`` models built by tests.

A test registers a factory under a name; each resolution of ``scripted:<name>`` builds a
fresh model from it, so scripted answers can be shared across the calls of one graph run.
"""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.language_models import BaseChatModel

from kgcheck.providers import PROVIDERS, ModelSettings, Provider, UnknownModelError

SCRIPTED: dict[str, Callable[[], BaseChatModel]] = {}


def _build(name: str, settings: ModelSettings) -> BaseChatModel:
    if name not in SCRIPTED:
        known = ", ".join(sorted(SCRIPTED)) or "none registered"
        raise UnknownModelError(f"unknown scripted model {name!r}; known: {known}")
    return SCRIPTED[name]()


def register_scripted(name: str, factory: Callable[[], BaseChatModel]) -> None:
    """Make ``scripted:<name>`` build a fresh model from ``factory``."""
    SCRIPTED[name] = factory


def install() -> None:
    """Register the ``scripted`` provider (once per process)."""
    if "scripted" not in PROVIDERS:
        PROVIDERS.register("scripted", Provider(_build, reuse=False), origin="tests/support/scripted.py")


install()
