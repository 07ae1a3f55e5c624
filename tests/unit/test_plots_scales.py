"""The figures' scales: bars from zero, F1 from 0 to 1, time from 0; study models tagged."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from kgcheck.evals.study.plots import correct_matrix, f1_ranked_figure, time_f1_figure
from kgcheck.evals.study.tables import MethodResults, ModelAnswers


def _f1(method: str, model: str, f1_t: float, f1_f: float) -> dict:
    return {"table": "f1", "dataset": "YAGO", "method": method, "model": model,
            "f1_true": f1_t, "f1_false": f1_f, "n": 100, "invalid": 0, "source": "study"}


def _time(method: str, model: str, seconds: float) -> dict:
    return {"table": "time", "dataset": "YAGO", "method": method, "model": model,
            "mean_seconds": seconds, "source": "study"}


# Close scores and times: a zoomed axis would make them look far apart.
RECORDS = [_f1("DKA", "a", 0.951, 0.0042), _f1("DKA", "b", 0.953, 0.0047),
           _time("DKA", "a", 0.0473), _time("DKA", "b", 0.0478)]


def test_ranked_f1_bars_start_at_zero_on_a_fixed_0_to_1_axis() -> None:
    fig = f1_ranked_figure(RECORDS, "YAGO", true_share=0.98)
    assert fig is not None
    try:
        for ax in fig.axes:
            assert ax.get_xlim() == pytest.approx((0.0, 1.0))
            assert all(patch.get_x() == 0 for patch in ax.patches)
    finally:
        plt.close(fig)


def test_time_against_f1_starts_time_at_zero_and_keeps_f1_0_to_1() -> None:
    fig = time_f1_figure(RECORDS, "YAGO")
    assert fig is not None
    try:
        for ax in fig.axes:
            left, right = ax.get_xlim()
            assert left == 0 and right >= 0.0478
            assert ax.get_ylim() == pytest.approx((0.0, 1.0))
    finally:
        plt.close(fig)


def test_upset_names_study_models_beside_your_runs() -> None:
    gold = {"f1": True, "f2": False}
    study = MethodResults("YAGO", "DKA", gold, [ModelAnswers("gemma2:9b", {"f1": "T", "f2": "F"})])
    mine = MethodResults("YAGO", "DKA", gold,
                         [ModelAnswers("replay:gemma2:9b", {"f1": "T", "f2": "T"})],
                         source="my-run")
    assert list(correct_matrix([study, mine]).columns) == ["gemma2:9b (study)",
                                                           "replay:gemma2:9b"]
    # The study alone needs no tag, as in the tables.
    assert list(correct_matrix([study]).columns) == ["gemma2:9b"]
