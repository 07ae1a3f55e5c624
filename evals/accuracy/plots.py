"""Figures of an accuracy estimate (matplotlib, Agg backend, PNG and SVG files).

- ``estimate_intervals``: the three estimators' intervals, with the true accuracy when known;
- ``estimate_width``: the interval width of ``human`` and ``ppi`` against the number of
  human labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # Files only: never open a window.

import matplotlib.pyplot as plt  # noqa: E402

from kgcheck.data.atomic import atomic_output  # noqa: E402
from kgcheck.evals.figure_text import plain_text  # noqa: E402

FORMATS = ("png", "svg")
DPI = 150
COLORS = {"llm": "tab:gray", "human": "tab:blue", "ppi": "tab:orange"}


def _save(fig: Any, out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in FORMATS:
        path = out_dir / f"{stem}.{fmt}"
        with atomic_output(path) as handle:
            fig.savefig(handle, format=fmt, dpi=DPI, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths


@plain_text
def plot_intervals(estimates: Sequence[Mapping[str, Any]], out_dir: Path, *,
                   truth: float | None = None, title: str = "") -> list[Path]:
    """Draw each estimator's point and interval, and the true accuracy when known."""
    fig, ax = plt.subplots(figsize=(6, 2.6))
    for row, item in enumerate(estimates):
        name = item["estimator"]
        spread = [[item["accuracy"] - item["ci_low"]], [item["ci_high"] - item["accuracy"]]]
        ax.errorbar(item["accuracy"], row, xerr=spread,
                    fmt="o", capsize=4, color=COLORS.get(name, "black"))
    if truth is not None:
        ax.axvline(truth, color="tab:green", linestyle="--", label=f"true accuracy {truth:.3f}")
        ax.legend(loc="best", fontsize=8)
    ax.set_yticks(range(len(estimates)))
    ax.set_yticklabels([f"{e['estimator']} (n={e['n_labeled']})" if e["n_labeled"] else
                        f"{e['estimator']} (verdicts)" for e in estimates])
    ax.set_xlabel("accuracy (share of true facts)")
    ax.set_title(title, fontsize=9)
    ax.invert_yaxis()
    return _save(fig, out_dir, "estimate_intervals")


@plain_text
def plot_width(curve: Sequence[Mapping[str, Any]], out_dir: Path, *,
               title: str = "") -> list[Path]:
    """Draw the width of the human and ppi intervals against the number of labels."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    sizes = [row["n_labeled"] for row in curve]
    for name in ("human", "ppi"):
        ax.plot(sizes, [row[name] for row in curve], marker="o", label=name,
                color=COLORS[name])
    ax.set_xlabel("human labels")
    ax.set_ylabel("interval width")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "estimate_width")
