"""Sampling and transport settings of a model call, declared once.

Every strategy's Context inherits ``ModelSettings``, so Studio shows these fields and
``--set`` changes them; the providers read them through ``ModelSettings.of``. No strategy
setting may reuse one of these names for something else
(tests/integration/test_structure.py checks).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(kw_only=True)
class ModelSettings:
    """How a chat model is called; the sampling defaults are the study's (REFERENCE.md 2)."""

    temperature: float = field(
        default=0.75, metadata={"description": "Sampling temperature (study: 0.75)."})
    top_p: float = field(
        default=0.9, metadata={"description": "Nucleus sampling (study: 0.9)."})
    top_k: int = field(
        default=40, metadata={"description": "Top-k sampling; Ollama and OpenAI-compatible "
                              "servers (study: 40)."})
    max_tokens: int = field(
        default=512, metadata={"description": "Most tokens an answer may have (study: 512)."})
    repeat_penalty: float = field(
        default=1.1, metadata={"description": "Repetition penalty; Ollama and OpenAI-compatible "
                               "servers (study: 1.1)."})
    timeout: float = field(
        default=60.0, metadata={"description": "Seconds to wait for one model call."})
    max_retries: int = field(
        default=3,
        metadata={"description": "Transport retries with exponential backoff per model call."})
    retry_backoff: float = field(
        default=0.5,
        metadata={"description": "Seconds before the first transport retry; doubled for each "
                  "further one (at most 8 s)."})
    base_url: str = field(
        default="",
        metadata={"description": "Server URL for ollama/openai-compatible models; empty = "
                  "OLLAMA_HOST / OPENAI_BASE_URL or the provider default."})
    data_dir: str = field(
        default="",
        metadata={"description": "FactCheck data in the upstream layout (replay reads its "
                  "recorded answers there); empty = $KGCHECK_DATA or the vendored copy."})
    logprobs: str = field(
        default="auto",
        metadata={"description": "Ask the server for the answer tokens' log-probabilities "
                  "(top 5), from which a verdict's confidence is read: auto (OpenAI-compatible "
                  "servers such as llama.cpp and vLLM, where it is free), on (also OpenAI), "
                  "off."})
    local_n_ctx: int = field(
        default=2048,
        metadata={"description": "local: models only: the llama.cpp server's context size "
                  "in tokens (prompt and answer)."})
    local_threads: int = field(
        default=0,
        metadata={"description": "local: models only: CPU threads of the llama.cpp server; "
                  "0 = one per core (at most 8)."})
    local_port: int = field(
        default=0,
        metadata={"description": "local: models only: the llama.cpp server's port on "
                  "127.0.0.1; 0 = a free one."})
    local_prefix_reuse: bool = field(
        default=True,
        metadata={"description": "local: models only: let the llama.cpp server reuse the "
                  "part of a prompt it computed for the request before (the instructions and "
                  "examples every fact shares): many times faster, but at temperature 0 a "
                  "verdict may change with the order facts arrive in; false computes every "
                  "prompt afresh (bit-exact whatever the order)."})
    replay_latency: float = field(
        default=0.0,
        metadata={"description": "Replay only: sleep this multiple of each recorded response "
                  "time (0 = answer at once, 1 = real latency)."})

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Return the names of the model settings."""
        return _NAMES

    @classmethod
    def of(cls, settings: ModelSettings) -> ModelSettings:
        """Return just the model settings of a Context (or of any ModelSettings)."""
        if type(settings) is ModelSettings:
            return settings
        return ModelSettings(**{name: getattr(settings, name) for name in _NAMES})

    def wants_logprobs(self, compatible: bool) -> bool:
        """Tell whether a call asks for log-probabilities (``auto``: compatible servers)."""
        mode = str(self.logprobs).strip().lower()
        if mode in ("on", "true", "1", "yes"):
            return True
        return compatible and mode == "auto"

    def key(self) -> tuple[Any, ...]:
        """Return a hashable value, equal for equal settings (to cache built models)."""
        return tuple(getattr(self, name) for name in _NAMES)


_NAMES = tuple(f.name for f in fields(ModelSettings))
