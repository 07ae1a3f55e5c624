"""Render comparisons and intervals as text for the terminal and Markdown tables."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from kgcheck.evals.stats.bootstrap import SCORES, Interval
from kgcheck.evals.stats.paired import Comparison

__all__ = ["comparison_text", "disagreements_csv", "interval_cell"]

SCORE_NAMES = {"accuracy": "accuracy", "f1_true": "F1(T)", "f1_false": "F1(F)",
               "macro_f1": "macro-F1"}
DISAGREEMENT_COLUMNS = ("fact_id", "subject", "predicate", "object", "gold", "a", "b")


def interval_cell(value: Interval, *, signed: bool = False) -> str:
    """Format ``estimate [low, high]`` ("-" when undefined)."""
    if value.estimate is None:
        return "-"
    fmt = "+.3f" if signed else ".3f"
    if value.low is None or value.high is None:
        return f"{value.estimate:{fmt}}"
    return f"{value.estimate:{fmt}} [{value.low:{fmt}}, {value.high:{fmt}}]"


def comparison_text(result: Comparison, *, shown: int = 20) -> str:
    """Describe a comparison in a few lines: test, intervals, the first disagreements."""
    pct = f"{result.confidence:.0%}"
    lines = [f"A: {result.run_a}", f"B: {result.run_b}",
             f"{result.facts:,} shared facts with gold labels",
             f"McNemar exact test: only A right {result.b}, only B right {result.c}, "
             f"p = {result.p_value:.4g}",
             f"A - B with {pct} paired bootstrap intervals ({result.resamples:,} resamples, "
             f"seed {result.seed}):"]
    lines += [f"  {SCORE_NAMES[k]:<9} {interval_cell(result.delta[k], signed=True)}"
              for k in SCORES]
    lines.append(f"{len(result.disagreements):,} facts answered differently")
    for row in result.disagreements[:shown]:
        triple = " ".join(str(row[k]) for k in ("subject", "predicate", "object")
                          if row.get(k) is not None)
        lines.append(f"  {row['fact_id']}: A {row['a']}, B {row['b']}, gold {row['gold']}"
                     + (f"  ({triple})" if triple else ""))
    if len(result.disagreements) > shown:
        lines.append(f"  ... {len(result.disagreements) - shown:,} more (--disagreements FILE)")
    return "\n".join(lines)


def disagreements_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """Render disagreement rows as CSV text (header included)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=DISAGREEMENT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in DISAGREEMENT_COLUMNS})
    return out.getvalue()
