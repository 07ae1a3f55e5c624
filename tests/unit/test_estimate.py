"""Accuracy estimators: Wilson, design-based and PPI++ intervals, their coverage, NA handling."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from kgcheck.evals.accuracy import designs
from kgcheck.evals.accuracy.estimators import (
    MIN_CLASS,
    EstimateError,
    Labeled,
    estimate_all,
    human_estimate,
    llm_estimate,
    ppi_estimate,
)


def population(n: int, accuracy: float, *, seed: int = 0, says_true: float = 0.95,
               catches: float = 0.6) -> tuple[dict[str, bool], dict[str, str]]:
    """Facts with truth and a biased model: it calls most facts true, catches some false."""
    rng = np.random.default_rng(seed)
    truth = {str(i): bool(rng.random() < accuracy) for i in range(n)}
    verdicts = {}
    for fid, true in truth.items():
        if true:
            verdicts[fid] = "T" if rng.random() < says_true else "F"
        else:
            verdicts[fid] = "F" if rng.random() < catches else "T"
    return truth, verdicts


def srs_labels(truth: dict[str, bool], n: int, seed: int) -> list[Labeled]:
    rng = np.random.default_rng(seed)
    ids = list(truth)
    return [Labeled(ids[i], truth[ids[i]]) for i in rng.choice(len(ids), n, replace=False)]


def test_human_srs_is_the_wilson_interval() -> None:
    labels = [Labeled(str(i), i % 4 != 0) for i in range(40)]
    got = human_estimate(labels, 0.95)
    low, high = proportion_confint(30, 40, alpha=0.05, method="wilson")
    assert (got.accuracy, got.ci_low, got.ci_high) == (0.75, pytest.approx(low),
                                                       pytest.approx(high))


def test_llm_share_leaves_na_out_and_is_flagged_biased() -> None:
    got = llm_estimate(["T", "T", "F", "NA"], 0.95)
    assert got.accuracy == pytest.approx(2 / 3)
    assert got.biased and got.details["na_verdicts"] == 1 and got.n_unlabeled == 4


def test_ppi_uses_the_asked_confidence_not_the_package_default() -> None:
    truth, verdicts = population(3000, 0.8)
    labels = srs_labels(truth, 200, 1)
    scores = {f: 1.0 if v == "T" else 0.0 for f, v in verdicts.items()}
    wide = ppi_estimate(labels, scores, 0.95)
    narrow = ppi_estimate(labels, scores, 0.90)
    assert wide.fallback is None
    # Width scales with the quantile: t with 199 degrees of freedom at 97.5 % and 95 %.
    assert wide.width / narrow.width == pytest.approx(1.97196 / 1.65255, rel=1e-3)


def test_ppi_is_narrower_than_labels_alone_when_verdicts_are_informative() -> None:
    truth, _ = population(4000, 0.7)
    rng = np.random.default_rng(3)
    # A model right on 95 % of facts.
    verdicts = {f: ("T" if t else "F") if rng.random() < 0.95 else ("F" if t else "T")
                for f, t in truth.items()}
    labels = srs_labels(truth, 200, 2)
    human, ppi = estimate_all(verdicts, labels, 0.95)[1:]
    assert ppi.width < 0.75 * human.width


def test_ppi_covers_the_truth_whatever_the_model_bias_and_llm_does_not() -> None:
    truth, verdicts = population(5000, 0.8, says_true=0.98, catches=0.3)
    accuracy = np.mean(list(truth.values()))
    covered = {"llm": 0, "human": 0, "ppi": 0}
    seeds = 150
    for seed in range(seeds):
        for interval in estimate_all(verdicts, srs_labels(truth, 100, seed), 0.95):
            covered[interval.estimator] += interval.ci_low <= accuracy <= interval.ci_high
    assert covered["llm"] == 0
    assert covered["ppi"] / seeds >= 0.91
    assert covered["human"] / seeds >= 0.91


def test_na_verdicts_score_one_half_and_keep_ppi_valid() -> None:
    truth, verdicts = population(3000, 0.75)
    with_na = {f: ("NA" if int(f) % 5 == 0 else v) for f, v in verdicts.items()}
    labels = srs_labels(truth, 200, 4)
    got = estimate_all(with_na, labels, 0.95)
    assert got[0].details["na_verdicts"] == 600
    accuracy = np.mean(list(truth.values()))
    assert got[2].ci_low <= accuracy <= got[2].ci_high


def test_ppi_falls_back_to_the_labels_when_a_class_is_rare() -> None:
    labels = [Labeled(str(i), i >= MIN_CLASS - 1) for i in range(60)]
    verdicts = {str(i): "T" for i in range(1000)}
    human, ppi = estimate_all(verdicts, labels, 0.95)[1:]
    assert ppi.fallback and (ppi.ci_low, ppi.ci_high) == (human.ci_low, human.ci_high)


def test_stratified_estimates_combine_strata_by_their_sizes() -> None:
    # Stratum a: 900 facts, labels 90 % true; stratum b: 100 facts, labels 10 % true.
    strata = {str(i): ("a" if i < 900 else "b") for i in range(1000)}
    verdicts = {fid: "T" if h == "a" else "F" for fid, h in strata.items()}
    labels = ([Labeled(str(i), i % 10 != 0, "a") for i in range(50)]
              + [Labeled(str(900 + i), i % 10 == 0, "b") for i in range(50)])
    got = estimate_all(verdicts, labels, 0.95, design="stratified", strata=strata)
    human, ppi = got[1], got[2]
    assert human.accuracy == pytest.approx(0.9 * 0.9 + 0.1 * 0.1)
    assert ppi.ci_low < human.accuracy < ppi.ci_high
    # A simple-random reading of the same labels would say 0.5.
    assert human_estimate(labels, 0.95).accuracy == pytest.approx(0.5)


def test_stratum_without_labels_is_refused() -> None:
    strata = {str(i): ("a" if i < 500 else "b") for i in range(1000)}
    labels = [Labeled(str(i), True, "a") for i in range(30)]
    with pytest.raises(EstimateError, match="no labels in stratum 'b'"):
        human_estimate(labels, 0.95, design="stratified", stratum_sizes={"a": 500, "b": 500})
    with pytest.raises(EstimateError, match="no labels in stratum"):
        estimate_all({f: "T" for f in strata}, labels, 0.95, design="stratified",
                     strata=strata)


def test_twcs_uses_the_variance_between_cluster_draws() -> None:
    # Whole clusters are right or wrong: the labels of a cluster are not independent.
    labels = [Labeled(f"{c}-{k}", c % 3 != 0, cluster=f"{c}|s{c}")
              for c in range(30) for k in range(3)]
    twcs = human_estimate(labels, 0.95, design="twcs")
    srs = human_estimate(labels, 0.95)
    assert twcs.accuracy == pytest.approx(20 / 30)
    assert twcs.width > srs.width


def test_fewer_than_ten_labels_give_no_interval() -> None:
    with pytest.raises(EstimateError, match="9 usable labels; at least 10"):
        human_estimate([Labeled(str(i), True) for i in range(9)], 0.95)
    with pytest.raises(EstimateError, match="0 usable labels"):
        estimate_all({"1": "T"}, [], 0.95)


def test_bad_confidence_is_refused() -> None:
    with pytest.raises(EstimateError, match="between 0 and 1"):
        estimate_all({"1": "T"}, [Labeled(str(i), True) for i in range(20)], 95)


def test_designs_are_seeded_and_weighted() -> None:
    units = [designs.Unit(str(i), "p1" if i < 800 else ("p2" if i < 990 else "p3"),
                          f"s{i // 4}") for i in range(1000)]
    first = designs.draw(units, 100, "stratified", seed=7)
    assert first == designs.draw(units, 100, "stratified", seed=7)
    assert first != designs.draw(units, 100, "stratified", seed=8)
    by_stratum: dict[str, list[designs.Draw]] = {}
    for item in first:
        by_stratum.setdefault(item.stratum, []).append(item)
    # p3 (10 facts) would get one label: it is pooled with the next smallest stratum.
    assert set(by_stratum) == {"p1", designs.OTHER}
    assert len(first) == 100 and len({d.fact_id for d in first}) == 100
    assert sum(d.weight for d in first) == pytest.approx(1000)
    srs = designs.draw(units, 50, "srs", seed=1)
    assert {d.weight for d in srs} == {20.0}


def test_twcs_draws_clusters_with_replacement_up_to_m_facts() -> None:
    units = [designs.Unit(str(i), cluster=f"s{i % 40}") for i in range(400)]
    draws = designs.draw(units, 60, "twcs", seed=3, cluster_size=3)
    assert len(draws) == 60
    per_draw: dict[str, set[str]] = {}
    for item in draws:
        per_draw.setdefault(item.cluster, set()).add(item.fact_id)
    assert len(per_draw) == 20 and all(len(v) == 3 for v in per_draw.values())
    # Every draw's facts share one subject.
    assert all(len({int(f) % 40 for f in v}) == 1 for v in per_draw.values())


def test_design_errors() -> None:
    units = [designs.Unit(str(i)) for i in range(5)]
    with pytest.raises(designs.DesignError, match="cannot draw 6 facts from 5"):
        designs.draw(units, 6)
    with pytest.raises(designs.DesignError, match="unknown design 'cluster'"):
        designs.draw(units, 2, "cluster")
