"""Scores of verdicts against gold labels (REFERENCE.md section 3).

NA (invalid) answers are neither T nor F: each counts as a miss for its gold class in F1,
and is also reported on its own.
"""

from __future__ import annotations

from collections.abc import Sequence


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def f1(tp: int, fp: int, fn: int) -> float:
    """F1 from counts; 0 when the class never occurs and is never predicted."""
    return _ratio(2 * tp, 2 * tp + fp + fn)


def classification_report(gold: Sequence[bool | None], pred: Sequence[str]) -> dict[str, float]:
    """Per-class precision, recall and F1, balanced accuracy and NA counts.

    ``gold`` holds True/False (None = unlabelled, skipped); ``pred`` holds "T", "F" or "NA".
    """
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} labels but pred has {len(pred)}")
    pairs = [(g, p) for g, p in zip(gold, pred, strict=True) if g is not None]
    report: dict[str, float] = {"n": len(pairs)}
    recalls = []
    for cls, truth in (("true", True), ("false", False)):
        mark = "T" if truth else "F"
        tp = sum(1 for g, p in pairs if g is truth and p == mark)
        fp = sum(1 for g, p in pairs if g is not truth and p == mark)
        fn = sum(1 for g, p in pairs if g is truth and p != mark)
        report[f"precision_{cls}"] = _ratio(tp, tp + fp)
        report[f"recall_{cls}"] = _ratio(tp, tp + fn)
        report[f"f1_{cls}"] = f1(tp, fp, fn)
        if tp + fn:
            recalls.append(report[f"recall_{cls}"])
    report["balanced_accuracy"] = sum(recalls) / len(recalls) if recalls else 0.0
    invalid = sum(1 for _, p in pairs if p not in ("T", "F"))
    report["invalid"] = invalid
    report["invalid_rate"] = _ratio(invalid, len(pairs))
    return report
