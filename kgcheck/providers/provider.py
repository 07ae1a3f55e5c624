"""What a model provider is: a function from a model name and settings to a chat model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

from kgcheck.providers.constraints import AnswerFormat
from kgcheck.providers.settings import ModelSettings


@dataclass(frozen=True)
class Provider:
    """A model provider, registered under the ``provider`` part of ``provider:model``.

    Attributes:
        build: Make the chat model for a model name and settings; raise
            ``UnknownModelError`` with the reason when it cannot (a missing key or URL).
        env: Environment variables ``build`` reads; a change of any of them builds anew.
        reuse: Keep one built model per event loop and settings (models that hold an HTTP
            client should); off for models that must be fresh on every resolution.
        reach: Contact the model's server once (a cheap request, no model call) and raise
            ``ModelUnreachableError`` when nothing answers there (``UnknownModelError``
            when the server says it lacks the model); None for models that need no server
            (replay, scripted).
        prepare: Do what the model needs before its first call, blocking work included
            (start a local server); run once per model and settings, off the event loop,
            so that ``build`` then does no blocking I/O. None for most providers.
        note: Say what a user should know about a model's answers (a tiny model's are near
            chance), or None; shown before a run.
        constrain: Return the model bound to answer in a format (a GBNF grammar or a JSON
            schema, ``constraints``); None for models that cannot be constrained.
        constrain_by_default: Hold the models to their answer format when a run leaves
            ``constrain`` at ``auto`` (small local models rarely comply unheld).

    """

    build: Callable[[str, ModelSettings], BaseChatModel]
    env: tuple[str, ...] = ()
    reuse: bool = True
    reach: Callable[[str, ModelSettings], None] | None = None
    constrain: Callable[[BaseChatModel, AnswerFormat], Runnable] | None = None
    constrain_by_default: bool = False
    note: Callable[[str], str | None] | None = None
    prepare: Callable[[str, ModelSettings], object] | None = None
