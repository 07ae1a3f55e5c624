"""Repeated runs: how stable each fact's verdict is, and how much each score moves.

A fact checked N times has N labels (T, F or NA). Its **flip rate** is the share of the
repeats that differ from its most common label (0: the same answer every time; at most
(N - 1) / N). Its **label entropy** is the Shannon entropy, in bits, of its label counts
(scipy.stats.entropy; 0 for one label, 1 for an even T/F split, log2 3 at most). Its
**majority** verdict is whichever of T and F it got more often (``kgcheck.graphs.votes``,
the consensus rule: NA labels take no side; an even split gives NA). Each score of each
repeat (accuracy, F1(T), F1(F), macro-F1) is summarised by its mean, standard deviation
(ddof 1), minimum and maximum across the repeats.

The run's means are taken over a histogram of the facts' label counts
(``StabilityTally``), which parts of a run (a sharded run's shards) merge exactly: the
same figures whichever way the facts were split.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kgcheck.evals.metrics import score_summary
from kgcheck.evals.stats.bootstrap import SCORES
from kgcheck.evals.stats.errors import missing_extra
from kgcheck.graphs.votes import TIE, tally

__all__ = ["LABEL_ORDER", "StabilityTally", "fact_stability", "majority_label",
           "repeat_summary", "repeats_section", "score_spread"]

LABEL_ORDER = ("T", "F", "NA")


def _label(value: str) -> str:
    return value if value in ("T", "F") else "NA"


def majority_label(labels: Sequence[str]) -> str:
    """Return the label of T and F given more often; NA on an even split."""
    decision = tally([_label(x) for x in labels])["decision"]
    return "NA" if decision == TIE else str(decision)


def fact_stability(labels: Sequence[str]) -> dict[str, Any]:
    """Return a fact's ``labels``, ``counts``, ``flip_rate``, ``entropy`` and ``majority``."""
    try:
        # Imported on use: scipy is part of the optional `stats` extra.
        from scipy.stats import entropy
    except ImportError:
        raise missing_extra("scipy") from None
    plain = [_label(x) for x in labels]
    counts = Counter(plain)
    vector = [counts.get(k, 0) for k in LABEL_ORDER]
    top = max(vector) if plain else 0
    return {"labels": plain, "counts": dict(zip(LABEL_ORDER, vector, strict=True)),
            "flip_rate": 1 - top / len(plain) if plain else None,
            "entropy": float(entropy(vector, base=2)) if plain else None,
            "majority": majority_label(plain)}


def score_spread(per_repeat: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Summarise each score over the repeats: values, mean, sd (ddof 1), min and max."""
    spread: dict[str, dict[str, Any]] = {}
    for key in SCORES:
        values = [s.get(key) for s in per_repeat]
        present = np.array([v for v in values if v is not None], dtype=float)
        spread[key] = {
            "values": values,
            "mean": float(present.mean()) if present.size else None,
            "sd": float(present.std(ddof=1)) if present.size > 1 else None,
            "min": float(present.min()) if present.size else None,
            "max": float(present.max()) if present.size else None,
        }
    return spread


class StabilityTally:
    """The facts' label counts over the repeats, as a histogram that parts of a run merge.

    Each fact adds its ``counts`` (T, F, NA) and their entropy; the means are sums over the
    histogram's entries in a fixed order, so a merged tally gives exactly the figures one
    tally of every fact gives. ``state`` and ``from_state`` carry it as JSON (with each
    entry's entropy, so that merging needs no scipy).
    """

    def __init__(self) -> None:
        self.facts = 0
        self.histogram: Counter[tuple[int, ...]] = Counter()
        self.entropies: dict[tuple[int, ...], float] = {}

    def add(self, stability: Mapping[str, Any]) -> None:
        """Take one fact's stability (``fact_stability``)."""
        self.facts += 1
        if stability["labels"]:
            key = tuple(int(stability["counts"][k]) for k in LABEL_ORDER)
            self.histogram[key] += 1
            self.entropies[key] = float(stability["entropy"])

    def merge(self, other: StabilityTally) -> None:
        """Take another part's facts into this tally."""
        self.facts += other.facts
        self.histogram.update(other.histogram)
        self.entropies.update(other.entropies)

    def state(self) -> dict[str, Any]:
        """Return the tally as JSON-plain data: ``[T, F, NA, facts, entropy]`` per entry."""
        return {"facts": self.facts,
                "histogram": [[*key, n, self.entropies[key]]
                              for key, n in sorted(self.histogram.items())]}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> StabilityTally:
        """Rebuild a tally from ``state``'s data."""
        tally = cls()
        tally.facts = int(state["facts"])
        for *key, n, entropy in state["histogram"]:
            counts = tuple(int(x) for x in key)
            tally.histogram[counts] = int(n)
            tally.entropies[counts] = float(entropy)
        return tally

    def figures(self) -> dict[str, Any]:
        """Return the facts, mean flip rate and entropy, and the facts that flipped."""
        entries = sorted(self.histogram.items())
        labelled = sum(n for _, n in entries)
        flips = [(1 - max(key) / sum(key), n) for key, n in entries]
        return {
            "facts": self.facts,
            "mean_flip_rate": (sum(f * n for f, n in flips) / labelled) if labelled else None,
            "mean_entropy": (sum(self.entropies[key] * n for key, n in entries) / labelled
                             if labelled else None),
            "flipped_facts": sum(n for f, n in flips if f > 0),
        }


def repeats_section(count: int, stability: StabilityTally,
                    per_repeat: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Return the summary's ``repeats`` section from the facts' tally and each repeat's scores.

    ``per_repeat`` holds each repeat's scores (``score_summary`` of its verdicts, or
    ``score_counts`` of its tally).
    """
    return {"count": count, **stability.figures(), "scores": score_spread(per_repeat)}


def repeat_summary(repeats: Sequence[Mapping[str, Mapping[str, Any]]]
                   ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Combine N repeats' verdict records (each by fact id) into per-fact and run figures.

    Returns each fact's stability (``fact_stability``) and the ``repeats`` section of the
    summary: the count, the mean flip rate and entropy, the share of facts that flipped at
    least once, and each score's spread across the repeats. A fact missing from a repeat
    (a stopped run) is scored over the repeats that have it.
    """
    facts = list(dict.fromkeys(fid for rep in repeats for fid in rep))
    per_fact = {fid: fact_stability([str(rep[fid].get("label", "NA")) for rep in repeats
                                     if fid in rep]) for fid in facts}
    stability = StabilityTally()
    for found in per_fact.values():
        stability.add(found)
    section = repeats_section(len(repeats), stability,
                              [score_summary(rep.values()) for rep in repeats])
    return per_fact, section
