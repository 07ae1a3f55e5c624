"""What explanations cost: extra tokens and seconds per fact of reasons, citations, corrections.

The model is real: ``local:smollm2-135m``, SmolLM2-135M served by kgcheck's own llama.cpp
server (xllamacpp, from PyPI wheels) on 127.0.0.1, with log-probabilities on. Over the
same ``--facts`` YAGO facts, one pass per configuration:

- DKA: plain (the study's prompt), ``reasons``, ``corrections``, both;
- RAG over the vendored sample corpus: plain, ``citations``, ``reasons`` + ``citations``
  (the verification step only: the sentence and question steps do not change).

Per configuration: mean prompt and answer tokens, mean model seconds per fact, the share of
verdicts with a confidence, a reason, a citation, a correction, and the answer problems; and
the extra over the plain pass as ratios measured in this one run (the machine is shared).
A 135M model follows the formats poorly: the figures are the cost of asking, not of a
model that answers well. Prints one JSON document.

    python benchmarks/bench_explained.py [--facts 10] [--max-tokens 96]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
from pathlib import Path
from typing import Any

from kgcheck.data.datasets import load_facts
from kgcheck.evals.metrics import problem_counts
from kgcheck.graphs.registry import get_strategy

ROOT = Path(__file__).resolve().parent.parent
MODEL = "local:smollm2-135m"

CORPUS = ROOT / "vendored" / "sample-corpus"
CONFIGS = {
    "dka": {"plain": {}, "reasons": {"reasons": True}, "corrections": {"corrections": True},
            "reasons+corrections": {"reasons": True, "corrections": True}},
    "rag": {"plain": {}, "citations": {"citations": True},
            "reasons+citations": {"reasons": True, "citations": True}},
}


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


async def _pass(strategy: str, facts: list, settings: dict[str, Any],
                max_tokens: int) -> dict[str, Any]:
    graph = get_strategy(strategy)
    compiled = graph.compile()
    extra = {"corpus": str(CORPUS), "index": "memory"} if strategy == "rag" else {}
    ctx = graph.make_context(model=MODEL, max_tokens=max_tokens, max_retries=0, timeout=120,
                             **extra, **settings)
    verdicts = []
    for fact in facts:
        out = await compiled.ainvoke({"fact": fact.as_input()}, context=ctx,
                                     config={"recursion_limit": 40})
        verdicts.append(out["verdict"])
    answered = [v for v in verdicts if v.get("tokens_in") is not None]
    return {
        "facts": len(verdicts),
        "tokens_in": _mean([v["tokens_in"] for v in answered]),
        "tokens_out": _mean([v["tokens_out"] for v in answered]),
        "seconds": _mean([v["seconds"] for v in answered]),
        "labels": {k: sum(v["label"] == k for v in verdicts) for k in ("T", "F", "NA", "NEI")},
        "with_confidence": sum(v.get("confidence") is not None for v in verdicts),
        "with_reason": sum(bool(v.get("rationale")) for v in verdicts),
        "with_citation": sum(bool(v.get("citations")) for v in verdicts),
        "with_correction": sum(bool(v.get("correction")) for v in verdicts),
        "answer_problems": problem_counts(verdicts),
    }


def _ratios(plain: dict[str, Any], other: dict[str, Any]) -> dict[str, float | None]:
    def ratio(key: str) -> float | None:
        return round(other[key] / plain[key], 2) if plain.get(key) and other.get(key) else None

    return {f"{k}_ratio": ratio(k) for k in ("tokens_in", "tokens_out", "seconds")}


async def main(n_facts: int, max_tokens: int) -> dict[str, Any]:
    yago = load_facts("yago")
    # RAG needs facts the sample corpus holds documents for.
    from kgcheck.retrievers.store import open_source

    covered = set(open_source(str(CORPUS)).fact_ids("YAGO"))
    facts = {"dka": yago[:n_facts], "rag": [f for f in yago if f.id in covered][:n_facts]}
    results: dict[str, Any] = {}
    for strategy, configs in CONFIGS.items():
        rows = {name: await _pass(strategy, facts[strategy], settings, max_tokens)
                for name, settings in configs.items()}
        for name, row in rows.items():
            if name != "plain":
                row.update(_ratios(rows["plain"], row))
        results[strategy] = rows
    return {"model": f"{MODEL} (SmolLM2-135M-Instruct Q4_1 on llama.cpp)",
            "max_tokens": max_tokens, "machine": platform.machine(),
            "cpus": __import__("os").cpu_count(), "results": results}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.facts, args.max_tokens)), indent=1))
