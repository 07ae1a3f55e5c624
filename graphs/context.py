"""Run-time configuration of the graphs: what Studio shows as an assistant's settings.

Each strategy has a Context dataclass derived from ``Context``, which carries the model and
its sampling (``ModelSettings``, declared once in the providers) plus the prompt file and
the verdict parser. A field's ``metadata["description"]`` is what Studio shows; model fields
carry the ``llm`` hint so Studio offers a model picker.

A Context class also says what its strategy is, in two class variables that are not
settings (Studio does not show them, ``--set`` cannot change them): ``METHOD``, the label
its verdicts carry, and ``REPLAYS``, which of the study's recorded answers ``replay:``
models serve it (None: none).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, ClassVar, TypeVar, cast

from langchain_core.language_models import BaseChatModel
from langgraph.runtime import Runtime

from kgcheck.arguments import truthy
from kgcheck.providers import ModelSettings, resolve_model

LLM_HINT = {"__template_metadata__": {"kind": "llm"}}
# ``constrain``'s default: held where the model's provider holds by default (local:).
AUTO = "auto"
FALSE_WORDS = ("0", "false", "no", "off")
DEFAULT_MODEL = "replay:gemma2:9b"


@dataclass(kw_only=True)
class Context(ModelSettings):
    """Settings every strategy shares: the model and its sampling, the prompt, the parser."""

    METHOD: ClassVar[str] = ""
    REPLAYS: ClassVar[str | None] = None
    # The not-enough-evidence variants: setting -> value used when ``abstain`` is on and
    # the setting still has its default (the study's prompt or parser).
    ABSTAIN: ClassVar[dict[str, str]] = {}

    model: Annotated[str, LLM_HINT] = field(
        default=DEFAULT_MODEL,
        metadata={
            "description": "The chat model as provider:model, e.g. ollama:gemma2:9b, "
            "openai:gpt-4o-mini, openai-compatible:<name>, azure:<deployment>, "
            "replay:gemma2:9b, local:smollm2-135m (llama.cpp on this machine; a 135M "
            "model, near chance) or local:/path/to/model.gguf."
        },
    )
    prompt: str = field(
        default="",
        metadata={"description": "Prompt file in prompts/ or a path; empty = the method's own."},
    )
    parser: str = field(
        default="strict",
        metadata={"description": "How the answer is read: strict (T or F on a line of its own "
                  "or after a label), last-line (the verdict on the last line, after any "
                  "reasoning), yes-no-json ({\"output\": \"yes\"|\"no\"})."},
    )

    abstain: bool = field(
        default=False,
        metadata={"description": "Let the model answer NEI (not enough evidence) beside T "
                  "and F: the method's default prompt and parser become their "
                  "not-enough-evidence variants. Off: the study's prompts and outcomes."},
    )
    reasons: bool = field(
        default=False,
        metadata={"description": "Ask for a one- or two-sentence reason in the same call "
                  "(a line 'Reason: ...' after the verdict, read apart from the label)."},
    )
    citations: bool = field(
        default=False,
        metadata={"description": "Evidence strategies: ask which passages (by the ids the "
                  "prompt gives them) support or refute the fact."},
    )
    corrections: bool = field(
        default=False,
        metadata={"description": "For a fact judged false, ask which part is wrong "
                  "(subject, predicate or object) and the value the model believes right."},
    )
    transcript: bool = field(
        default=True,
        metadata={"description": "Keep the exact conversation (every message sent and "
                  "received) in each verdict."},
    )

    def __post_init__(self) -> None:
        if isinstance(self.abstain, str):
            self.abstain = truthy(self.abstain)
        if isinstance(self.constrain, str):
            word = self.constrain.strip().lower()
            if word != AUTO and word not in FALSE_WORDS and not truthy(word):
                raise ValueError(f"constrain {self.constrain!r}: expected auto, true or false")
            self.constrain = AUTO if word == AUTO else truthy(word)
        if self.abstain:
            # Only settings still at the class's default switch: a chosen prompt stays.
            defaults = {f.name: f.default for f in fields(self)}
            for name, variant in self.ABSTAIN.items():
                if getattr(self, name) == defaults.get(name):
                    setattr(self, name, variant)

    constrain: bool | str = field(
        default=AUTO,
        metadata={"description": "Hold the model to the parser's answer format where its "
                  "provider can (local: a llama.cpp grammar, which also holds the reason "
                  "and correction lines; openai, azure, openai-compatible: a JSON schema "
                  "response_format; ollama: a JSON schema format); ignored with a warning "
                  "elsewhere (replay). auto (the default): on for local: models, off for "
                  "the others; true or false: for every model."},
    )

    def chat_model(self, spec: str | None = None) -> BaseChatModel:
        """Resolve this context's model (or ``spec``) with this context's model settings."""
        return resolve_model(spec or self.model, self)


C = TypeVar("C", bound=Context)


def context_of(runtime: Runtime[C] | None, cls: type[C]) -> C:
    """Return the run's context, or the defaults when a caller passed none."""
    ctx = getattr(runtime, "context", None) if runtime is not None else None
    if ctx is None:
        return cls()
    if isinstance(ctx, dict):
        # The server may hand over a plain dict; keep only fields this class knows.
        return make_context(cls, ctx)
    return ctx


def make_context(cls: type[C], values: dict[str, Any]) -> C:
    """Build ``cls`` from a mapping, ignoring keys it does not define and ``None`` values."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names and v is not None})


N = TypeVar("N", bound=Callable[..., Any])


def bind(node: N, context: type[Context]) -> N:
    """Give a node (or router) the Context class its graph is built for.

    Nodes read their settings with ``context_of(runtime, context)``: the Context the run
    was given, else this class's defaults, so a graph built for a subclass (``giv-f``, a
    plugin's variant) keeps its own defaults when a caller passes no context.
    """
    if inspect.signature(node).parameters["context"].default is context:
        return node  # already its default: no wrapper, no extra call per step
    # A wrapper function rather than functools.partial: OpenLIT rewrites a node's ``func``,
    # which a partial does not allow. ``wraps`` keeps the signature and annotations that
    # LangGraph reads (the runtime parameter, a router's destinations).
    if inspect.iscoroutinefunction(node):
        @functools.wraps(node)
        async def bound_async(*args: Any, **kwargs: Any) -> Any:
            return await node(*args, context=context, **kwargs)

        return cast(N, bound_async)

    @functools.wraps(node)
    def bound(*args: Any, **kwargs: Any) -> Any:
        return node(*args, context=context, **kwargs)

    return cast(N, bound)
