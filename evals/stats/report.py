"""Render comparisons and intervals as text for the terminal and Markdown tables."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from kgcheck.evals.metrics import macro_f1
from kgcheck.evals.stats.bootstrap import SCORES, Interval
from kgcheck.evals.stats.errors import StatsInputError
from kgcheck.evals.stats.groups import ALPHA, significance_groups
from kgcheck.evals.stats.paired import Comparison

__all__ = ["comparison_text", "disagreements_csv", "groups_markdown", "interval_cell"]

SCORE_NAMES = {"accuracy": "accuracy", "f1_true": "F1(T)", "f1_false": "F1(F)",
               "macro_f1": "macro-F1"}
DISAGREEMENT_COLUMNS = ("fact_id", "subject", "predicate", "object", "truth", "a", "b")


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
             f"{result.facts:,} shared facts with a truth (review decision, else gold label)",
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
        lines.append(f"  {row['fact_id']}: A {row['a']}, B {row['b']}, truth {row['truth']}"
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


def groups_markdown(systems: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
                    *, alpha: float = ALPHA) -> str:
    """Markdown ranking systems ``(name, verdict records)`` by macro-F1 with their groups.

    Empty with fewer than two scored systems, or when statsmodels is missing.
    """
    scored = []
    for name, records in systems:
        gold = {str(r["fact_id"]): str(r["gold"]) for r in records if r.get("gold") in ("T", "F")}
        if not gold:
            continue
        labels = {str(r["fact_id"]): str(r.get("label", "NA")) for r in records}
        facts = list(gold)
        macro = macro_f1([gold[f] == "T" for f in facts], [labels[f] for f in facts])
        scored.append((macro if macro is not None else -1.0, name, gold, labels))
    if len(scored) < 2:
        return ""
    scored.sort(key=lambda s: -s[0])
    try:
        groups = significance_groups([(n, g, lab) for _, n, g, lab in scored], alpha=alpha)
    except StatsInputError:
        return ""
    lines = ["## Significance groups", "",
             "Runs that share a letter are not significantly different in accuracy (McNemar's "
             f"exact test on the facts both checked, Holm's correction, alpha {alpha}).", "",
             "| # | group | run | macro-F1 |", "| --- | --- | --- | --- |"]
    for i, (macro, name, _, _) in enumerate(scored, 1):
        lines.append(f"| {i} | {groups.letters[name]} | {name} | "
                     f"{'-' if macro < 0 else f'{macro:.2f}'} |")
    lines += ["", "| run A | run B | facts | only A right | only B right | p | p (Holm) |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for pair in groups.pairs:
        p = "-" if pair.p_value is None else f"{pair.p_value:.3g}"
        holm = "-" if pair.p_holm is None else f"{pair.p_holm:.3g}"
        lines.append(f"| {pair.a} | {pair.b} | {pair.facts:,} | {pair.b_only} | "
                     f"{pair.c_only} | {p} | {holm} |")
    return "\n".join(lines)
