"""Names drawn in figures are plain text: a name holding ``$`` and TeX is never mathtext."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgcheck.evals.figure_text import PLAIN_TEXT, plain_text

# Unbalanced TeX between two dollar signs: mathtext cannot parse it.
NAME = "x$\\undefinedcmd{$"


def _draw_every_figure(out: Path) -> list[Path]:
    from kgcheck.evals.accuracy.plots import plot_intervals, plot_width
    from kgcheck.evals.calibration_plots import plot_precision_coverage, plot_reliability
    from kgcheck.evals.errors.clusters import Clustering, scatter_plot
    from kgcheck.evals.leaderboard import plot_leaderboard

    report = {"ece": 0.1, "reliability": [{"mean_confidence": 0.3, "fraction_true": 0.4,
                                           "count": 3}],
              "precision_coverage": [{"coverage": 0.5, "precision": 0.9}]}
    paths = plot_reliability(report, out, "reliability", NAME)
    paths += plot_precision_coverage(report, out, "coverage", NAME)
    paths += plot_intervals([{"estimator": NAME, "accuracy": 0.8, "ci_low": 0.7,
                              "ci_high": 0.9, "n_labeled": 10}], out, title=NAME)
    paths += plot_width([{"n_labeled": 10, "human": 0.2, "ppi": 0.1}], out, title=NAME)
    paths += plot_leaderboard([{"macro_f1": 0.7, "cost": None, "tokens_in": 10,
                                "tokens_out": 2, "model_seconds_per_fact": 0.5,
                                "strategy": NAME, "model": NAME}], out)
    paths += scatter_plot(Clustering([0, 0, -1], [(0.0, 0.0), (1.0, 1.0), (2.0, 0.5)], {}),
                          {0: NAME}, out, "scatter")
    return paths


def test_every_figure_draws_names_holding_tex_as_text(tmp_path: Path) -> None:
    paths = _draw_every_figure(tmp_path)
    assert len(paths) == 12 and all(p.stat().st_size > 0 for p in paths)


def test_the_user_s_mathtext_settings_come_back_afterwards() -> None:
    import matplotlib

    before = {key: matplotlib.rcParams[key] for key in PLAIN_TEXT}
    seen = plain_text(lambda: {key: matplotlib.rcParams[key] for key in PLAIN_TEXT})()
    assert seen == PLAIN_TEXT
    assert {key: matplotlib.rcParams[key] for key in PLAIN_TEXT} == before


def test_without_plain_text_such_a_name_fails(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.set_title(NAME)
    try:
        with pytest.raises(ValueError):
            fig.savefig(tmp_path / "raw.png")
    finally:
        plt.close(fig)
