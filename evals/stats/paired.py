"""Paired comparison of two runs on the facts both checked.

McNemar's exact test asks whether the runs are right on different shares of the facts:
``b`` counts facts A got right and B wrong, ``c`` the reverse, and under the null
hypothesis each discordant fact is a fair coin (an exact binomial test of ``b`` out of
``b + c``, two-sided, as statsmodels' ``mcnemar(exact=True)``). A verdict is right when it
equals the gold label: NA (and NEI, or any other non-verdict) is not right. The paired
bootstrap (``kgcheck.evals.stats.bootstrap``) gives intervals of A - B.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgcheck.evals.stats.bootstrap import (
    CONFIDENCE,
    RESAMPLES,
    Interval,
    paired_intervals,
)
from kgcheck.evals.stats.errors import missing_extra
from kgcheck.evals.stats.runs import ScoredRun, read_scored_run, shared_facts, shared_truths

__all__ = ["Comparison", "compare_runs", "mcnemar_counts", "mcnemar_exact"]


def mcnemar_counts(gold: Sequence[str], pred_a: Sequence[str],
                   pred_b: Sequence[str]) -> tuple[int, int]:
    """Count ``(b, c)``: facts only A got right, and facts only B got right."""
    b = c = 0
    for g, x, y in zip(gold, pred_a, pred_b, strict=True):
        right_a, right_b = x == g, y == g
        b += right_a and not right_b
        c += right_b and not right_a
    return b, c


def mcnemar_exact(b: int, c: int) -> float:
    """Return McNemar's exact two-sided p-value for ``b`` and ``c`` discordant facts."""
    if b + c == 0:
        return 1.0  # no discordant fact: nothing speaks against equal accuracy
    try:
        # Imported on use: scipy is part of the optional `stats` extra.
        from scipy.stats import binomtest
    except ImportError:
        raise missing_extra("scipy") from None
    return float(binomtest(b, b + c, 0.5, alternative="two-sided").pvalue)


@dataclass
class Comparison:
    """What ``compare_runs`` found; ``as_json`` is the shape ``kgcheck compare`` writes."""

    run_a: str
    run_b: str
    facts: int
    b: int
    c: int
    p_value: float
    delta: dict[str, Interval]
    confidence: float
    resamples: int
    seed: int
    disagreements: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """Return ``{"facts", "mcnemar": {b, c, p_value}, "delta": {...}, "confidence"}``."""
        return {"facts": self.facts,
                "mcnemar": {"b": self.b, "c": self.c, "p_value": self.p_value},
                "delta": {k: v.as_dict() for k, v in self.delta.items()},
                "confidence": self.confidence}


def compare_labels(gold: Mapping[str, str], labels_a: Mapping[str, str],
                   labels_b: Mapping[str, str], facts: Sequence[str], *,
                   resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                   seed: int = 0) -> tuple[int, int, float, dict[str, Interval]]:
    """Run McNemar's test and the paired bootstrap on ``facts``; return b, c, p, deltas."""
    g = [gold[f] for f in facts]
    a = [labels_a[f] for f in facts]
    b_ = [labels_b[f] for f in facts]
    b, c = mcnemar_counts(g, a, b_)
    deltas = paired_intervals(g, a, b_, resamples=resamples, confidence=confidence, seed=seed)
    return b, c, mcnemar_exact(b, c), deltas


def _disagreements(a: ScoredRun, b: ScoredRun, facts: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    gold, labels_a, labels_b = shared_truths(a, b), a.labels(), b.labels()
    for fid in facts:
        if labels_a[fid] != labels_b[fid]:
            record = a.records[fid]
            rows.append({"fact_id": fid, "subject": record.get("subject"),
                         "predicate": record.get("predicate"), "object": record.get("object"),
                         "truth": gold[fid], "a": labels_a[fid], "b": labels_b[fid]})
    return rows


def compare_runs(run_a: str | Path, run_b: str | Path, *, resamples: int = RESAMPLES,
                 confidence: float = CONFIDENCE, seed: int = 0,
                 warn: Callable[[str], None] | None = None) -> Comparison:
    """Compare two run folders on the facts both checked with a truth (A - B).

    A fact's truth is a person's review decision, else its gold label (``kgcheck.data.truths``).
    """
    a, b = read_scored_run(run_a, warn), read_scored_run(run_b, warn)
    facts = shared_facts(a, b)
    n_b, n_c, p, deltas = compare_labels(shared_truths(a, b), a.labels(), b.labels(), facts,
                                         resamples=resamples, confidence=confidence, seed=seed)
    return Comparison(a.name, b.name, len(facts), n_b, n_c, p, deltas, confidence, resamples,
                      seed, _disagreements(a, b, facts))
