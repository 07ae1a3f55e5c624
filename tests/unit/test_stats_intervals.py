"""Intervals on every score: summary.json and tables with --ci, checked against sklearn/scipy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import bootstrap
from sklearn.metrics import accuracy_score, f1_score
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.runfolder import read_verdicts
from kgcheck.evals.stats.bootstrap import SCORES
from kgcheck.evals.stats.tables import pair_intervals, run_intervals
from kgcheck.runs.runner import SummaryTally
from tests.support.stats_runs import make_replay_run

runner = CliRunner()


def test_run_with_ci_puts_intervals_in_the_summary(tmp_path: Path) -> None:
    out = make_replay_run(tmp_path / "run", "gemma2:9b", limit=150, extra=("--ci",))
    summary = json.loads((out / "summary.json").read_text())
    intervals = summary["intervals"]
    records = list(read_verdicts(out / "verdicts.jsonl").values())
    gold = [r["gold"] for r in records]
    pred = [r["label"] for r in records]
    f1_t, f1_f = f1_score(gold, pred, labels=["T", "F"], average=None)
    expected = {"accuracy": accuracy_score(gold, pred), "f1_true": f1_t, "f1_false": f1_f,
                "macro_f1": f1_score(gold, pred, labels=["T", "F"], average="macro")}
    assert intervals["n"] == 150 and intervals["confidence"] == 0.95
    for key in SCORES:
        assert intervals[key]["estimate"] == pytest.approx(expected[key])
        assert intervals[key]["estimate"] == pytest.approx(summary[key])
        assert intervals[key]["low"] < intervals[key]["estimate"] < intervals[key]["high"]
    assert run_intervals(records) == intervals  # the same seed, the same intervals
    # The verdicts in any order, or their tally's counts (a sharded run's): the same.
    assert run_intervals(records[::-1]) == intervals
    tally = SummaryTally(["gemma2:9b"])
    for record in records:
        tally.add(record)
    assert pair_intervals(tally.gold_pairs()) == intervals
    right = (np.array(gold) == np.array(pred)).astype(float)
    ref = bootstrap((right,), np.mean, n_resamples=10_000, method="percentile",
                    random_state=0).confidence_interval
    assert intervals["accuracy"]["low"] == pytest.approx(ref.low, abs=0.01)
    assert intervals["accuracy"]["high"] == pytest.approx(ref.high, abs=0.01)


def test_a_run_without_ci_has_no_intervals(tmp_path: Path) -> None:
    out = make_replay_run(tmp_path / "run", "gemma2:9b", limit=20)
    assert "intervals" not in json.loads((out / "summary.json").read_text())


def test_reproduce_keeps_the_point_values_and_adds_intervals_when_asked(tmp_path: Path
                                                                      ) -> None:
    plain, with_ci = tmp_path / "plain", tmp_path / "ci"
    for out, extra in ((plain, []), (with_ci, ["--ci"])):
        result = runner.invoke(app, ["reproduce", "--datasets", "FactBench", "--out", str(out),
                                     "--no-plots", *extra])
        assert result.exit_code == 0, result.output
    points = json.loads((plain / "tables.json").read_text())
    both = json.loads((with_ci / "tables.json").read_text())
    assert [r for r in both if r["table"] != "intervals"] == points
    assert not any(r["table"] == "intervals" for r in points)
    intervals = [r for r in both if r["table"] == "intervals"]
    f1 = {(r["method"], r["model"]): r for r in points if r["table"] == "f1"}
    for record in intervals:
        if record["model"] in {m for _, m in f1}:
            table5 = f1[(record["method"], record["model"])]
            assert record["f1_true"]["estimate"] == pytest.approx(table5["f1_true"])
            assert record["f1_false"]["estimate"] == pytest.approx(table5["f1_false"])
            assert record["n"] == table5["n"]
    assert any(r["model"].startswith("consensus") for r in intervals)
    tables = (with_ci / "tables.md").read_text()
    assert "## 95% bootstrap intervals" in tables
    assert "bootstrap intervals" not in (plain / "tables.md").read_text()


def test_report_with_ci_adds_intervals(tmp_path: Path) -> None:
    run = make_replay_run(tmp_path / "run", "gemma2:9b", limit=60)
    result = runner.invoke(app, ["report", str(run), "--out", str(tmp_path / "rep"),
                                 "--no-plots", "--ci"])
    assert result.exit_code == 0, result.output
    records = json.loads((tmp_path / "rep" / "tables.json").read_text())
    (interval,) = [r for r in records if r["table"] == "intervals"]
    assert interval["n"] == 60 and interval["source"] == "run"
