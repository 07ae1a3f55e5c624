"""Estimate a KG's accuracy (the share of its facts that are true) with confidence intervals.

Three estimators, each an ``Interval``:

- ``llm``: the share of checked facts the model judged ``T`` (NA verdicts left out), with a
  Wilson interval over the verdicts. Flagged ``biased``: the interval describes the model,
  not the KG, and however many facts are checked it does not shrink towards the truth.
- ``human``: the human labels alone. Simple random samples: Wilson interval (statsmodels).
  Stratified samples: the strata's shares combined by their sizes, with each stratum's
  variance from Agresti-Coull-adjusted counts (a stratum whose labels all agree still has
  a variance). Cluster samples (TWCS): the mean of the drawn clusters' shares, with the
  variance between draws (never below the simple-random one).
- ``ppi``: prediction-powered inference with power tuning (PPI++ of ``ppi-python``): the
  verdicts on every fact, corrected by the gap between labels and verdicts on the labelled
  facts. Valid whatever the model's bias; narrower than ``human`` when the verdicts carry
  information. Strata are estimated one by one and combined by their sizes; TWCS works on
  the drawn clusters' means.

NA and NEI verdicts enter ``ppi`` as 0.5 (a fixed score, neither T nor F). PPI stays valid for any
fixed scoring of the verdicts: only its width depends on how informative the score is.
PPI's interval is a normal one, widened to Student's t with ``n - 1`` degrees of freedom
(the tuned power and the variance come from the same few labels). Where the labels hold
fewer than ``MIN_CLASS`` facts of either class (an accuracy near 0 or 1 with few labels),
that normal approximation fails, and ``ppi`` uses the labels' own (Wilson-type) interval
instead (``fallback`` says so).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from kgcheck.evals.accuracy.designs import DESIGNS

# Below this many labels of either class, a normal interval on them is unreliable.
MIN_CLASS = 5
# Fewer usable labels than this give no interval at all.
MIN_LABELS = 10
# NEI (the model abstained) is scored as NA: neither side, a fact for a person to label.
VERDICT_SCORE = {"T": 1.0, "F": 0.0, "NA": 0.5, "NEI": 0.5}
ESTIMATORS = ("llm", "human", "ppi")
PPI_EXTRA = "estimate"


class EstimateError(ValueError):
    """Labels or verdicts from which no valid interval can be computed."""


@dataclass(frozen=True)
class Labeled:
    """One human (or gold) label on a fact of the run, with its place in the design."""

    fact_id: str
    true: bool
    stratum: str = ""
    cluster: str = ""


@dataclass
class Interval:
    """One estimator's accuracy estimate and confidence interval."""

    estimator: str
    accuracy: float
    ci_low: float
    ci_high: float
    n_labeled: int
    n_unlabeled: int
    interval: str
    biased: bool = False
    fallback: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def width(self) -> float:
        """The interval's width."""
        return self.ci_high - self.ci_low

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON form written into ``estimate.json``."""
        return {**asdict(self), "width": self.width}


def z_value(confidence: float) -> float:
    """Return the two-sided normal quantile of a confidence level (1.96 for 0.95)."""
    check_confidence(confidence)
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def t_value(confidence: float, df: int) -> float:
    """Return the two-sided Student t quantile: normal intervals from few units are too short."""
    try:
        # Imported on use: scipy is part of the optional `estimate` extra.
        from scipy.stats import t as student_t
    except ImportError:
        raise _missing_extra("scipy") from None
    return float(student_t.ppf(1 - (1 - confidence) / 2, df))


def check_confidence(confidence: float) -> None:
    """Refuse a confidence level outside (0, 1)."""
    if not 0 < confidence < 1:
        raise EstimateError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence}")


def _clip(low: float, high: float) -> tuple[float, float]:
    return max(0.0, low), min(1.0, high)


def _missing_extra(package: str) -> EstimateError:
    return EstimateError(f"accuracy estimates need {package}: pip install 'kgcheck[{PPI_EXTRA}]'")


def wilson(successes: int, n: int, confidence: float) -> tuple[float, float]:
    """Return the Wilson score interval of a proportion (statsmodels)."""
    try:
        # Imported on use: statsmodels is part of the optional `estimate` extra, and slow to
        # import for every other command.
        from statsmodels.stats.proportion import proportion_confint
    except ImportError:
        raise _missing_extra("statsmodels") from None
    low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    return float(low), float(high)


def _ac_variance(successes: int, n: int, z: float) -> float:
    # Agresti-Coull: add z^2/2 successes and failures, so that 0/n and n/n keep a variance.
    tilde = (successes + z * z / 2) / (n + z * z)
    return tilde * (1 - tilde) / (n + z * z)


def llm_estimate(verdicts: Sequence[str], confidence: float) -> Interval:
    """Share of facts the model judged true (NA left out), with a Wilson interval."""
    decided = [v for v in verdicts if v in ("T", "F")]
    if not decided:
        raise EstimateError("the run has no T or F verdicts to estimate from")
    true = sum(v == "T" for v in decided)
    low, high = wilson(true, len(decided), confidence)
    return Interval("llm", true / len(decided), low, high, 0, len(verdicts), "wilson",
                    biased=True, details={"na_verdicts": len(verdicts) - len(decided),
                             "nei_verdicts": sum(1 for v in verdicts if v == "NEI")})


def _strata(labels: Sequence[Labeled]) -> dict[str, list[Labeled]]:
    groups: dict[str, list[Labeled]] = defaultdict(list)
    for item in labels:
        groups[item.stratum].append(item)
    return dict(groups)


def _clusters(labels: Sequence[Labeled]) -> dict[str, list[Labeled]]:
    groups: dict[str, list[Labeled]] = defaultdict(list)
    for item in labels:
        groups[item.cluster].append(item)
    return dict(groups)


def _few_of_a_class(labels: Sequence[Labeled]) -> bool:
    true = sum(item.true for item in labels)
    return min(true, len(labels) - true) < MIN_CLASS


def _normal(estimate: float, se: float, z: float) -> tuple[float, float]:
    return _clip(estimate - z * se, estimate + z * se)


def _stratum_sizes(labels: Sequence[Labeled], stratum_sizes: Mapping[str, int]) -> dict[str, int]:
    groups = _strata(labels)
    missing = sorted(h for h in stratum_sizes if h not in groups)
    if missing:
        raise EstimateError(
            f"no labels in stratum {missing[0]!r} ({stratum_sizes[missing[0]]} facts): every "
            "stratum needs labels; draw the sample with `kgcheck sample --run RUN --design "
            "stratified --n N --out FILE.csv`")
    small = sorted(h for h, items in groups.items() if len(items) < 2)
    if small:
        raise EstimateError(f"stratum {small[0]!r} has one label; each stratum needs two")
    unknown = sorted(h for h in groups if h not in stratum_sizes)
    if unknown:
        raise EstimateError(f"labels name stratum {unknown[0]!r}, which no fact of the run is in")
    return dict(stratum_sizes)


def human_estimate(labels: Sequence[Labeled], confidence: float, *, design: str = "srs",
                   stratum_sizes: Mapping[str, int] | None = None) -> Interval:
    """Estimate accuracy from the labels alone, by the design they were drawn with."""
    _check_labels(labels)
    z = z_value(confidence)
    n = len(labels)
    true = sum(item.true for item in labels)
    if design == "srs":
        low, high = wilson(true, n, confidence)
        return Interval("human", true / n, low, high, n, 0, "wilson")
    if design == "stratified":
        sizes = _stratum_sizes(labels, stratum_sizes or {})
        total = sum(sizes.values())
        point, var = 0.0, 0.0
        for h, items in _strata(labels).items():
            share, n_h = sizes[h] / total, len(items)
            x_h = sum(item.true for item in items)
            fpc = max(0.0, 1 - n_h / sizes[h])
            point += share * x_h / n_h
            var += share * share * _ac_variance(x_h, n_h, z) * fpc
        low, high = _normal(point, math.sqrt(var), z)
        return Interval("human", point, low, high, n, 0, "stratified (Agresti-Coull strata)",
                        details={"strata": len(sizes)})
    if design == "twcs":
        point, se = _cluster_mean(labels, z)
        low, high = _normal(point, se, t_value(confidence, len(_clusters(labels)) - 1))
        return Interval("human", point, low, high, n, 0, "twcs (between-cluster variance)",
                        details={"clusters": len(_clusters(labels))})
    raise EstimateError(f"unknown design {design!r}; known: {', '.join(DESIGNS)}")


def _cluster_mean(labels: Sequence[Labeled], z: float) -> tuple[float, float]:
    means = np.array([np.mean([item.true for item in items])
                      for items in _clusters(labels).values()])
    if len(means) < 2:
        raise EstimateError("a cluster sample needs labels from at least two cluster draws")
    se = float(means.std(ddof=1) / math.sqrt(len(means)))
    true = sum(item.true for item in labels)
    # A design effect below 1 is possible but not to be trusted from a few draws.
    return float(means.mean()), max(se, math.sqrt(_ac_variance(true, len(labels), z)))


PpiCi = Callable[..., tuple[Any, Any]]


def load_ppi() -> PpiCi:
    """Return ``ppi_py.ppi_mean_ci``; a clear error names the extra when it is missing."""
    try:
        # Imported on use: ppi-python (with numba) is an optional extra and slow to import.
        from ppi_py import ppi_mean_ci
    except ImportError:
        raise _missing_extra("ppi-python") from None
    return ppi_mean_ci


def _ppi_normal(y: np.ndarray, yhat: np.ndarray, yhat_all: np.ndarray,
                confidence: float) -> tuple[float, float]:
    """Return PPI++'s point estimate and standard error (from its normal interval)."""
    ppi_mean_ci = load_ppi()
    # ppi-python's default alpha is 0.1 (a 90 % interval): always pass it.
    low, high = ppi_mean_ci(y, yhat, yhat_all, alpha=1 - confidence, lam=None)
    low_f, high_f = float(np.ravel(low)[0]), float(np.ravel(high)[0])
    return (low_f + high_f) / 2, (high_f - low_f) / (2 * z_value(confidence))


def ppi_estimate(labels: Sequence[Labeled], scores: Mapping[str, float], confidence: float, *,
                 design: str = "srs", strata: Mapping[str, str] | None = None) -> Interval:
    """Prediction-powered estimate: verdict scores on all facts plus labels on a few.

    ``scores`` maps every fact of the run to its verdict score (``VERDICT_SCORE``);
    ``strata`` maps every fact to its stratum (stratified designs).
    """
    _check_labels(labels)
    unknown = [item.fact_id for item in labels if item.fact_id not in scores]
    if unknown:
        raise EstimateError(f"label for fact {unknown[0]!r}, which the run has no verdict for")
    z = z_value(confidence)
    n, n_all = len(labels), len(scores)
    if design == "srs":
        if _few_of_a_class(labels):
            return _fallback(labels, confidence, n_all, design)
        y = np.array([float(item.true) for item in labels])
        yhat = np.array([scores[item.fact_id] for item in labels])
        point, se = _ppi_normal(y, yhat, np.fromiter(scores.values(), float), confidence)
        low, high = _normal(point, se, t_value(confidence, n - 1))
        return Interval("ppi", point, low, high, n, n_all, "ppi++ (ppi-python), t quantile")
    if design == "stratified":
        by_fact = strata or {}
        members: dict[str, list[float]] = defaultdict(list)
        for fid, score in scores.items():
            members[by_fact.get(fid, "")].append(score)
        sizes = _stratum_sizes(labels, {h: len(v) for h, v in members.items()})
        total = sum(sizes.values())
        point, var, fell_back = 0.0, 0.0, 0
        for h, items in _strata(labels).items():
            share = sizes[h] / total
            if _few_of_a_class(items):
                x_h = sum(item.true for item in items)
                est, v = x_h / len(items), _ac_variance(x_h, len(items), z)
                fell_back += 1
            else:
                y = np.array([float(item.true) for item in items])
                yhat = np.array([scores[item.fact_id] for item in items])
                est, se_h = _ppi_normal(y, yhat, np.array(members[h]), confidence)
                v = se_h * se_h
            point += share * est
            var += share * share * v
        low, high = _normal(point, math.sqrt(var), z)
        return Interval("ppi", point, low, high, n, n_all, "ppi++ per stratum (ppi-python)",
                        fallback=(f"labels alone in {fell_back} of {len(sizes)} strata"
                                  if fell_back else None),
                        details={"strata": len(sizes)})
    if design == "twcs":
        if _few_of_a_class(labels):
            return _fallback(labels, confidence, n_all, design)
        groups = list(_clusters(labels).values())
        if len(groups) < 2:
            raise EstimateError("a cluster sample needs labels from at least two cluster draws")
        y = np.array([np.mean([item.true for item in items]) for items in groups])
        yhat = np.array([np.mean([scores[item.fact_id] for item in items]) for items in groups])
        point, se = _ppi_normal(y, yhat, np.fromiter(scores.values(), float), confidence)
        low, high = _normal(point, se, t_value(confidence, len(groups) - 1))
        return Interval("ppi", point, low, high, n, n_all, "ppi++ over cluster draws",
                        details={"clusters": len(groups)})
    raise EstimateError(f"unknown design {design!r}; known: {', '.join(DESIGNS)}")


def _fallback(labels: Sequence[Labeled], confidence: float, n_all: int,
              design: str) -> Interval:
    human = human_estimate(labels, confidence, design=design)
    return Interval("ppi", human.accuracy, human.ci_low, human.ci_high, len(labels), n_all,
                    human.interval, fallback=f"fewer than {MIN_CLASS} labels of a class: "
                    "labels alone", details=human.details)


def _check_labels(labels: Sequence[Labeled]) -> None:
    if len(labels) < MIN_LABELS:
        raise EstimateError(f"{len(labels)} usable labels; at least {MIN_LABELS} are needed "
                            "for an interval")


def labels_to_halve(interval: Interval) -> int | None:
    """How many more labels would halve the interval (its width goes as 1/sqrt(n))."""
    if interval.biased or interval.n_labeled == 0:
        return None
    return 3 * interval.n_labeled


def estimate_all(verdicts: Mapping[str, str], labels: Sequence[Labeled], confidence: float,
                 *, design: str = "srs", strata: Mapping[str, str] | None = None) -> list[Interval]:
    """Compute the three estimators for a run's verdicts and a set of labels."""
    check_confidence(confidence)
    scores = {fid: VERDICT_SCORE.get(label, 0.5) for fid, label in verdicts.items()}
    sizes: dict[str, int] = defaultdict(int)
    for fid in verdicts:
        sizes[(strata or {}).get(fid, "")] += 1
    return [
        llm_estimate(list(verdicts.values()), confidence),
        human_estimate(labels, confidence, design=design, stratum_sizes=sizes),
        ppi_estimate(labels, scores, confidence, design=design, strata=strata),
    ]


def width_curve(verdicts: Mapping[str, str], labels: Sequence[Labeled], confidence: float,
                steps: int = 8, seed: int = 0) -> list[dict[str, Any]]:
    """Widths of ``human`` and ``ppi`` on random subsets of the labels, as if drawn by SRS."""
    rng = np.random.default_rng(seed)
    order = [labels[i] for i in rng.permutation(len(labels))]
    sizes = sorted({int(k) for k in np.linspace(MIN_LABELS * 2, len(labels), steps)
                    if k >= MIN_LABELS})
    scores = {fid: VERDICT_SCORE.get(label, 0.5) for fid, label in verdicts.items()}
    rows = []
    for k in sizes:
        subset = order[:k]
        human = human_estimate(subset, confidence)
        ppi = ppi_estimate(subset, scores, confidence)
        rows.append({"n_labeled": k, "human": human.width, "ppi": ppi.width,
                     "ppi_fallback": ppi.fallback is not None})
    return rows
