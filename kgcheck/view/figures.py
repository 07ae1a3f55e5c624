"""The runs page's figures, drawn by the study's plotting code from the explorer's index.

Per dataset: F1(T) and F1(F) ranked (figure 2), mean time against F1 with the Pareto
frontier (figure 3); per dataset and method with two models or more: the UpSet plot of
correct predictions (figure 4); per run whose verdicts carry a confidence: a reliability
diagram. Each is drawn once, on first request, and kept as PNG bytes.
"""

from __future__ import annotations

import io
import json
import threading
from typing import Any

from kgcheck.evals.report import disambiguate
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


class Figures:
    """The figures of the explorer's runs: what can be drawn, and each drawn once."""

    def __init__(self, explorer: Explorer) -> None:
        self.explorer = explorer
        self.lock = threading.Lock()
        self.drawn: dict[str, bytes | None] = {}
        self._results: list[MethodResults] | None = None
        self._known: set[str] | None = None

    def results(self) -> list[MethodResults]:
        """Every run as the tables' input (computed once)."""
        if self._results is None:
            results = [_results(self.explorer, r.number) for r in self.explorer.runs]
            disambiguate(results)  # one model in two runs: two columns, named by run
            self._results = results
        return self._results

    def available(self) -> list[dict[str, Any]]:
        """List the figures that apply to these runs: id and title."""
        results = self.results()
        items: list[dict[str, Any]] = []
        for dataset in dict.fromkeys(r.dataset for r in results):
            items.append({"id": f"f1:{dataset}", "title": f"{dataset}: F1 per class, ranked"})
            items.append({"id": f"time:{dataset}", "title": f"{dataset}: time against F1 "
                                                            "(Pareto frontier)"})
            mine = [r for r in results if r.dataset == dataset]
            for method in dict.fromkeys(r.method for r in mine):
                if sum(len(r.members) for r in mine if r.method == method) >= 2:
                    items.append({"id": f"upset:{dataset}:{method}",
                                  "title": f"{dataset} {method}: correct predictions (UpSet)"})
        for run in self.explorer.runs:
            if self.explorer.summary(run.number)["with_confidence"]:
                items.append({"id": f"calibration:{run.number}",
                              "title": f"{run.name}: calibration of its confidences"})
        return items

    def png(self, figure_id: str) -> bytes | None:
        """Return the figure's PNG (None: it does not apply, or there is nothing to draw)."""
        with self.lock:
            if self._known is None:
                self._known = {f["id"] for f in self.available()}
            if figure_id not in self._known:
                return None  # not drawn, not kept: only the figures listed are
            if figure_id not in self.drawn:
                self.drawn[figure_id] = self._draw(figure_id)
            return self.drawn[figure_id]

    def _draw(self, figure_id: str) -> bytes | None:
        from kgcheck.evals.study.plots import f1_ranked_figure, time_f1_figure, upset_figure

        kind, _, rest = figure_id.partition(":")
        results = self.results()
        fig = None
        if kind in ("f1", "time"):
            mine = [r for r in results if r.dataset == rest]
            if not mine:
                return None
            records = build_records(mine)
            fig = (f1_ranked_figure(records, rest, mine[0].true_share()) if kind == "f1"
                   else time_f1_figure(records, rest))
        elif kind == "upset":
            dataset, _, method = rest.partition(":")
            fig = upset_figure([r for r in results
                                if r.dataset == dataset and r.method == method])
        elif kind == "calibration" and rest.isdigit():
            fig = self._calibration(int(rest))
        if fig is None:
            return None
        import matplotlib.pyplot as plt

        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        return out.getvalue()

    def _calibration(self, number: int) -> Any:
        from kgcheck.evals.calibration import calibration_figure

        if not 0 <= number < len(self.explorer.runs):
            return None
        pairs = [(conf, label == truth) for _, label, truth, _, conf, _
                 in self.explorer.outcomes(number)
                 if conf is not None and truth in ("T", "F")]
        if not pairs:
            return None
        return calibration_figure([c for c, _ in pairs], [r for _, r in pairs],
                                  f"{self.explorer.run(number).name}: calibration")
