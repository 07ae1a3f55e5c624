"""Calibration of a run's confidences: are verdicts given with confidence p right p of the time.

The bins are scikit-learn's ``calibration_curve`` (uniform bins over [0, 1]); the figure is
a reliability diagram with the diagonal of perfect calibration and each bin's count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # Files only: never open a window.

import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["calibration_figure", "reliability"]


class CalibrationInputError(ValueError):
    """Confidences and outcomes that cannot be binned."""


def reliability(confidence: Sequence[float], correct: Sequence[bool],
                bins: int = 10) -> dict[str, Any]:
    """Bin confidences: mean confidence, share right and count per non-empty bin, and the ECE."""
    if len(confidence) != len(correct):
        raise CalibrationInputError("confidence and correct differ in length")
    if not confidence:
        raise CalibrationInputError("no verdict with a confidence and a gold label")
    import numpy as np
    from sklearn.calibration import calibration_curve

    y = np.asarray(correct, dtype=int)
    p = np.asarray(confidence, dtype=float)
    right, mean = calibration_curve(y, p, n_bins=bins, strategy="uniform")
    edges = np.linspace(0.0, 1.0, bins + 1)
    # The same bin of each confidence as calibration_curve's (its searchsorted, side left).
    which = np.searchsorted(edges[1:-1], p)
    counts = [int(c) for c in np.bincount(which, minlength=bins) if c]
    ece = float(sum(n * abs(r - m) for n, r, m in zip(counts, right, mean, strict=True))
                / len(p))
    return {"mean_confidence": mean.tolist(), "share_right": right.tolist(), "count": counts,
            "ece": ece, "n": len(p)}


def calibration_figure(confidence: Sequence[float], correct: Sequence[bool], title: str,
                       bins: int = 10) -> plt.Figure:
    """Draw the reliability diagram of one run's confidences."""
    stats = reliability(confidence, correct, bins)
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="calibrated")
    ax.plot(stats["mean_confidence"], stats["share_right"], marker="o", color="#1f77b4",
            label=f"this run (ECE {stats['ece']:.3f}, n={stats['n']:,})")
    for x, y, n in zip(stats["mean_confidence"], stats["share_right"], stats["count"],
                       strict=True):
        ax.annotate(f"{n:,}", (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("share of verdicts right")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    fig.tight_layout()
    return fig
