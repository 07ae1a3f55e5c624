"""Label until precise enough: the running accuracy estimate of a review, and its margin.

After each decision the share of true facts among the labelled ones is estimated three
ways, each with its interval at ``confidence``:

- ``wilson``: the labels alone, by the design (a Wilson interval for a simple random
  sample; the strata combined by their sizes for a stratified one;
  ``kgcheck.evals.accuracy.estimators.human_estimate``);
- ``beta``: the Bayesian posterior under a uniform Beta(1, 1) prior per stratum, and its
  highest-density interval (HDI: the shortest interval holding ``confidence`` of the
  posterior; scipy.stats.beta). Stratified: the posterior of the size-weighted mean,
  sampled (seeded) from the strata's posteriors;
- ``ppi``: prediction-powered inference with the run's verdicts on every fact (PPI++ of
  ``ppi-python``; ``estimators.ppi_estimate``).

The **margin of error** is half the width of the PPI interval, valid whatever the model's
bias (``margin_from`` says ``wilson`` where PPI is undefined: verdicts that are constant
within each stratum, as in a sample stratified by verdict). ``target`` (``kgcheck review
--until-moe``) says when it is reached. The labels must be a random sample of the facts
(simple or stratified) for any of this to hold: the review draws its queue so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kgcheck.evals.accuracy.estimators import (
    MIN_LABELS,
    VERDICT_SCORE,
    EstimateError,
    Labeled,
    human_estimate,
    ppi_estimate,
)
from kgcheck.evals.stats.errors import missing_extra

__all__ = ["BETA_DRAWS", "beta_hdi", "hdi_of_draws", "running_estimate"]

BETA_DRAWS = 20_000


def beta_hdi(a: float, b: float, confidence: float) -> tuple[float, float]:
    """Return the highest-density interval of Beta(a, b) holding ``confidence`` of its mass."""
    try:
        # Imported on use: scipy is part of the optional `stats` extra.
        from scipy.optimize import minimize_scalar
        from scipy.stats import beta
    except ImportError:
        raise missing_extra("scipy") from None
    dist = beta(a, b)
    tail = 1 - confidence

    def width(low_mass: float) -> float:
        return float(dist.ppf(low_mass + confidence) - dist.ppf(low_mass))

    # The HDI is the shortest of the intervals with that mass; for a unimodal density the
    # width is convex in the mass left below the interval.
    found = minimize_scalar(width, bounds=(0.0, tail), method="bounded",
                            options={"xatol": 1e-10})
    low_mass = float(found.x)
    for edge in (0.0, tail):  # a J-shaped posterior (all labels one class) has its HDI at an end
        if width(edge) < width(low_mass):
            low_mass = edge
    return float(dist.ppf(low_mass)), float(dist.ppf(low_mass + confidence))


def hdi_of_draws(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    """Return the shortest interval holding ``confidence`` of the draws."""
    ordered = np.sort(draws)
    k = int(np.ceil(confidence * len(ordered)))
    widths = ordered[k - 1:] - ordered[:len(ordered) - k + 1]
    i = int(np.argmin(widths))
    return float(ordered[i]), float(ordered[i + k - 1])


def _beta(labels: Sequence[Labeled], sizes: Mapping[str, int], confidence: float,
          stratified: bool, seed: int) -> dict[str, Any]:
    if not stratified:
        true = sum(item.true for item in labels)
        a, b = 1 + true, 1 + len(labels) - true
        low, high = beta_hdi(a, b, confidence)
        return {"estimate": a / (a + b), "low": low, "high": high,
                "interval": "Beta(1, 1) prior, HDI"}
    by_stratum: dict[str, list[Labeled]] = defaultdict(list)
    for item in labels:
        by_stratum[item.stratum].append(item)
    total = sum(sizes.values())
    rng = np.random.default_rng(seed)
    draws = np.zeros(BETA_DRAWS)
    mean = 0.0
    for h, size in sizes.items():
        items = by_stratum.get(h, [])
        true = sum(item.true for item in items)
        a, b = 1 + true, 1 + len(items) - true
        draws += size / total * rng.beta(a, b, size=BETA_DRAWS)
        mean += size / total * a / (a + b)
    low, high = hdi_of_draws(draws, confidence)
    return {"estimate": mean, "low": low, "high": high,
            "interval": f"Beta(1, 1) prior per stratum, HDI of {BETA_DRAWS:,} draws"}


def _as_dict(interval: Any) -> dict[str, Any]:
    return {"estimate": interval.accuracy, "low": interval.ci_low, "high": interval.ci_high,
            "interval": interval.interval, "fallback": interval.fallback}


def running_estimate(verdicts: Mapping[str, str], labels: Sequence[Labeled], *,
                     confidence: float = 0.95, strata: Mapping[str, str] | None = None,
                     target: float | None = None, seed: int = 0) -> dict[str, Any]:
    """Estimate the KG's accuracy from the labels so far (see the module docstring).

    ``verdicts`` holds the run's label of every fact; ``strata`` (stratified samples)
    every fact's stratum. Returns ``labels``, ``wilson``, ``beta``, ``ppi`` (None until
    ``MIN_LABELS`` labels), ``margin`` and, with ``target``, ``reached``.
    """
    if target is not None and not 0 < target < 1:
        raise EstimateError(f"the target margin of error must be between 0 and 1, got {target}")
    design = "stratified" if strata else "srs"
    sizes: dict[str, int] = defaultdict(int)
    for fid in verdicts:
        sizes[(strata or {}).get(fid, "")] += 1
    out: dict[str, Any] = {"labels": len(labels), "true": sum(i.true for i in labels),
                           "design": design, "confidence": confidence, "wilson": None,
                           "beta": None, "ppi": None, "margin": None, "target": target,
                           "reached": False, "needs": None}
    if labels:
        out["beta"] = _beta(labels, sizes, confidence, bool(strata), seed)
    if len(labels) < MIN_LABELS:
        out["needs"] = f"{MIN_LABELS - len(labels)} more labels for the Wilson and PPI intervals"
        return out
    try:
        out["wilson"] = _as_dict(human_estimate(labels, confidence, design=design,
                                                stratum_sizes=sizes))
        scores = {fid: VERDICT_SCORE.get(label, 0.5) for fid, label in verdicts.items()}
        out["ppi"] = _as_dict(ppi_estimate(labels, scores, confidence, design=design,
                                           strata=strata))
    except EstimateError as exc:
        out["needs"] = str(exc)
        return out
    if not all(math.isfinite(out["ppi"][k]) for k in ("estimate", "low", "high")):
        # Constant verdicts within a stratum (a sample stratified by verdict) leave PPI's
        # tuning undefined: the verdicts say nothing there beyond the strata themselves.
        out["ppi"] = None
        out["margin_from"] = "wilson"
        out["needs"] = "PPI is undefined when the verdicts are constant within strata"
        chosen = out["wilson"]
    else:
        out["margin_from"] = "ppi"
        chosen = out["ppi"]
    out["margin"] = (chosen["high"] - chosen["low"]) / 2
    out["reached"] = target is not None and out["margin"] <= target
    return out
