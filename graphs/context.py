"""Run-time configuration of the graphs: what Studio shows as an assistant's settings.

Each strategy has a Context dataclass; fields shared by all live in ``Context``. A field's
``metadata["description"]`` is what Studio shows; model fields carry the ``llm`` hint so
Studio offers a model picker. Prompt fields hold a file name in ``prompts/`` (or a path), so
a run can swap a prompt without code changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Annotated, Any, TypeVar

from langgraph.runtime import Runtime

LLM_HINT = {"__template_metadata__": {"kind": "llm"}}
DEFAULT_MODEL = "replay:gemma2:9b"


@dataclass(kw_only=True)
class Context:
    """Settings every strategy shares: the model, its sampling, and where data lives."""

    model: Annotated[str, LLM_HINT] = field(
        default=DEFAULT_MODEL,
        metadata={
            "description": "The chat model as provider:model, e.g. ollama:gemma2:9b, "
            "openai:gpt-4o-mini, openai-compatible:<name>, replay:gemma2:9b."
        },
    )
    prompt: str = field(
        default="",
        metadata={"description": "Prompt file in prompts/ or a path; empty = the method's own."},
    )
    temperature: float = field(
        default=0.75, metadata={"description": "Sampling temperature (upstream: 0.75)."}
    )
    top_p: float = field(default=0.9, metadata={"description": "Nucleus sampling (upstream: 0.9)."})
    top_k: int = field(default=40, metadata={"description": "Top-k sampling, Ollama only (40)."})
    max_tokens: int = field(
        default=512, metadata={"description": "Most tokens a model may answer (upstream: 512)."}
    )
    repeat_penalty: float = field(
        default=1.1, metadata={"description": "Repetition penalty, Ollama only (1.1)."}
    )
    timeout: float = field(
        default=60.0, metadata={"description": "Seconds to wait for one model call."}
    )
    max_retries: int = field(
        default=3,
        metadata={"description": "Transport retries with exponential backoff per model call."},
    )
    retry_backoff: float = field(
        default=0.5,
        metadata={"description": "Seconds before the first transport retry; doubled for each "
                  "further one (at most 8 s)."},
    )
    base_url: str = field(
        default="",
        metadata={
            "description": "Server URL for ollama/openai-compatible models; empty = "
            "OLLAMA_HOST / OPENAI_BASE_URL or the provider default."
        },
    )
    data_dir: str = field(
        default="",
        metadata={
            "description": "FactCheck data in the upstream layout (replay reads its recorded "
            "answers there); empty = $KGCHECK_DATA or the vendored copy."
        },
    )
    replay_latency: float = field(
        default=0.0,
        metadata={
            "description": "Replay only: sleep this multiple of each recorded response time "
            "(0 = answer at once, 1 = real latency)."
        },
    )


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
