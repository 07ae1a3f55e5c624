"""Bootstrap intervals for the tables of ``kgcheck report`` and ``kgcheck reproduce`` (--ci).

Each model of a dataset and method (and each consensus under its judge) gets accuracy,
F1(T), F1(F) and macro-F1 with percentile intervals over the facts the tables score for it.
The tables' point values stay as they are; the intervals are a section and records of
their own (``"table": "intervals"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kgcheck.evals.stats.bootstrap import (
    CONFIDENCE,
    RESAMPLES,
    SCORES,
    Interval,
    count_intervals,
    score_intervals,
)
from kgcheck.evals.stats.report import SCORE_NAMES, interval_cell
from kgcheck.evals.study.tables import MethodResults, consensus_verdicts

__all__ = ["INTERVALS", "interval_records", "intervals_markdown", "pair_intervals",
           "run_intervals"]

INTERVALS = "intervals"


def _record(res: MethodResults, system: str, labels: Mapping[str, str], *, resamples: int,
            confidence: float, seed: int) -> dict[str, Any] | None:
    facts = [f for f, g in res.gold.items() if g is not None and f in labels]
    if not facts:
        return None
    found = score_intervals([bool(res.gold[f]) for f in facts], [labels[f] for f in facts],
                            resamples=resamples, confidence=confidence, seed=seed)
    return {"table": INTERVALS, "dataset": res.dataset, "method": res.method,
            "source": res.source, "model": system, "n": len(facts),
            "confidence": confidence, **{k: found[k].as_dict() for k in SCORES}}


def interval_records(results: Sequence[MethodResults], *, resamples: int = RESAMPLES,
                     confidence: float = CONFIDENCE, seed: int = 0) -> list[dict[str, Any]]:
    """Return an intervals record per model and consensus of each dataset and method."""
    records = []
    for res in results:
        systems: list[tuple[str, Mapping[str, str]]] = [(m.model, m.labels) for m in res.members]
        systems += [(f"consensus, judge {c.judge}", consensus_verdicts(res, c))
                    for c in res.consensus]
        for system, labels in systems:
            record = _record(res, system, labels, resamples=resamples, confidence=confidence,
                             seed=seed)
            if record is not None:
                records.append(record)
    return records


def intervals_markdown(records: Sequence[Mapping[str, Any]]) -> str:
    """Render intervals records as a Markdown section (empty without records)."""
    if not records:
        return ""
    pct = f"{records[0]['confidence']:.0%}"
    sources = {r["source"] for r in records}
    lead = ["dataset", "method", *(["source"] if len(sources) > 1 else []), "model", "n"]
    lines = [f"## {pct} bootstrap intervals", "",
             "Percentile intervals over the facts scored for each model (resampled facts; "
             "NA counts as wrong in accuracy and as a miss in F1).", "",
             "| " + " | ".join([*lead, *(SCORE_NAMES[k] for k in SCORES)]) + " |",
             "| " + " | ".join("---" for _ in range(len(lead) + len(SCORES))) + " |"]
    for r in records:
        cells = [r["dataset"], r["method"], *([r["source"]] if len(sources) > 1 else []),
                 r["model"], f"{r['n']:,}"]
        cells += [interval_cell(_interval(r[k])) for k in SCORES]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _interval(value: Mapping[str, Any]) -> Interval:
    return Interval(value["estimate"], value["low"], value["high"])


def run_intervals(records: Sequence[Mapping[str, Any]], *, resamples: int = RESAMPLES,
                  confidence: float = CONFIDENCE, seed: int = 0) -> dict[str, Any] | None:
    """Return a run's ``intervals`` for summary.json from its verdict records (None: no gold)."""
    pairs: dict[tuple[str, str], int] = {}
    for r in records:
        if r.get("gold") in ("T", "F"):
            key = (r["gold"], str(r.get("label", "NA")))
            pairs[key] = pairs.get(key, 0) + 1
    return pair_intervals(pairs, resamples=resamples, confidence=confidence, seed=seed)


def pair_intervals(pairs: Mapping[tuple[str, str], int], *, resamples: int = RESAMPLES,
                   confidence: float = CONFIDENCE, seed: int = 0) -> dict[str, Any] | None:
    """Return a run's ``intervals`` from its counts of (gold, label) pairs (None: no gold).

    What ``run_intervals`` gives for the verdicts these counts are of: a sharded run's
    driver has the counts of its shards' tallies, not the verdicts.
    """
    scored = {k: n for k, n in pairs.items() if k[0] in ("T", "F") and n}
    if not scored:
        return None
    found = count_intervals(scored, resamples=resamples, confidence=confidence, seed=seed)
    return {"confidence": confidence, "resamples": resamples, "seed": seed,
            "n": sum(scored.values()), **{k: found[k].as_dict() for k in SCORES}}
