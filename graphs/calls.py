"""Call a chat model about one fact: tag the call, time it, read its token counts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from typing_extensions import TypedDict

from graphs.models import ChatRunnable
from graphs.replay import META_DATASET, META_FACT, META_METHOD, META_STEP
from graphs.state import Fact


def call_config(fact: Fact, method: str, step: str = "verdict",
                **extra: Any) -> RunnableConfig:
    """Runnable config whose metadata tells replay, traces and callbacks which fact is asked."""
    metadata = {
        META_FACT: fact.id,
        META_DATASET: fact.dataset,
        META_METHOD: method,
        META_STEP: step,
        **extra,
    }
    return {"metadata": metadata, "tags": [f"kgcheck:{method}", f"step:{step}"]}


class CallRecord(TypedDict):
    """One model call as kept in graph state: the raw answer and what it cost."""

    text: str
    seconds: float
    tokens_in: int | None
    tokens_out: int | None


@dataclass
class ModelReply:
    """A model's answer with what it cost."""

    text: str
    message: AIMessage
    seconds: float
    tokens_in: int | None
    tokens_out: int | None

    def record(self) -> CallRecord:
        """Return the JSON-plain record of this call."""
        return CallRecord(text=self.text, seconds=self.seconds,
                          tokens_in=self.tokens_in, tokens_out=self.tokens_out)


def reply_text(message: BaseMessage) -> str:
    """Return the text of a reply, whether its content is a string or a list of blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        block.get("text", "") if isinstance(block, dict) else str(block) for block in content
    )


async def ask(model: ChatRunnable, messages: Sequence[BaseMessage], fact: Fact, method: str,
              step: str = "verdict", **extra: Any) -> ModelReply:
    """Send ``messages`` to ``model`` about ``fact``; time the call and collect usage."""
    started = time.perf_counter()
    message = await model.ainvoke(messages, config=call_config(fact, method, step, **extra))
    elapsed = time.perf_counter() - started
    recorded = (message.response_metadata or {}).get("recorded_seconds")
    usage = getattr(message, "usage_metadata", None) or {}
    return ModelReply(
        text=reply_text(message),
        message=message,
        # Replay reports the study's measured latency rather than its own lookup time.
        seconds=float(recorded) if recorded is not None else elapsed,
        tokens_in=usage.get("input_tokens"),
        tokens_out=usage.get("output_tokens"),
    )
