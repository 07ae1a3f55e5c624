"""Call a chat model about one fact: tag the call, time it, read its token counts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NotRequired

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from typing_extensions import TypedDict

from kgcheck.data.facts import Fact
from kgcheck.graphs.context import AUTO, Context
from kgcheck.graphs.explain import (
    Requests,
    compact_logprobs,
    explained_format,
    reply_logprobs,
)
from kgcheck.graphs.parsing import answer_format
from kgcheck.providers import metadata
from kgcheck.providers.cache import CachedAnswer, active_cache, answer_key
from kgcheck.providers.constraints import AnswerFormat, notice
from kgcheck.providers.resolve import (
    aprepare_model,
    constrained_model,
    constrains_by_default,
)
from kgcheck.providers.settings import ModelSettings

# Replay already serves recorded answers (and scripted test models must run every time).
UNCACHED_PREFIXES = ("replay:",)


def call_config(fact: Fact, ctx: Context | type[Context], step: str = "verdict", *,
                recorded: str | None = None, **extra: Any) -> RunnableConfig:
    """Runnable config whose metadata tells replay, traces and callbacks which fact is asked.

    ``ctx`` (a strategy's Context, or its class) says which strategy asks and which
    recorded answers replay serves it; ``recorded`` names others for this call.
    """
    values: dict[str, Any] = {
        metadata.FACT_ID: fact.id,
        metadata.DATASET: fact.dataset,
        metadata.METHOD: ctx.METHOD,
        metadata.STEP: step,
        **extra,
    }
    if recorded or ctx.REPLAYS:
        values[metadata.RECORDED_METHOD] = recorded or ctx.REPLAYS
    return {"metadata": values, "tags": [f"kgcheck:{ctx.METHOD}", f"step:{step}"]}


class CallRecord(TypedDict):
    """One model call as kept in graph state: the raw answer and what it cost."""

    text: str
    seconds: float
    tokens_in: int | None
    tokens_out: int | None
    # The answer tokens' log-probabilities, when the server returned them.
    logprobs: NotRequired[list[dict[str, Any]] | None]
    # The answer format the call was held to (which tokens a confidence counts).
    constraint: NotRequired[str]
    # Served from the answer cache: ``seconds`` is the original call's time (present only
    # when True).
    cached: NotRequired[bool]


@dataclass
class ModelReply:
    """A model's answer with what it cost."""

    text: str
    message: AIMessage
    seconds: float
    tokens_in: int | None
    tokens_out: int | None
    # Served from the answer cache: nothing was sent now; ``seconds`` is the original call's.
    cached: bool = False
    logprobs: list[dict[str, Any]] | None = None
    constraint: str | None = None

    def record(self) -> CallRecord:
        """Return the JSON-plain record of this call."""
        record = CallRecord(text=self.text, seconds=self.seconds,
                            tokens_in=self.tokens_in, tokens_out=self.tokens_out)
        if self.logprobs is not None:
            record["logprobs"] = self.logprobs
        if self.constraint is not None:
            record["constraint"] = self.constraint
        if self.cached:
            record["cached"] = True
        return record


def reply_text(message: BaseMessage) -> str:
    """Return the text of a reply, whether its content is a string or a list of blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        block.get("text", "") if isinstance(block, dict) else str(block) for block in content
    )


def current_repeat() -> int | None:
    """Return the repeat index the graph was invoked with (None: a run without repeats)."""
    try:
        value = (get_config().get("metadata") or {}).get(metadata.REPEAT)
    except RuntimeError:  # called outside a graph run
        return None
    return None if value is None else int(value)


def constrains(ctx: Context, spec: str) -> bool:
    """Tell whether calls to ``spec`` are held to an answer format under ``ctx``.

    ``constrain`` is on, off, or ``auto``: held where the model's provider holds by default
    (``local:`` models, whose small models rarely comply otherwise).
    """
    value = getattr(ctx, "constrain", False)
    if value == AUTO:
        return constrains_by_default(spec)
    return bool(value)


def constraint_of(ctx: Context, step: str, parser: str | None, spec: str | None = None,
                  requests: Requests | None = None) -> AnswerFormat | None:
    """Return the answer format a call is held to: with ``constrain``, its verdict's format.

    Only verdict calls are constrained (RAG's sentence and question steps write free text);
    ``parser`` names the reader of this call's answer when it is not the context's. The
    lines ``requests`` ask for beside the verdict (a reason, citations, a correction) are
    held too where the model is held by a grammar.
    """
    if step != "verdict" or not constrains(ctx, spec or ctx.model):
        return None
    name = parser or ctx.parser
    fmt = answer_format(name)
    if fmt is None:
        if getattr(ctx, "constrain", False) is True:
            notice(f"the {name!r} parser has no answer format to constrain to; constrain "
                   "is ignored for it")
        return None
    return explained_format(fmt, requests if requests is not None else Requests.of(ctx))


async def ask(ctx: Context, messages: Sequence[BaseMessage], fact: Fact, step: str = "verdict",
              *, model: str | None = None, recorded: str | None = None,
              parser: str | None = None, requests: Requests | None = None,
              **extra: Any) -> ModelReply:
    """Send ``messages`` about ``fact`` to the context's model (or ``model``), timed.

    ``recorded`` makes replay serve another method's recordings for this call (RAG's DKA
    fallback); ``parser`` names the reader of the answer when it is not the context's (it
    picks the format ``constrain`` holds the model to); ``requests`` are the explanation
    lines the prompt asks for (default: the context's, without citations); ``extra`` goes
    into the call's metadata (``kgcheck_attempt=2``).
    """
    spec = model or ctx.model
    fmt = constraint_of(ctx, step, parser, spec, requests)
    held = fmt.name if fmt is not None else None
    cache = active_cache()
    key = None
    repeat = current_repeat()
    if repeat is not None:
        extra = {metadata.REPEAT: repeat, **extra}
    if cache is not None and cache.enabled and not spec.startswith(UNCACHED_PREFIXES):
        settings = vars(ModelSettings.of(ctx))
        if fmt is not None:
            settings = {**settings, "constraint": fmt.name}
        # The k samples of self-consistency are k draws, each cached on its own; each
        # repeat of a run asks anew.
        key = answer_key(spec, messages, settings, draw=int(extra.get(metadata.SAMPLE, 0)),
                         repeat=repeat)
        hit = await cache.aget(key)
        if hit is not None:
            # The time the answer took when it was asked (an entry written before times
            # were kept has none: 0).
            return ModelReply(text=hit.text, message=AIMessage(hit.text),
                              seconds=hit.seconds or 0.0,
                              tokens_in=hit.tokens_in, tokens_out=hit.tokens_out, cached=True,
                              logprobs=hit.logprobs, constraint=held)
    await aprepare_model(spec, ctx)
    chat: Any = ctx.chat_model(model)
    if fmt is not None:
        chat = constrained_model(spec, chat, fmt)
    started = time.perf_counter()
    message = await chat.ainvoke(
        messages, config=call_config(fact, ctx, step, recorded=recorded, **extra))
    elapsed = time.perf_counter() - started
    recorded = (message.response_metadata or {}).get("recorded_seconds")
    usage = getattr(message, "usage_metadata", None) or {}
    reply = ModelReply(
        text=reply_text(message),
        message=message,
        # Replay reports the study's measured latency rather than its own lookup time.
        seconds=float(recorded) if recorded is not None else elapsed,
        tokens_in=usage.get("input_tokens"),
        tokens_out=usage.get("output_tokens"),
        logprobs=compact_logprobs(
            reply_logprobs((message.response_metadata or {}).get("logprobs"))),
        constraint=held,
    )
    if key is not None and cache is not None:
        await cache.aput(key, spec, CachedAnswer(reply.text, reply.tokens_in, reply.tokens_out,
                                                 reply.seconds, reply.logprobs))
    return reply
