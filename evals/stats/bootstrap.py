"""Bootstrap intervals of accuracy and F1, one run or the difference of two (paired).

A score of verdicts depends only on how many facts fall into each cell of (gold, answer)
(for a pair of runs: gold, answer of A, answer of B). Resampling n facts with replacement
is therefore the same as drawing those cell counts from a multinomial with the observed
cell shares: 10,000 resamples of any number of facts cost a (10,000 x cells) array, not
(10,000 x n). F1 follows scikit-learn's definition with ``labels=["T", "F"]``: an NA
answer is a miss for its gold class, never a false positive. A class absent from a
resample's gold labels has no F1 there (NaN, left out of the percentiles); macro-F1 is the
mean over the classes present, as in ``kgcheck.evals.metrics``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import product

import numpy as np

from kgcheck.evals.stats.errors import StatsInputError

__all__ = ["RESAMPLES", "SCORES", "Interval", "paired_intervals", "score_intervals"]

RESAMPLES = 10_000
CONFIDENCE = 0.95
SCORES = ("accuracy", "f1_true", "f1_false", "macro_f1")
GOLDS = ("T", "F")
ANSWERS = ("T", "F", "NA")


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap percentile interval (None: not defined)."""

    estimate: float | None
    low: float | None
    high: float | None

    def as_dict(self) -> dict[str, float | None]:
        """Return ``{"estimate", "low", "high"}``."""
        return asdict(self)


def _answer(label: str) -> str:
    # NEI, errors and anything else that is not a T/F verdict count as NA: not correct.
    return label if label in ("T", "F") else "NA"


def _gold(value: bool | str) -> str:
    if isinstance(value, bool):
        return "T" if value else "F"
    if value not in GOLDS:
        raise StatsInputError(f"gold label {value!r} is not T or F")
    return value


def _hit(cls: str, gold: str, answer: str) -> bool:
    return gold == cls and answer == cls


def _false_alarm(cls: str, gold: str, answer: str) -> bool:
    return gold != cls and answer == cls


def _miss(cls: str, gold: str, answer: str) -> bool:
    return gold == cls and answer != cls


def _scores(counts: np.ndarray, cells: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
    """Score each row of ``counts`` (one count per (gold, answer) cell)."""
    def total(match: Callable[[str, str], bool]) -> np.ndarray:
        mask = np.fromiter((match(g, a) for g, a in cells), dtype=float, count=len(cells))
        return counts @ mask

    n = counts.sum(axis=-1)
    f1 = {}
    for cls in GOLDS:
        tp = total(functools.partial(_hit, cls))
        fp = total(functools.partial(_false_alarm, cls))
        fn = total(functools.partial(_miss, cls))
        with np.errstate(invalid="ignore", divide="ignore"):
            score = 2 * tp / (2 * tp + fp + fn)
        # No gold member of the class: it has no F1 in this sample.
        f1[cls] = np.where(tp + fn > 0, score, np.nan)
    correct = total(lambda g, a: g == a)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(n > 0, correct / n, np.nan)
    both = np.stack([f1["T"], f1["F"]])
    present = (~np.isnan(both)).sum(axis=0)
    with np.errstate(invalid="ignore"):
        macro = np.where(present > 0, np.nansum(both, axis=0) / np.maximum(present, 1), np.nan)
    return {"accuracy": accuracy, "f1_true": f1["T"], "f1_false": f1["F"], "macro_f1": macro}


def _resampled(counts: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    if resamples < 1:
        raise StatsInputError(f"resamples must be at least 1, got {resamples}")
    n = int(counts.sum())
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, counts / n, size=resamples).astype(float)


def _interval(estimate: float, draws: np.ndarray, confidence: float) -> Interval:
    if np.isnan(estimate):
        return Interval(None, None, None)
    kept = draws[~np.isnan(draws)]
    if kept.size == 0:
        return Interval(float(estimate), None, None)
    tail = (1 - confidence) / 2
    low, high = np.quantile(kept, [tail, 1 - tail])
    return Interval(float(estimate), float(low), float(high))


def _check(confidence: float, n: int, what: str) -> None:
    if not 0 < confidence < 1:
        raise StatsInputError(f"confidence must be between 0 and 1, got {confidence}")
    if n == 0:
        raise StatsInputError(f"{what}: no facts with a gold label to score")


def score_intervals(gold: Sequence[bool | str], pred: Sequence[str], *,
                    resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                    seed: int = 0) -> dict[str, Interval]:
    """Bootstrap accuracy, F1(T), F1(F) and macro-F1 of one run's verdicts.

    ``gold`` holds True/False (or "T"/"F"), ``pred`` the verdicts ("T", "F", "NA", ...).
    The same seed gives the same intervals.
    """
    if len(gold) != len(pred):
        raise StatsInputError(f"gold has {len(gold)} labels but pred has {len(pred)}")
    pairs: dict[tuple[str, str], int] = {}
    for g, p in zip(gold, pred, strict=True):
        key = (_gold(g), p)
        pairs[key] = pairs.get(key, 0) + 1
    return count_intervals(pairs, resamples=resamples, confidence=confidence, seed=seed)


def count_intervals(pairs: Mapping[tuple[str, str], int], *,
                    resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                    seed: int = 0) -> dict[str, Interval]:
    """Bootstrap the scores from counts of (gold, verdict) pairs, as ``score_intervals`` does.

    The scores and their resamples depend on these counts only, so a run's intervals come
    from its summary's tally as well as from its verdicts, in any order.
    """
    _check(confidence, sum(pairs.values()), "score intervals")
    cells = list(product(GOLDS, ANSWERS))
    index = {cell: i for i, cell in enumerate(cells)}
    counts = np.zeros(len(cells))
    for (g, p), count in pairs.items():
        counts[index[(_gold(g), _answer(p))]] += count
    point = _scores(counts[None, :], cells)
    draws = _scores(_resampled(counts, resamples, seed), cells)
    return {k: _interval(point[k][0], draws[k], confidence) for k in SCORES}


def paired_intervals(gold: Sequence[bool | str], pred_a: Sequence[str], pred_b: Sequence[str],
                     *, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                     seed: int = 0) -> dict[str, Interval]:
    """Bootstrap the differences A - B of accuracy, F1(T), F1(F) and macro-F1 (paired).

    Each resample draws facts, keeping both runs' verdicts of a fact together, so the
    interval reflects how the runs differ on the same facts.
    """
    if not len(gold) == len(pred_a) == len(pred_b):
        raise StatsInputError(f"gold, A and B have {len(gold)}, {len(pred_a)} and "
                              f"{len(pred_b)} labels; they must be the same facts")
    _check(confidence, len(gold), "paired intervals")
    cells = list(product(GOLDS, ANSWERS, ANSWERS))
    index = {cell: i for i, cell in enumerate(cells)}
    counts = np.zeros(len(cells))
    for g, a, b in zip(gold, pred_a, pred_b, strict=True):
        counts[index[(_gold(g), _answer(a), _answer(b))]] += 1
    cells_a = [(g, a) for g, a, _ in cells]
    cells_b = [(g, b) for g, _, b in cells]
    point = counts[None, :]
    draws = _resampled(counts, resamples, seed)
    point_a, point_b = _scores(point, cells_a), _scores(point, cells_b)
    draws_a, draws_b = _scores(draws, cells_a), _scores(draws, cells_b)
    return {k: _interval(point_a[k][0] - point_b[k][0], draws_a[k] - draws_b[k], confidence)
            for k in SCORES}
