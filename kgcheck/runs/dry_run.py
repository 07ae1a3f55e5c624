"""Estimate a run before it starts: facts, model calls, tokens and cost (``--dry-run``).

The strategy's own prompt files are filled with every fact and their tokens counted: with
tiktoken's ``o200k_base`` encoding when tiktoken and that encoding are available offline
(already cached; nothing is downloaded), else as characters / 4. Output is bounded by
``max_tokens`` per call, so the estimated cost is an upper bound for output and a close
figure for input. Prices are ``evals.cost``'s.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from kgcheck.data.facts import Fact
from kgcheck.graphs.context import Context
from kgcheck.graphs.prompting import fill_prompt
from kgcheck.graphs.strategies.dka import PROMPT_FIELDS as DKA_FIELDS
from kgcheck.graphs.strategies.dka_sc import DKASCContext
from kgcheck.graphs.strategies.giv import GIVContext, first_prompt
from kgcheck.graphs.strategies.rag import TRIPLE_FIELDS, VERIFY_FIELDS, RAGContext
from kgcheck.providers.pricing import Pricing, default_pricing

__all__ = ["CHARS_PER_TOKEN", "CallPlan", "Estimate", "TIKTOKEN_ENCODING", "TIKTOKEN_SHA256",
           "TIKTOKEN_URL", "count_tokens", "estimate", "fact_calls", "tokenizer_name"]

TIKTOKEN_ENCODING = "o200k_base"
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
TIKTOKEN_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
CHARS_PER_TOKEN = 4


@cache
def _tiktoken_encoder() -> Callable[[str], int] | None:
    """Return tiktoken's counter when tiktoken and its encoding are on this machine."""
    try:
        import tiktoken
    except ImportError:
        return None
    # tiktoken downloads an encoding on first use; use it only when it is already cached
    # (the run must not reach the network), found where tiktoken itself looks.
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") \
        or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    cached = Path(cache_dir) / hashlib.sha1(TIKTOKEN_URL.encode()).hexdigest()
    # A damaged cached file would make tiktoken fetch the encoding again: check it first.
    try:
        if hashlib.sha256(cached.read_bytes()).hexdigest() != TIKTOKEN_SHA256:
            return None
    except OSError:
        return None
    try:
        encoding = tiktoken.get_encoding(TIKTOKEN_ENCODING)
    except Exception:  # noqa: BLE001 - any failure means: count characters instead
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def tokenizer_name() -> str:
    """Say how tokens are counted: tiktoken's encoding, or characters / 4."""
    return (f"tiktoken {TIKTOKEN_ENCODING}" if _tiktoken_encoder()
            else f"characters / {CHARS_PER_TOKEN} (tiktoken encoding not available offline)")


def count_tokens(text: str) -> int:
    """Count a text's tokens (see ``tokenizer_name``)."""
    encoder = _tiktoken_encoder()
    if encoder is not None:
        return encoder(text)
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass
class CallPlan:
    """The model calls one fact costs under a strategy: prompts sent, and at most how many."""

    prompts: list[str]
    max_calls: int
    note: str = ""


def fact_calls(ctx: Context, fact: Fact) -> CallPlan:
    """Fill the strategy's prompt files with a fact: the calls it makes, at the least."""
    if isinstance(ctx, RAGContext):
        sentence = fill_prompt(ctx.sentence_prompt, TRIPLE_FIELDS, fact)
        questions = fill_prompt(ctx.questions_prompt, {"sentence"}, fact,
                                sentence=fact.readable, max_questions=ctx.max_questions)
        verify = fill_prompt(ctx.prompt, VERIFY_FIELDS, fact, sentence=fact.readable)
        return CallPlan([sentence, questions, verify], 3,
                        "RAG: the retrieved evidence in the verification prompt is not counted")
    if isinstance(ctx, GIVContext):
        messages, _ = first_prompt(ctx, fact)
        # System and user messages alike are sent, and counted.
        text = "\n".join(str(m.content) for m in messages)
        return CallPlan([text], ctx.max_attempts,
                        f"GIV: one call per fact, up to {ctx.max_attempts} when answers do not "
                        "comply")
    if isinstance(ctx, DKASCContext):
        dka = fill_prompt(ctx.prompt, DKA_FIELDS, fact)
        return CallPlan([dka] * ctx.samples, ctx.samples)
    # DKA and strategies from plugins: one prompt, filled from the fact.
    return CallPlan([fill_prompt(ctx.prompt or "dka.txt", set(), fact)], 1)


@dataclass
class Estimate:
    """What a run will send before it sends anything: facts, calls, tokens and cost."""

    facts: int
    skipped: int
    calls: int
    max_calls: int
    tokens_in: int
    max_tokens_out: int
    by_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    cost_in_usd: float | None = None
    max_cost_usd: float | None = None
    unpriced: list[str] = field(default_factory=list)
    tokenizer: str = ""
    notes: list[str] = field(default_factory=list)
    # With a pre-filter, its counts as a run's summary has them: facts it screened, those it
    # settles without a model call (refuted), those sent to the model, and the calls saved.
    prefilter: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Return the estimate as JSON-plain data."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def estimate(facts: Iterable[Fact], contexts: Mapping[str, Context],
             pricing: Pricing | None = None, *, done: Iterable[str] = (),
             screen: Callable[[Fact], Fact | None] | None = None) -> Estimate:
    """Estimate a run: every fact not ``done`` and not defective, for each model's Context.

    ``contexts`` maps each model that answers (consensus members: each of them) to its
    Context. Input tokens are the filled prompts' tokens; output tokens at most
    ``max_tokens`` per call at most ``max_calls`` times, so ``max_cost_usd`` bounds the
    cost from above (retrieved evidence and judges aside: see ``notes``). ``screen`` is a
    pre-filter's decision per fact (``runs.prefilter.screener``): the fact as the model
    sees it, or None when the pre-filter settles it; those facts cost no call.
    """
    prices = pricing or default_pricing()
    finished = set(done)
    todo = [f for f in facts if f.id not in finished]
    sendable = [f for f in todo if not f.defect]
    result = Estimate(facts=len(todo), skipped=len(todo) - len(sendable), calls=0, max_calls=0,
                      tokens_in=0, max_tokens_out=0, tokenizer=tokenizer_name())
    if screen is not None:
        screened = [(fact, screen(fact)) for fact in sendable]
        settled = [fact for fact, seen in screened if seen is None]
        sendable = [seen for _, seen in screened if seen is not None]
        saved = sum(len(fact_calls(ctx, fact).prompts)
                    for ctx in contexts.values() for fact in settled)
        result.prefilter = {"facts": len(screened), "refuted": len(settled),
                            "sent_to_model": len(sendable), "calls_saved": saved}
    total_in = total_out = 0.0
    for model, ctx in contexts.items():
        calls = max_calls = tokens_in = 0
        notes: set[str] = set()
        for fact in sendable:
            plan = fact_calls(ctx, fact)
            calls += len(plan.prompts)
            max_calls += plan.max_calls
            tokens_in += sum(count_tokens(p) for p in plan.prompts)
            if plan.note:
                notes.add(plan.note)
        tokens_out = max_calls * max(0, int(ctx.max_tokens or 0))
        price = prices.price(model)
        usd_in = None if price is None else round(price.of(tokens_in, 0), 6)
        usd_out = None if price is None else round(price.of(0, tokens_out), 6)
        if price is None:
            result.unpriced.append(model)
        else:
            total_in += usd_in or 0.0
            total_out += usd_out or 0.0
        result.by_model[model] = {"calls": calls, "max_calls": max_calls,
                                  "tokens_in": tokens_in, "max_tokens_out": tokens_out,
                                  "usd_in": usd_in, "max_usd_out": usd_out}
        result.calls += calls
        result.max_calls += max_calls
        result.tokens_in += tokens_in
        result.max_tokens_out += tokens_out
        result.notes += sorted(notes - set(result.notes))
    if not result.unpriced:
        result.cost_in_usd = round(total_in, 6)
        result.max_cost_usd = round(total_in + total_out, 6)
    return result
