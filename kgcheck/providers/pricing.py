"""Money from tokens: prices per model and the cost of a run.

Prices come from ``kgcheck/providers/pricing.json`` (OpenLIT's format: US dollars per 1,000 tokens,
``promptPrice`` for input and ``completionPrice`` for output, under ``chat``), or from a
file of the same shape given with ``--pricing FILE``. A model is priced by its name without
the provider (``openai:gpt-4o-mini`` -> ``gpt-4o-mini``, ``azure:<deployment>`` -> the
deployment's name); replayed answers cost nothing (no model is called), nor do Ollama and
``local:`` (llama.cpp) models the file does not list (they run on your machine); any other
model the file does not list has no cost (None, shown as "-") and is named in ``unpriced``.

This is the one home of prices: the runner's summary, the dry run (``kgcheck.runs.dry_run``),
the accuracy audit's cost and OpenLIT's traces (``PRICING_FILE``) all read them here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from kgcheck.data import safe_json

# No model is called (recorded or scripted answers): always free.
FREE_PROVIDERS = ("replay", "scripted")
# Models on your own machine: free unless the pricing file lists them.
LOCAL_PROVIDERS = ("ollama", "local")


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


# The shipped prices (package data), also what OpenLIT is given when tracing.
PRICING_FILE = Path(str(resources.files("kgcheck.providers") / "pricing.json"))


def load_pricing(path: str | Path | None = None) -> Pricing:
    """Read a pricing file (default: the shipped one); a malformed file is a PricingError."""
    file = Path(path) if path else PRICING_FILE
    if not file.is_file():
        raise PricingError(f"pricing file {file} not found")
    try:
        data = safe_json.parse(file.read_text(encoding="utf-8"))
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


def add_usage(usage: dict[str, list[int]], record: Mapping[str, Any],
              models: Sequence[str]) -> None:
    """Add one record's input and output tokens to ``usage`` (per member vote, else model)."""
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


def _usage_by_model(records: Iterable[Mapping[str, Any]],
                    models: Sequence[str]) -> dict[str, list[int]]:
    """Sum input and output tokens per model: votes per member, else the run's model."""
    usage: dict[str, list[int]] = {}
    for record in records:
        add_usage(usage, record, models)
    return usage


def cost_summary(records: Iterable[Mapping[str, Any]], models: Sequence[str],
                 pricing: Pricing | None = None) -> dict[str, Any]:
    """Return the run's ``cost``: US dollars in total and per model, and unpriced models.

    ``cost_usd`` is None when no tokens were counted or some model has no price.
    """
    return cost_of_usage(_usage_by_model(records, models), models, pricing)


def cost_of_usage(usage: Mapping[str, list[int]], models: Sequence[str],
                  pricing: Pricing | None = None) -> dict[str, Any]:
    """Price token usage per model (from ``add_usage``) as ``cost_summary`` reports it."""
    prices = pricing or default_pricing()
    by_model: dict[str, dict[str, Any]] = {}
    unpriced = []
    usage = {model: list(totals) for model, totals in usage.items()}
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
