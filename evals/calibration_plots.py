"""Figures of a run's confidences (matplotlib, Agg backend, PNG and SVG files).

- ``reliability``: share of true facts against mean confidence per bin (the diagonal is a
  perfectly calibrated model), with the bins' sizes;
- ``precision_coverage``: the share of verdicts right among the most certain ones, against
  the share of facts kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # Files only: never open a window.

import matplotlib.pyplot as plt  # noqa: E402

from kgcheck.evals.accuracy.plots import _save  # noqa: E402
from kgcheck.evals.figure_text import plain_text  # noqa: E402


@plain_text
def plot_reliability(report: Mapping[str, Any], out_dir: Path, stem: str,
                     title: str = "") -> list[Path]:
    """Draw the reliability diagram of a ``calibration_report``."""
    fig, ax = plt.subplots(figsize=(4.2, 4.2))
    ax.plot([0, 1], [0, 1], color="tab:gray", linestyle="--", linewidth=1,
            label="calibrated")
    rows = report["reliability"]
    ax.plot([r["mean_confidence"] for r in rows], [r["fraction_true"] for r in rows],
            marker="o", color="tab:blue", label=f"verdicts (ECE {report['ece']:.3f})")
    for r in rows:
        ax.annotate(str(r["count"]), (r["mean_confidence"], r["fraction_true"]),
                    textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence that the fact is true",
           ylabel="share of facts that are true", title=title or "Reliability")
    ax.legend(loc="upper left", fontsize=8)
    return _save(fig, out_dir, stem)


@plain_text
def plot_precision_coverage(report: Mapping[str, Any], out_dir: Path, stem: str,
                            title: str = "") -> list[Path]:
    """Draw the precision-coverage curve of a ``calibration_report``."""
    fig, ax = plt.subplots(figsize=(5, 3.4))
    curve = report["precision_coverage"]
    ax.plot([c["coverage"] for c in curve], [c["precision"] for c in curve],
            color="tab:orange")
    ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="coverage (most certain verdicts first)",
           ylabel="share of verdicts right", title=title or "Precision-coverage")
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, stem)
