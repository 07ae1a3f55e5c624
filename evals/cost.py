"""Money from tokens: prices per model, the cost of a run, and a run's estimate before it starts.

Prices come from ``kgcheck/pricing.json`` (OpenLIT's format: US dollars per 1,000 tokens,
``promptPrice`` for input and ``completionPrice`` for output, under ``chat``), or from a
file of the same shape given with ``--pricing FILE``. A model is priced by its name without
the provider (``openai:gpt-4o-mini`` -> ``gpt-4o-mini``, ``azure:<deployment>`` -> the
deployment's name); replayed answers cost nothing (no model is called), nor do Ollama
models the file does not list (they run on your machine); any other model the file does not
list has no cost (None, shown as "-") and is named in ``unpriced``.

The estimate (``kgcheck run --dry-run``) fills the strategy's own prompt files with every
fact and counts their tokens: with tiktoken's ``o200k_base`` encoding when tiktoken and that
encoding are available offline, else as characters / 4. Output is bounded by ``max_tokens``
per call, so the estimated cost is an upper bound for output and a close figure for input.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from kgcheck.data.facts import Fact
from kgcheck.graphs.context import Context
from kgcheck.graphs.prompting import fill_prompt
from kgcheck.graphs.strategies.dka import PROMPT_FIELDS as DKA_FIELDS
from kgcheck.graphs.strategies.dka_sc import DKASCContext
from kgcheck.graphs.strategies.giv import GIVContext, first_prompt
from kgcheck.graphs.strategies.rag import TRIPLE_FIELDS, VERIFY_FIELDS, RAGContext

# No model is called (recorded or scripted answers): always free.
FREE_PROVIDERS = ("replay", "scripted")
# Models on your own machine: free unless the pricing file lists them.
LOCAL_PROVIDERS = ("ollama",)
TIKTOKEN_ENCODING = "o200k_base"
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
TIKTOKEN_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
CHARS_PER_TOKEN = 4


class PricingError(ValueError):
    """A pricing file that cannot be read; the message names the file and the problem."""


@dataclass(frozen=True)
class Price:
    """One model's price in US dollars per 1,000 tokens."""

    prompt: float
    completion: float

    def of(self, tokens_in: int, tokens_out: int) -> float:
        """Return the cost in US dollars of so many input and output tokens."""
        return (tokens_in * self.prompt + tokens_out * self.completion) / 1000


@dataclass(frozen=True)
class Pricing:
    """Prices by model name, and where they were read from."""

    prices: Mapping[str, Price]
    source: str

    def price(self, spec: str) -> Price | None:
        """Return the price of ``provider:model`` (free for replay; None when not listed)."""
        provider, _, name = spec.partition(":")
        if provider in FREE_PROVIDERS:
            return Price(0.0, 0.0)
        listed = self.prices.get(name) or self.prices.get(spec)
        if listed is None and provider in LOCAL_PROVIDERS:
            return Price(0.0, 0.0)
        return listed


def _package_pricing() -> Path:
    # Package data of kgcheck itself (also what OpenLIT is given when tracing).
    return Path(str(resources.files("kgcheck") / "pricing.json"))


def load_pricing(path: str | Path | None = None) -> Pricing:
    """Read a pricing file (default: the shipped one); a malformed file is a PricingError."""
    file = Path(path) if path else _package_pricing()
    if not file.is_file():
        raise PricingError(f"pricing file {file} not found")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PricingError(f"pricing file {file}: not JSON ({exc})") from None
    chat = data.get("chat") if isinstance(data, dict) else None
    if not isinstance(chat, dict):
        raise PricingError(f'pricing file {file}: expected {{"chat": {{"<model>": '
                           '{"promptPrice": ..., "completionPrice": ...}}}} (US dollars per '
                           "1,000 tokens)")
    prices = {}
    for name, entry in chat.items():
        try:
            prices[name] = Price(float(entry["promptPrice"]), float(entry["completionPrice"]))
        except (TypeError, KeyError, ValueError):
            raise PricingError(f"pricing file {file}: model {name!r} needs numeric "
                               "promptPrice and completionPrice") from None
    return Pricing(prices, str(file))


@cache
def default_pricing() -> Pricing:
    """Return the shipped prices, read once."""
    return load_pricing()


def _usage_by_model(records: Iterable[Mapping[str, Any]],
                    models: Sequence[str]) -> dict[str, list[int]]:
    """Sum input and output tokens per model: votes per member, else the run's model."""
    usage: dict[str, list[int]] = {}
    for record in records:
        votes = [v for v in (record.get("details") or {}).get("votes") or []
                 if isinstance(v, dict) and v.get("model")]
        counted = [v for v in votes if v.get("tokens_in") is not None
                   or v.get("tokens_out") is not None]
        parts = counted or [{"model": models[0] if len(models) == 1 else record.get("model"),
                             "tokens_in": record.get("tokens_in"),
                             "tokens_out": record.get("tokens_out")}]
        for part in parts:
            if part.get("tokens_in") is None and part.get("tokens_out") is None:
                continue
            totals = usage.setdefault(str(part["model"]), [0, 0])
            totals[0] += int(part.get("tokens_in") or 0)
            totals[1] += int(part.get("tokens_out") or 0)
    return usage


def cost_summary(records: Iterable[Mapping[str, Any]], models: Sequence[str],
                 pricing: Pricing | None = None) -> dict[str, Any]:
    """Return the run's ``cost``: US dollars in total and per model, and unpriced models.

    ``cost_usd`` is None when no tokens were counted or some model has no price.
    """
    prices = pricing or default_pricing()
    by_model: dict[str, dict[str, Any]] = {}
    unpriced = []
    usage = _usage_by_model(records, models)
    for model in models:
        # Replayed answers count no tokens, and cost nothing.
        if model.partition(":")[0] in FREE_PROVIDERS:
            usage.setdefault(model, [0, 0])
    for model, (tokens_in, tokens_out) in usage.items():
        price = prices.price(model)
        if price is None:
            unpriced.append(model)
        by_model[model] = {"tokens_in": tokens_in, "tokens_out": tokens_out,
                           "usd": None if price is None else round(price.of(tokens_in,
                                                                            tokens_out), 6)}
    total = (None if unpriced or not by_model
             else round(sum(m["usd"] for m in by_model.values()), 6))
    return {"cost_usd": total,
            "cost": {"by_model": by_model, "unpriced": unpriced, "pricing": prices.source}}


# --- the estimate before a run ----------------------------------------------------------


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
        text, _ = first_prompt(ctx, fact)
        return CallPlan([text], ctx.max_attempts,
                        f"GIV: one call per fact, up to {ctx.max_attempts} when answers do not "
                        "comply")
    if isinstance(ctx, DKASCContext):
        text = fill_prompt(ctx.prompt, DKA_FIELDS, fact)
        return CallPlan([text] * ctx.samples, ctx.samples)
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

    def as_dict(self) -> dict[str, Any]:
        """Return the estimate as JSON-plain data."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def estimate(facts: Sequence[Fact], contexts: Mapping[str, Context],
             pricing: Pricing | None = None, *, done: Iterable[str] = ()) -> Estimate:
    """Estimate a run: every fact not ``done`` and not defective, for each model's Context.

    ``contexts`` maps each model that answers (consensus members: each of them) to its
    Context. Input tokens are the filled prompts' tokens; output tokens at most
    ``max_tokens`` per call at most ``max_calls`` times, so ``max_cost_usd`` bounds the
    cost from above (retrieved evidence and judges aside: see ``notes``).
    """
    prices = pricing or default_pricing()
    finished = set(done)
    todo = [f for f in facts if f.id not in finished]
    sendable = [f for f in todo if not f.defect]
    result = Estimate(facts=len(todo), skipped=len(todo) - len(sendable), calls=0, max_calls=0,
                      tokens_in=0, max_tokens_out=0, tokenizer=tokenizer_name())
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
