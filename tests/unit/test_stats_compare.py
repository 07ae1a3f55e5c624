"""Paired comparison of runs: McNemar against statsmodels, bootstrap against sklearn/scipy."""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import bootstrap
from sklearn.metrics import accuracy_score, f1_score
from statsmodels.stats.contingency_tables import mcnemar
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.runfolder import read_verdicts
from kgcheck.evals.stats.bootstrap import SCORES, paired_intervals, score_intervals
from kgcheck.evals.stats.paired import compare_runs, mcnemar_counts, mcnemar_exact
from tests.support.stats_runs import MODELS, make_replay_run

runner = CliRunner()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("compare")
    return tuple(make_replay_run(root / m.replace(":", "_"), m) for m in MODELS)  # type: ignore[return-value]


def _sk_scores(gold: list[str], pred: list[str]) -> dict[str, float]:
    f1_t, f1_f = f1_score(gold, pred, labels=["T", "F"], average=None)
    return {"accuracy": accuracy_score(gold, pred), "f1_true": f1_t, "f1_false": f1_f,
            "macro_f1": f1_score(gold, pred, labels=["T", "F"], average="macro")}


def _random_labels(rng: np.random.Generator, n: int) -> tuple[list[str], list[str], list[str]]:
    gold = list(rng.choice(["T", "F"], size=n))
    a = [g if rng.random() < 0.75 else rng.choice(["T", "F", "NA"]) for g in gold]
    b = [g if rng.random() < 0.65 else rng.choice(["T", "F", "NA", "NEI"]) for g in gold]
    return gold, a, b


@pytest.mark.parametrize("seed", range(8))
def test_mcnemar_p_value_equals_statsmodels_exact(seed: int) -> None:
    rng = np.random.default_rng(seed)
    gold, a, b = _random_labels(rng, int(rng.integers(5, 200)))
    n_b, n_c = mcnemar_counts(gold, a, b)
    right_a = [x == g for g, x in zip(gold, a, strict=True)]
    right_b = [y == g for g, y in zip(gold, b, strict=True)]
    table = [[sum(x and y for x, y in zip(right_a, right_b, strict=True)), n_b],
             [n_c, sum(not x and not y for x, y in zip(right_a, right_b, strict=True))]]
    assert mcnemar_exact(n_b, n_c) == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)


def test_mcnemar_edge_counts_equal_statsmodels() -> None:
    for b, c in [(0, 0), (0, 7), (5, 5), (1, 30), (200, 150)]:
        expected = mcnemar([[3, b], [c, 4]], exact=True).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("seed", range(5))
def test_point_estimates_equal_sklearn(seed: int) -> None:
    gold, a, b = _random_labels(np.random.default_rng(seed), 150)
    single = score_intervals(gold, a, resamples=200)
    deltas = paired_intervals(gold, a, b, resamples=200)
    sk_a, sk_b = _sk_scores(gold, a), _sk_scores(gold, b)
    for key in SCORES:
        assert single[key].estimate == pytest.approx(sk_a[key], abs=1e-12)
        assert deltas[key].estimate == pytest.approx(sk_a[key] - sk_b[key], abs=1e-12)


def test_intervals_are_reproducible_by_seed() -> None:
    gold, a, b = _random_labels(np.random.default_rng(3), 300)
    first = paired_intervals(gold, a, b, seed=11)
    assert paired_intervals(gold, a, b, seed=11) == first
    assert paired_intervals(gold, a, b, seed=12) != first


def test_paired_interval_matches_scipy_percentile_bootstrap() -> None:
    # scipy resamples the facts themselves; the counts resampling must agree up to
    # Monte Carlo error.
    gold, a, b = _random_labels(np.random.default_rng(5), 400)
    ga, pa, pb = np.array(gold), np.array(a), np.array(b)

    def delta_accuracy(g: np.ndarray, x: np.ndarray, y: np.ndarray, axis: int = -1
                       ) -> np.ndarray:
        return (x == g).mean(axis=axis) - (y == g).mean(axis=axis)

    def delta_f1_true(g: np.ndarray, x: np.ndarray, y: np.ndarray, axis: int = -1
                      ) -> np.ndarray:
        def f1(p: np.ndarray) -> np.ndarray:
            tp = ((g == "T") & (p == "T")).sum(axis=axis)
            fp = ((g != "T") & (p == "T")).sum(axis=axis)
            fn = ((g == "T") & (p != "T")).sum(axis=axis)
            return 2 * tp / (2 * tp + fp + fn)
        return f1(x) - f1(y)

    ours = paired_intervals(gold, a, b, resamples=10_000, seed=1)
    for key, stat in (("accuracy", delta_accuracy), ("f1_true", delta_f1_true)):
        ref = bootstrap((ga, pa, pb), stat, paired=True, vectorized=True, n_resamples=10_000,
                        method="percentile", random_state=2).confidence_interval
        assert ours[key].low == pytest.approx(ref.low, abs=0.01)
        assert ours[key].high == pytest.approx(ref.high, abs=0.01)


def test_paired_intervals_cover_the_true_difference_at_their_nominal_rate() -> None:
    # A population of (gold, A, B) cells with known shares: the true difference of each
    # score is computed from the shares; each trial draws 200 facts and bootstraps them.
    rng = np.random.default_rng(2026)
    cells = list(product("TF", ("T", "F", "NA"), ("T", "F", "NA")))
    shares = rng.dirichlet(np.ones(len(cells)))
    for i, (g, x, y) in enumerate(cells):
        shares[i] *= 1 + 6 * (x == g) + 3 * (y == g)  # both runs mostly right, A more so
    shares /= shares.sum()
    big = np.round(shares * 1_000_000).astype(int)
    population = [c for c, k in zip(cells, big, strict=True) for _ in range(k)]
    gold_p, a_p, b_p = (list(col) for col in zip(*population, strict=True))
    truth_a, truth_b = _sk_scores(gold_p, a_p), _sk_scores(gold_p, b_p)
    trials, covered = 300, dict.fromkeys(SCORES, 0)
    for trial in range(trials):
        sample = rng.choice(len(cells), size=200, p=big / big.sum())
        gold = [cells[i][0] for i in sample]
        a = [cells[i][1] for i in sample]
        b = [cells[i][2] for i in sample]
        deltas = paired_intervals(gold, a, b, resamples=2_000, seed=trial)
        for key in SCORES:
            true_delta = truth_a[key] - truth_b[key]
            covered[key] += deltas[key].low <= true_delta <= deltas[key].high  # type: ignore[operator]
    rates = {k: v / trials for k, v in covered.items()}
    print("coverage of 95% paired intervals over", trials, "trials:", rates)
    # 300 trials: the rate's standard error is about 0.013 at 0.95.
    for key, rate in rates.items():
        assert 0.91 <= rate <= 0.985, (key, rate)


def test_compare_runs_on_recorded_runs(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    result = compare_runs(a, b, resamples=2_000)
    va, vb = read_verdicts(a / "verdicts.jsonl"), read_verdicts(b / "verdicts.jsonl")
    facts = sorted(va)
    assert result.facts == len(facts) == 120
    gold = [va[f]["gold"] for f in facts]
    sk_a = _sk_scores(gold, [va[f]["label"] for f in facts])
    sk_b = _sk_scores(gold, [vb[f]["label"] for f in facts])
    for key in SCORES:
        assert result.delta[key].estimate == pytest.approx(sk_a[key] - sk_b[key])
        assert result.delta[key].low <= result.delta[key].estimate <= result.delta[key].high
    assert {d["fact_id"] for d in result.disagreements} == {
        f for f in facts if va[f]["label"] != vb[f]["label"]}
    assert result.b == sum(va[f]["label"] == va[f]["gold"] != vb[f]["label"] for f in facts)


def test_cli_compare_writes_the_json_shape(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_runs
    out = tmp_path / "cmp.json"
    result = runner.invoke(app, ["compare", str(a), str(b), "--json", str(out),
                                 "--resamples", "1000", "--disagreements",
                                 str(tmp_path / "d.csv")])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert set(data) == {"facts", "mcnemar", "delta", "confidence"}
    assert set(data["mcnemar"]) == {"b", "c", "p_value"}
    assert set(data["delta"]) == {"accuracy", "f1_true", "f1_false", "macro_f1"}
    assert all(set(v) == {"estimate", "low", "high"} for v in data["delta"].values())
    assert data["confidence"] == 0.95
    assert "McNemar exact test" in result.output
    rows = (tmp_path / "d.csv").read_text().splitlines()
    assert rows[0] == "fact_id,subject,predicate,object,truth,a,b"
    assert len(rows) - 1 == sum(1 for line in result.output.splitlines()
                                if "facts answered differently" in line
                                for _ in range(int(line.split()[0].replace(",", ""))))


def test_cli_compare_refuses_runs_with_no_shared_facts(two_runs: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    other = make_replay_run(tmp_path / "yago", "gemma2:9b", limit=5, dataset="yago")
    result = runner.invoke(app, ["compare", str(two_runs[0]), str(other)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "share no facts" in lines[0], result.output


def test_cli_compare_refuses_a_folder_that_is_no_run(two_runs: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    result = runner.invoke(app, ["compare", str(two_runs[0]), str(tmp_path)])
    assert result.exit_code == 2
    assert "not a kgcheck run folder" in result.output
    assert "Traceback" not in result.output
