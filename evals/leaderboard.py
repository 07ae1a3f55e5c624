"""A sweep's leaderboard: one row per cell, as Markdown, JSON and plots.

Rows are ranked by macro-F1 (the mean F1 over the classes the gold labels hold; unlabelled
cells last). Accuracy counts an NA verdict as wrong, so a model cannot look better by
abstaining; the NA rate is reported beside it. Time is the model time per fact (for
replay: the study's recorded latency) and the cell's wall time; cost is the run's cost
where the run priced its tokens.
Given the cells' verdicts, rows also carry a significance ``group`` (letters; see
``kgcheck.evals.stats.groups``): cells sharing a letter are not significantly different in
accuracy (pairwise McNemar tests, Holm's correction), so the order within a group is not
evidence of anything. The plots put F1 against cost (or tokens, when no cell has a price)
and against time, with the Pareto front of the cells no other cell beats on both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from kgcheck.data.atomic import write_text_atomic  # noqa: E402
from kgcheck.evals.figure_text import plain_text  # noqa: E402
from kgcheck.evals.stats.errors import StatsInputError  # noqa: E402
from kgcheck.evals.stats.groups import significance_groups  # noqa: E402
from kgcheck.evals.study.plots import pareto_front, save_figure  # noqa: E402

LEADERBOARD_JSON = "leaderboard.json"
LEADERBOARD_MD = "tables.md"


def _macro(summary: dict[str, Any]) -> float | None:
    # The run's own macro-F1: the mean F1 over the classes its gold labels hold (a class the
    # labels lack has no F1, not 0); summaries written before it existed are averaged here.
    if "macro_f1" in summary:
        value = summary["macro_f1"]
        return None if value is None else float(value)
    scores = [s for s in (summary.get("f1_true"), summary.get("f1_false")) if s is not None]
    return sum(scores) / len(scores) if scores else None


def _accuracy(records: Sequence[dict[str, Any]]) -> float | None:
    scored = [r for r in records if r.get("gold") in ("T", "F")]
    if not scored:
        return None
    return sum(r["label"] == r["gold"] for r in scored) / len(scored)


def _cost(summary: dict[str, Any]) -> float | None:
    if isinstance(summary.get("cost_usd"), int | float):
        return float(summary["cost_usd"])
    cost = summary.get("cost")
    if isinstance(cost, int | float):
        return float(cost)
    if isinstance(cost, dict):
        for key in ("total", "usd", "total_usd"):
            if isinstance(cost.get(key), int | float):
                return float(cost[key])
    return None


def leaderboard_row(cell: dict[str, Any], summary: dict[str, Any],
                    records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Score one finished cell from its summary and verdict records."""
    n = summary.get("n") or 0
    model_seconds = summary.get("mean_model_seconds")
    return {
        **cell,
        "n": n,
        "f1_true": summary.get("f1_true"),
        "f1_false": summary.get("f1_false"),
        "macro_f1": _macro(summary),
        "accuracy": _accuracy(records),
        "na_rate": (summary.get("na") or 0) / n if n else None,
        "tokens_in": summary.get("tokens_in"),
        "tokens_out": summary.get("tokens_out"),
        "cost": _cost(summary),
        "model_seconds_per_fact": model_seconds,
        "wall_seconds": summary.get("seconds"),
        "cache_hits": (summary.get("cache") or {}).get("hits"),
    }


def ranked(rows: Sequence[dict[str, Any]],
           verdicts: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
           ) -> list[dict[str, Any]]:
    """Rank rows by macro-F1, best first; unlabelled cells last, in grid order.

    With ``verdicts`` (each cell's verdict records, by cell name), every scored row gets a
    significance ``group``; an unlabelled cell's group is None.
    """
    order = sorted(rows, key=lambda r: (r["macro_f1"] is None, -(r["macro_f1"] or 0.0)))
    if verdicts is None:
        return order
    return with_groups(order, verdicts)


def with_groups(rows: Sequence[dict[str, Any]],
                verdicts: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Add each ranked row's significance group (None without labels or statsmodels)."""
    systems = []
    for row in rows:
        records = verdicts.get(row["cell"]) or []
        gold = {str(r["fact_id"]): str(r["gold"]) for r in records if r.get("gold") in ("T", "F")}
        if row["macro_f1"] is not None and gold:
            labels = {str(r["fact_id"]): str(r.get("label", "NA")) for r in records}
            systems.append((row["cell"], gold, labels))
    try:
        found = significance_groups(systems).letters if len(systems) > 1 else {
            name: "a" for name, _, _ in systems}
    except StatsInputError:  # statsmodels missing: rank without groups
        found = {}
    return [{**row, "group": found.get(row["cell"])} for row in rows]


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def leaderboard_markdown(rows: Sequence[dict[str, Any]], title: str) -> str:
    """Render the ranked rows as a Markdown table."""
    grouped = any(r.get("group") for r in rows)
    head = ["#", *(["group"] if grouped else []), "cell", "strategy", "model", "prompt",
            "input", "n", "F1(T)", "F1(F)",
            "macro-F1", "accuracy", "NA rate", "tokens", "cost", "s/fact", "wall s"]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for i, r in enumerate(rows, 1):
        tokens = None if r["tokens_in"] is None else (r["tokens_in"] + (r["tokens_out"] or 0))
        lines.append("| " + " | ".join([
            str(i), *([r.get("group") or "-"] if grouped else []), r["cell"], r["strategy"],
            r["model"], r["prompt"], r["input"],
            str(r["n"]), _fmt(r["f1_true"]), _fmt(r["f1_false"]), _fmt(r["macro_f1"]),
            _fmt(r["accuracy"]), _fmt(r["na_rate"], 3), _fmt(tokens), _fmt(r["cost"], 4),
            _fmt(r["model_seconds_per_fact"], 3), _fmt(r["wall_seconds"], 1)]) + " |")
    lines += ["", "Accuracy counts NA as wrong; macro-F1 is the mean of F1(T) and F1(F); "
              "s/fact is model time per fact (replay: the study's recorded latency).", ""]
    if grouped:
        lines += ["Cells that share a group letter are not significantly different in "
                  "accuracy (pairwise McNemar exact tests on their shared facts, Holm's "
                  "correction, alpha 0.05).", ""]
    return "\n".join(lines)


@plain_text
def plot_leaderboard(rows: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Draw macro-F1 against cost (or tokens) and against time, with the Pareto fronts."""
    scored = [r for r in rows if r["macro_f1"] is not None]
    if not scored:
        return []
    priced = [r for r in scored if r["cost"] is not None]
    # Costs that are all 0 (replay, local models) say nothing: plot the tokens instead.
    if any(r["cost"] for r in priced):
        xs_cost, cost_label, cost_rows = [r["cost"] for r in priced], "cost, USD", priced
    else:
        cost_rows = [r for r in scored if r["tokens_in"] is not None]
        xs_cost = [r["tokens_in"] + (r["tokens_out"] or 0) for r in cost_rows]
        cost_label = "tokens (no prices known)" if not priced else "tokens (every cost is 0)"
    timed = [r for r in scored if r["model_seconds_per_fact"] is not None]
    panels = [(xs_cost, cost_rows, cost_label),
              ([r["model_seconds_per_fact"] for r in timed], timed, "model seconds per fact")]
    panels = [p for p in panels if p[1]]
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.6), squeeze=False)
    for ax, (xs, subset, label) in zip(axes[0], panels, strict=True):
        ys = [r["macro_f1"] for r in subset]
        ax.scatter(xs, ys, s=50, edgecolor="black", linewidth=0.5, zorder=3)
        for x, y, r in zip(xs, ys, subset, strict=True):
            ax.annotate(f"{r['strategy']} {r['model']}", (x, y), fontsize=6,
                        xytext=(3, 3), textcoords="offset points")
        front = pareto_front(list(zip(xs, ys, strict=True)))
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", color="grey",
                linestyle="--", linewidth=1, zorder=2, label="Pareto front")
        ax.set_xlabel(label)
        ax.set_ylabel("macro-F1")
        ax.set_ylim(0, 1)
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("sweep: macro-F1 against cost and time")
    fig.tight_layout()
    return save_figure(fig, out_dir, "leaderboard")


def write_leaderboard(rows: Sequence[dict[str, Any]], out_dir: Path, title: str,
                      *, plots: bool = True,
                      verdicts: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
                      ) -> list[Path]:
    """Write ``leaderboard.json``, ``tables.md`` and the plots; return the files written.

    ``verdicts`` (by cell name) adds the significance groups (see ``ranked``).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    ordered = ranked(rows, verdicts)
    json_path = out_dir / LEADERBOARD_JSON
    write_text_atomic(json_path, json.dumps(ordered, indent=1) + "\n")
    md_path = out_dir / LEADERBOARD_MD
    write_text_atomic(md_path, leaderboard_markdown(ordered, title))
    written = [json_path, md_path]
    if plots:
        written += plot_leaderboard(ordered, out_dir)
    return written
