"""The runs page's figures, drawn by the study's plotting code from the explorer's index.

Per dataset: F1(T) and F1(F) ranked (figure 2), mean time against F1 with the Pareto
frontier (figure 3); per dataset and method with two models or more: the UpSet plot of
correct predictions (figure 4); per run whose verdicts carry a confidence and whose facts a
truth: a reliability diagram.

One rule decides which figures there are: a figure is listed when its inputs hold
something to draw (the same tests the drawing functions make), and only a listed figure is
drawn, once, on first request, and kept as PNG bytes. Names are drawn as plain text
(``kgcheck.evals.figure_text``).
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from kgcheck.evals.figure_text import plain_text_settings
from kgcheck.evals.report import disambiguate
from kgcheck.evals.study.drawable import f1_ranked_rows, time_f1_points, upset_drawable
from kgcheck.evals.study.tables import Consensus, MethodResults, ModelAnswers, build_records
from kgcheck.view.explorer import Explorer

__all__ = ["Figures"]

GOLD = {"T": True, "F": False}


def _results(explorer: Explorer, number: int) -> MethodResults:
    """Turn one run into the tables' input, as ``evals.report.run_results`` does."""
    run = explorer.run(number)
    dataset, method = str(run.info.get("dataset")), str(run.info.get("method"))
    models = [str(m) for m in run.info.get("models") or ["?"]]
    outcomes = explorer.outcomes(number)
    gold = {fid: GOLD.get(truth or "") for fid, _, truth, _, _, _ in outcomes}
    final = {fid: label for fid, label, *_ in outcomes}
    if len(models) == 1:
        seconds = {fid: s for fid, _, _, s, _, _ in outcomes if s}
        return MethodResults(dataset, method, gold, [ModelAnswers(models[0], final, seconds)],
                             voting=False, source=run.name)
    members = {m: ModelAnswers(m, {}, {}) for m in models}
    for fid, _, _, _, _, votes in outcomes:
        for model, label in (json.loads(votes) if votes else {}).items():
            members.setdefault(model, ModelAnswers(model, {}, {})).labels[fid] = label
    consensus = Consensus(judge=str(run.info.get("judge") or "none"), judge_model=None,
                          labels=final, on_ties_only=False)
    return MethodResults(dataset, method, gold, [m for m in members.values() if m.labels],
                         consensus=[consensus], voting=True, source=run.name)


def _f1_ranked(records: Any, dataset: str, share: Any) -> Any:
    return _plots().f1_ranked_figure(records, dataset, share)


def _time_f1(records: Any, dataset: str) -> Any:
    return _plots().time_f1_figure(records, dataset)


def _upset(results: Any) -> Any:
    return _plots().upset_figure(results)


@dataclass(frozen=True)
class Planned:
    """A figure that can be drawn: its title and how to draw it from inputs already checked."""

    title: str
    draw: Callable[[], Any]


class Figures:
    """The figures of the explorer's runs: which can be drawn, and each drawn once."""

    def __init__(self, explorer: Explorer) -> None:
        self.explorer = explorer
        self.lock = threading.Lock()
        self.drawn: dict[str, bytes] = {}
        self._results: list[MethodResults] | None = None
        self._plans: dict[str, Planned] | None = None

    def results(self) -> list[MethodResults]:
        """Every run as the tables' input (computed once)."""
        if self._results is None:
            results = [_results(self.explorer, r.number) for r in self.explorer.runs]
            disambiguate(results)  # one model in two runs: two columns, named by run
            self._results = results
        return self._results

    def plans(self) -> dict[str, Planned]:
        """Return the figures there is something to draw for, by id (worked out once)."""
        with self.lock:
            if self._plans is None:
                self._plans = self._plan()
            return self._plans

    def _plan(self) -> dict[str, Planned]:
        results = self.results()
        plans: dict[str, Planned] = {}
        for dataset in dict.fromkeys(r.dataset for r in results):
            mine = [r for r in results if r.dataset == dataset]
            records = build_records(mine)
            share = mine[0].true_share()
            if f1_ranked_rows(records, dataset):
                plans[f"f1:{dataset}"] = Planned(
                    f"{dataset}: F1 per class, ranked",
                    partial(_f1_ranked, records, dataset, share))
            if time_f1_points(records, dataset)[2]:
                plans[f"time:{dataset}"] = Planned(
                    f"{dataset}: time against F1 (Pareto frontier)",
                    partial(_time_f1, records, dataset))
            for method in dict.fromkeys(r.method for r in mine):
                same = [r for r in mine if r.method == method]
                if upset_drawable(same):
                    plans[f"upset:{dataset}:{method}"] = Planned(
                        f"{dataset} {method}: correct predictions (UpSet)",
                        partial(_upset, same))
        for run in self.explorer.runs:
            # Asked for one pair here, for all when drawn: the pairs are not kept in memory.
            if self.explorer.confidence_pairs(run.number, limit=1):
                plans[f"calibration:{run.number}"] = Planned(
                    f"{run.name}: calibration of its confidences",
                    partial(self._calibration_of, run.number, run.name))
        return plans

    def _calibration_of(self, number: int, name: str) -> Any:
        return _calibration(self.explorer.confidence_pairs(number), name)

    def available(self) -> list[dict[str, Any]]:
        """List the figures that can be drawn for these runs: id and title."""
        return [{"id": key, "title": plan.title} for key, plan in self.plans().items()]

    def png(self, figure_id: str) -> bytes | None:
        """Return a listed figure's PNG (None: no such figure)."""
        plan = self.plans().get(figure_id)
        if plan is None:
            return None  # not drawn, not kept: only the figures listed are
        with self.lock:
            if figure_id not in self.drawn:
                self.drawn[figure_id] = _png(plan.draw)
            return self.drawn[figure_id]


def _plots() -> Any:
    # Imported when a figure is drawn: matplotlib and pandas cost a listing time and memory.
    from kgcheck.evals.study import plots

    return plots


def _calibration(pairs: list[tuple[float, bool]], name: str) -> Any:
    from kgcheck.evals.calibration import calibration_figure

    return calibration_figure([c for c, _ in pairs], [r for _, r in pairs],
                              f"{name}: calibration")


def _png(draw: Callable[[], Any]) -> bytes:
    import matplotlib.pyplot as plt

    with plain_text_settings():  # texts drawn only when saved are plain text too
        fig = draw()
        try:
            out = io.BytesIO()
            fig.savefig(out, format="png", dpi=110, bbox_inches="tight")
        finally:
            plt.close(fig)
    return out.getvalue()
