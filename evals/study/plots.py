"""The study's figures, as PNG and SVG files (matplotlib with the Agg backend, no display).

- ``f1_ranked_<dataset>``: F1(T) and F1(F) of every model, method and consensus, ranked,
  with the score of a fair coin (figure 2 of the study);
- ``time_f1_<dataset>``: mean response time against F1(T) and F1(F) with the Pareto
  frontier (figure 3);
- ``upset_<dataset>_<method>``: intersections of the models' correct predictions
  (figure 4), an UpSet plot of which models got each fact right.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # Files only: never open a window, also on a machine with a display.

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from kgcheck.data.atomic import atomic_output  # noqa: E402
from kgcheck.evals.figure_text import plain_text  # noqa: E402
from kgcheck.evals.metrics import random_guess_f1  # noqa: E402
from kgcheck.evals.study.drawable import (  # noqa: E402
    f1_ranked_rows,
    time_f1_points,
    upset_drawable,
    upset_members,
)
from kgcheck.evals.study.tables import MethodResults, method_rank  # noqa: E402

FORMATS = ("png", "svg")
DPI = 150
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


def _save(fig: plt.Figure, out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in FORMATS:
        path = out_dir / f"{stem}.{fmt}"
        # Light PNG compression: encoding at the default level costs more than drawing.
        extra: dict[str, Any] = {"pil_kwargs": {"compress_level": 1}} if fmt == "png" else {}
        with atomic_output(path) as handle:
            fig.savefig(handle, format=fmt, dpi=DPI, bbox_inches="tight", **extra)
        paths.append(path)
    plt.close(fig)
    return paths


def save_figure(fig: plt.Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write a figure as ``<stem>.png`` and ``<stem>.svg`` in ``out_dir``; close it."""
    return _save(fig, out_dir, stem)


def _method_colours(methods: Sequence[str]) -> dict[str, Any]:
    palette = matplotlib.color_sequences["tab10"]  # the tab10 colormap's ten colours
    ordered = sorted(set(methods), key=method_rank)
    return {m: palette[i % len(palette)] for i, m in enumerate(ordered)}


def _bar_label(record: dict[str, Any]) -> str:
    who = record.get("model") or f"consensus, {record['judge']}"
    return f"{record['method']} · {who}"


@plain_text
def plot_f1_ranked(records: Sequence[dict[str, Any]], dataset: str, true_share: float | None,
                   out_dir: Path) -> list[Path]:
    """Figure 2: ranked F1(T) and F1(F) bars for one dataset, with the random-guess line."""
    fig = f1_ranked_figure(records, dataset, true_share)
    return [] if fig is None else _save(fig, out_dir, f"f1_ranked_{_slug(dataset)}")


@plain_text
def f1_ranked_figure(records: Sequence[dict[str, Any]], dataset: str,
                     true_share: float | None) -> plt.Figure | None:
    """Draw figure 2 (None without scores); every F1 axis runs from 0 to 1."""
    rows = f1_ranked_rows(records, dataset)
    if not rows:
        return None
    colours = _method_colours([r["method"] for r in rows])
    height = max(3.0, 0.32 * len(rows) + 1.4)
    fig, axes = plt.subplots(1, 2, figsize=(13, height))
    guess = random_guess_f1(true_share) if true_share is not None else None
    panels = ((axes[0], "f1_true", "F1(T)", 0), (axes[1], "f1_false", "F1(F)", 1))
    for ax, key, title, idx in panels:
        ranked = sorted((r for r in rows if r[key] is not None), key=lambda r: r[key])
        if not ranked:
            ax.set_axis_off()
            ax.set_title(f"{dataset}: {title}")
            ax.text(0.5, 0.5, f"no {title}: the gold labels lack this class", ha="center",
                    va="center", transform=ax.transAxes)
            continue
        ys = range(len(ranked))
        # A fixed 0-1 axis: a zoomed one makes 0.01 look like a large difference.
        upper = 1.0
        bars = ax.barh(list(ys), [r[key] for r in ranked],
                       color=[colours[r["method"]] for r in ranked],
                       hatch=None, edgecolor="white")
        for bar, r in zip(bars, ranked, strict=True):
            if r["table"] == "consensus":
                bar.set_hatch("//")
                bar.set_edgecolor("black")
            # Values near 1 are written inside the bar's end, so they stay on the axis.
            inside = bar.get_width() > 0.88
            ax.text(bar.get_width() + (-0.01 if inside else 0.01),
                    bar.get_y() + bar.get_height() / 2, f"{r[key]:.3f}", va="center",
                    ha="right" if inside else "left", fontsize=8,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8})
        ax.set_yticks(list(ys), [_bar_label(r) for r in ranked], fontsize=8)
        ax.set_xlim(0, upper)
        ax.set_xlabel(title)
        ax.set_title(f"{dataset}: {title}, ranked")
        if guess is not None:
            ax.axvline(guess[idx], color="black", linestyle="--", linewidth=1)
    handles: list[Artist] = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    labels = list(colours)
    if any(r["table"] == "consensus" for r in rows):
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black",
                                     hatch="//"))
        labels.append("consensus with a judge")
    if guess is not None:
        handles.append(Line2D([0], [0], color="black", linestyle="--"))
        labels.append(f"random guess (true share {true_share:.2f})")
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8,
               bbox_to_anchor=(0.5, -0.02), frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Keep the points no other point beats on both time (lower) and score (higher)."""
    front: list[tuple[float, float]] = []
    best = float("-inf")
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    return front


@plain_text
def plot_time_f1(records: Sequence[dict[str, Any]], dataset: str, out_dir: Path) -> list[Path]:
    """Figure 3: mean response time against F1(T) and F1(F), with the Pareto frontier."""
    fig = time_f1_figure(records, dataset)
    return [] if fig is None else _save(fig, out_dir, f"time_f1_{_slug(dataset)}")


@plain_text
def time_f1_figure(records: Sequence[dict[str, Any]], dataset: str) -> plt.Figure | None:
    """Draw figure 3 (None without timed scores); time starts at 0 and F1 runs 0 to 1."""
    times, scores, keys = time_f1_points(records, dataset)
    if not keys:
        return None
    colours = _method_colours([k[0] for k in keys])
    models = list(dict.fromkeys(k[1] for k in sorted(keys, key=lambda k: k[1])))
    markers = {m: MARKERS[i % len(MARKERS)] for i, m in enumerate(models)}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    for ax, key, title in ((axes[0], "f1_true", "F1(T)"), (axes[1], "f1_false", "F1(F)")):
        scored = [k for k in keys if scores[k][key] is not None]
        if not scored:
            ax.set_axis_off()
            ax.text(0.5, 0.5, f"no {title}: the gold labels lack this class", ha="center",
                    va="center", transform=ax.transAxes)
            continue
        for method, model in scored:
            # Not clipped: a marker at F1 0 or 1 shows whole on the fixed axis.
            ax.scatter(times[(method, model)], scores[(method, model)][key], s=60,
                       color=colours[method], marker=markers[model], edgecolor="black",
                       linewidth=0.5, zorder=3, clip_on=False)
        front = pareto_front([(times[k], scores[k][key]) for k in scored])
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", color="grey",
                linestyle="--", linewidth=1, zorder=2)
        ax.set_xlabel("mean response time, s (IQR-filtered)")
        ax.set_ylabel(title)
        ax.set_title(f"{dataset}: time vs {title}")
        ax.grid(alpha=0.3)
        # Fixed scales: from 0 s (0.0473 s against 0.0478 s is no large difference) and F1
        # from 0 to 1, as in the ranked bars.
        ax.set_ylim(0, 1)
        ax.set_xlim(0, max(times[k] for k in keys) * 1.08 or 1.0)
    handles = [Line2D([0], [0], marker="s", linestyle="", color=c, markersize=8)
               for c in colours.values()]
    handles += [Line2D([0], [0], marker=markers[m], linestyle="", color="white",
                       markeredgecolor="black", markersize=8) for m in models]
    handles.append(Line2D([0], [0], color="grey", linestyle="--"))
    labels = list(colours) + models + ["Pareto frontier"]
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
               frameon=False)
    fig.tight_layout()
    return fig


def correct_matrix(results: Sequence[MethodResults]) -> pd.DataFrame:
    """Which model got each fact right: one boolean column per model, one row per fact.

    Only labelled facts that every model answered are kept, so each row compares like
    with like (``upset_members``).
    """
    members, facts = upset_members(results)
    gold = results[0].gold if results else {}
    truth = {f: "T" if gold[f] else "F" for f in facts}
    return pd.DataFrame({name: [m.labels[f] == truth[f] for f in facts]
                         for name, m in members.items()}, index=facts)


def intersections(matrix: pd.DataFrame) -> list[tuple[tuple[bool, ...], int]]:
    """Count the facts per combination of models that got them right, largest first."""
    counts: dict[tuple[bool, ...], int] = {}
    for row in matrix.itertuples(index=False):
        key = tuple(bool(v) for v in row)
        counts[key] = counts.get(key, 0) + 1
    # Ties in size go to the combination with more models, then a stable order.
    return sorted(counts.items(), key=lambda kv: (-kv[1], -sum(kv[0]), kv[0]))


@plain_text
def plot_upset(results: Sequence[MethodResults], out_dir: Path) -> list[Path]:
    """Figure 4: an UpSet plot of which models got each fact right, for one method."""
    fig = upset_figure(results)
    if fig is None:
        return []
    dataset, method = results[0].dataset, results[0].method
    return _save(fig, out_dir, f"upset_{_slug(dataset)}_{_slug(method)}")


@plain_text
def upset_figure(results: Sequence[MethodResults]) -> plt.Figure | None:
    """Draw figure 4 (None with fewer than two models or no fact they all answered).

    Drawn with matplotlib directly: upsetplot 0.9 fails under pandas 3 (its dot colours
    come out NaN), and the layout is simple: intersection sizes on top, a dot matrix of
    the models in each intersection below, and each model's total on the left.
    """
    if not upset_drawable(results):
        return None
    matrix = correct_matrix(results)
    dataset, method = results[0].dataset, results[0].method
    combos = intersections(matrix)
    models = list(matrix.columns)
    totals = matrix.sum(axis=0).tolist()
    n_cols, n_rows = len(combos), len(models)
    # Columns: each model's total, its name, the dot matrix; widths in inches.
    name_width = 0.3 + 0.075 * max(len(m) for m in models)
    widths = (1.4, name_width, max(3.5, 0.32 * n_cols))
    heights = (2.6, 0.38 * n_rows + 0.2)
    fig = plt.figure(figsize=(sum(widths) + 0.6, sum(heights) + 0.9))
    grid = fig.add_gridspec(2, 3, width_ratios=widths, height_ratios=heights, wspace=0.0,
                            hspace=0.05)
    ax_bars = fig.add_subplot(grid[0, 2])
    ax_dots = fig.add_subplot(grid[1, 2], sharex=ax_bars)
    ax_totals = fig.add_subplot(grid[1, 0], sharey=ax_dots)
    ax_names = fig.add_subplot(grid[1, 1], sharey=ax_dots)
    xs = list(range(n_cols))
    sizes = [count for _, count in combos]
    ax_bars.bar(xs, sizes, color="#333333", width=0.6)
    for x, size in zip(xs, sizes, strict=True):
        ax_bars.text(x, size + max(sizes) * 0.01, f"{size:,}", ha="center", va="bottom",
                     fontsize=7, rotation=90 if size >= 100_000 else 0)
    ax_bars.set_ylabel("facts")
    ax_bars.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_bars.set_ylim(0, max(sizes) * 1.25)
    ax_bars.tick_params(axis="x", bottom=False, labelbottom=False)
    for side in ("top", "right"):
        ax_bars.spines[side].set_visible(False)
    ys = list(range(n_rows))
    for x, (key, _) in enumerate(combos):
        ax_dots.scatter([x] * n_rows, ys, s=40, color=["#333333" if k else "#dddddd" for k in key],
                        zorder=3)
        chosen = [y for y, k in zip(ys, key, strict=True) if k]
        if len(chosen) > 1:
            ax_dots.plot([x, x], [min(chosen), max(chosen)], color="#333333", linewidth=1.5)
    ax_dots.set_xlim(-0.6, n_cols - 0.4)
    ax_dots.set_ylim(-0.6, n_rows - 0.4)
    ax_dots.tick_params(axis="y", left=False, labelleft=False)
    ax_dots.set_xticks([])
    for side in ("top", "right", "left", "bottom"):
        ax_dots.spines[side].set_visible(False)
    ax_totals.barh(ys, totals, color="#777777", height=0.5)
    ax_totals.invert_xaxis()
    ax_totals.tick_params(axis="y", left=False, labelleft=False)
    ax_totals.set_xlabel("correct, per model", fontsize=8)
    ax_totals.tick_params(axis="x", labelsize=7)
    for side in ("top", "left", "right"):
        ax_totals.spines[side].set_visible(False)
    ax_names.axis("off")
    for y, model in zip(ys, models, strict=True):
        ax_names.text(0.5, y, model, ha="center", va="center", fontsize=8)
    fig.suptitle(f"{dataset} {method}: which models got each fact right ({len(matrix):,} "
                 "facts; a column with no dark dot is nobody)", fontsize=10)
    return fig


def plot_all(results: Sequence[MethodResults], records: Sequence[dict[str, Any]],
             out_dir: Path) -> list[Path]:
    """Every figure for every dataset (and method, for the UpSet plots)."""
    paths: list[Path] = []
    datasets = list(dict.fromkeys(r.dataset for r in results))
    for dataset in datasets:
        mine = [r for r in results if r.dataset == dataset]
        share = mine[0].true_share() if mine else None
        paths += plot_f1_ranked(records, dataset, share, out_dir)
        paths += plot_time_f1(records, dataset, out_dir)
        for method in sorted({r.method for r in mine}, key=method_rank):
            paths += plot_upset([r for r in mine if r.method == method], out_dir)
    return paths
