"""How well verdicts' confidences rank and calibrate: AUROC, AUPRC, Brier, ECE, curves.

A verdict's ``confidence`` is the probability that its fact is true (``kgcheck.graphs.
explain``); a truth comes from a person's review (``labels.csv``, T or F) or, failing that,
from the gold label. Only facts with both count. The figures:

- ``auroc`` and ``auprc`` (average precision, true facts as the positive class) and the
  ``brier`` score: scikit-learn's;
- ``ece``, the expected calibration error over ``bins`` equal-width bins of the confidence:
  the bins' mean |share true - mean confidence|, weighted by their sizes; the bins are
  those of ``sklearn.calibration.calibration_curve(strategy="uniform")``, whose points the
  ``reliability`` rows hold (with each bin's count);
- ``precision_coverage``: the verdicts ordered from most to least certain (certainty
  ``max(p, 1 - p)``); at each coverage (share of facts kept, the most certain first) the
  share of kept verdicts that are right (``p >= 0.5`` reads as T).

``review_threshold`` picks the certainty below which the least certain share of verdicts go
to a person (``kgcheck review --order uncertainty`` puts them first).

The verdicts' own side, for the explorer: ``reliability`` bins confidences in a verdict
against whether it was right (scikit-learn's ``calibration_curve`` bins) and
``calibration_figure`` draws them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kgcheck.evals.figure_text import plain_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["calibration_figure", "calibration_report", "certainty", "confidence_sources",
           "expected_calibration_error", "precision_coverage", "reliability",
           "reliability_rows", "review_threshold", "run_calibration", "summary_calibration",
           "summary_calibration_of",
           "truth_pairs", "verdict_confidence"]


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


@plain_text
def calibration_figure(confidence: Sequence[float], correct: Sequence[bool], title: str,
                       bins: int = 10) -> Figure:
    """Draw the reliability diagram of one run's confidences."""
    # Imported here: every run summarizes calibration, and pyplot costs a run's start 0.4 s.
    import matplotlib

    matplotlib.use("Agg")  # Files only: never open a window.
    import matplotlib.pyplot as plt

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


# --- confidence that a fact is true, against truths --------------------------------

DEFAULT_BINS = 10
TRUTH = {"T": 1, "F": 0}


def truth_pairs(records: Iterable[Mapping[str, Any]],
                truths: Mapping[str, str] | None = None,
                ) -> tuple[list[int], list[float]]:
    """Return (truth, confidence) for the verdicts that have both.

    ``truths`` are the facts' truths (``kgcheck.data.truths.run_truths``: a person's review
    decision, else the gold label); None reads each record's gold label alone.
    """
    truth: list[int] = []
    scores: list[float] = []
    for record in records:
        confidence = record.get("confidence")
        if confidence is None:
            continue
        mark = (str(record.get("gold") or "") if truths is None
                else truths.get(str(record.get("fact_id"))) or "")
        if mark in TRUTH:
            truth.append(TRUTH[mark])
            scores.append(float(confidence))
    return truth, scores


def bin_ids(scores: np.ndarray, bins: int) -> np.ndarray:
    """Put each score into one of ``bins`` equal-width bins of [0, 1] (scikit-learn's rule)."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    return np.searchsorted(edges[1:-1], scores)


def reliability_rows(truth: Sequence[int], scores: Sequence[float],
                bins: int = DEFAULT_BINS) -> list[dict[str, Any]]:
    """Return the non-empty bins: range, count, mean confidence and share true."""
    y = np.asarray(truth, dtype=float)
    p = np.asarray(scores, dtype=float)
    ids = bin_ids(p, bins)
    edges = np.linspace(0.0, 1.0, bins + 1)
    rows = []
    for b in range(bins):
        inside = ids == b
        count = int(inside.sum())
        if count:
            rows.append({"lower": float(edges[b]), "upper": float(edges[b + 1]),
                         "count": count, "mean_confidence": float(p[inside].mean()),
                         "fraction_true": float(y[inside].mean())})
    return rows


def expected_calibration_error(truth: Sequence[int], scores: Sequence[float],
                               bins: int = DEFAULT_BINS) -> float | None:
    """Return the ECE: the bins' |share true - mean confidence|, weighted by their sizes."""
    rows = reliability_rows(truth, scores, bins)
    total = sum(r["count"] for r in rows)
    if not total:
        return None
    return sum(r["count"] * abs(r["fraction_true"] - r["mean_confidence"])
               for r in rows) / total


def precision_coverage(truth: Sequence[int], scores: Sequence[float]) -> list[dict[str, Any]]:
    """Return, per number of facts kept (most certain first), the coverage and precision.

    Ties in certainty keep the verdicts' order, so the curve is reproducible.
    """
    y = np.asarray(truth, dtype=int)
    p = np.asarray(scores, dtype=float)
    if not len(y):
        return []
    certainty = np.maximum(p, 1.0 - p)
    order = np.argsort(-certainty, kind="stable")
    right = ((p[order] >= 0.5).astype(int) == y[order]).astype(float)
    kept = np.arange(1, len(y) + 1)
    precision = np.cumsum(right) / kept
    return [{"coverage": float(k / len(y)), "precision": float(prec),
             "certainty": float(certainty[order][k - 1])}
            for k, prec in zip(kept, precision, strict=True)]


def review_threshold(scores: Sequence[float], share: float) -> float | None:
    """Return the certainty below which the least certain ``share`` of verdicts fall.

    Send a verdict to a person when ``max(p, 1 - p)`` is below the threshold (or has no
    confidence at all). ``share`` is a fraction in [0, 1].
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be within [0, 1], got {share}")
    p = np.asarray([s for s in scores if s is not None], dtype=float)
    if not len(p):
        return None
    return float(np.quantile(np.maximum(p, 1.0 - p), share))


def verdict_confidence(record: Mapping[str, Any]) -> float | None:
    """Return the confidence that a verdict is right: ``p`` for T, ``1 - p`` for F.

    None for NA and NEI verdicts and for verdicts without a confidence.
    """
    value = record.get("confidence")
    label = record.get("label")
    if value is None or label not in ("T", "F"):
        return None
    return float(value) if label == "T" else 1.0 - float(value)


def certainty(record: Mapping[str, Any]) -> float | None:
    """Return how sure a verdict is, ``max(p, 1 - p)`` (None: no confidence)."""
    value = record.get("confidence")
    return None if value is None else max(float(value), 1.0 - float(value))


def calibration_report(truth: Sequence[int], scores: Sequence[float],
                       bins: int = DEFAULT_BINS) -> dict[str, Any] | None:
    """Score confidences against truths; None when no verdict has both.

    AUROC and AUPRC need both classes among the truths (None otherwise).
    """
    if not truth:
        return None
    from sklearn.metrics import average_precision_score, brier_score_loss, roc_auc_score

    both = len(set(truth)) == 2
    return {
        "n": len(truth),
        "auroc": float(roc_auc_score(truth, scores)) if both else None,
        "auprc": float(average_precision_score(truth, scores)) if both else None,
        "brier": float(brier_score_loss(truth, scores, pos_label=1)),
        "ece": expected_calibration_error(truth, scores, bins),
        "bins": bins,
        "reliability": reliability_rows(truth, scores, bins),
        "precision_coverage": precision_coverage(truth, scores),
    }


def confidence_sources(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Count the verdicts by where their confidence came from (``none``: without one)."""
    counts: dict[str, int] = {}
    for record in records:
        source = str(record.get("confidence_source") or "none")
        counts[source] = counts.get(source, 0) + 1
    return dict(sorted(counts.items()))


def run_calibration(records: Sequence[Mapping[str, Any]],
                    truths: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Return a run's calibration section: sources of confidence and, with truths, scores."""
    truth, scores = truth_pairs(records, truths)
    return {"sources": confidence_sources(records),
            "scores": calibration_report(truth, scores)}


# Points of the precision-coverage curve a run's summary keeps (the report draws them all).
SUMMARY_CURVE_POINTS = 20


def summary_calibration(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Return the calibration section of a run's summary (gold labels; a thinned curve)."""
    truth, scores = truth_pairs(records)
    return summary_calibration_of(truth, scores, confidence_sources(records))


def summary_calibration_of(truth: Sequence[int], scores: Sequence[float],
                           sources: Mapping[str, int]) -> dict[str, Any]:
    """Return the summary's calibration section from truths, confidences and their sources.

    What ``summary_calibration`` computes, for a caller that gathered the three while
    streaming the verdicts (a whole KG's run keeps no records in memory).
    """
    section: dict[str, Any] = {"sources": dict(sorted(sources.items())),
               "scores": calibration_report(truth, scores)}
    scores_section = section["scores"]
    if scores_section:
        curve = scores_section["precision_coverage"]
        step = max(1, len(curve) // SUMMARY_CURVE_POINTS)
        scores_section["precision_coverage"] = curve[step - 1::step] + (
            [curve[-1]] if len(curve) % step else [])
    return section
