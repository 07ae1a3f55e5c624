"""Whether each study figure has something to draw, decided without drawing or matplotlib.

The drawing functions (``kgcheck.evals.study.plots``) return None when these find nothing,
and the run explorer lists a figure only when they find something, so both follow one
rule and a listed figure is always drawn. Nothing here imports matplotlib or pandas: a
listing stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kgcheck.evals.study.tables import STUDY, MethodResults, ModelAnswers

__all__ = ["f1_ranked_rows", "time_f1_points", "upset_drawable", "upset_members"]


def f1_ranked_rows(records: Sequence[dict[str, Any]], dataset: str) -> list[dict[str, Any]]:
    """Return the records figure 2 draws for a dataset; empty when there is nothing to draw."""
    rows = [r for r in records if r["dataset"] == dataset and r["table"] in ("f1", "consensus")]
    # Unlabelled facts (or a class the labels lack) have no score: nothing to draw, no 0 bars.
    if not any(r[key] is not None for r in rows for key in ("f1_true", "f1_false")):
        return []
    return rows


def time_f1_points(records: Sequence[dict[str, Any]], dataset: str
                   ) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], dict[str, Any]],
                              list[tuple[str, str]]]:
    """Return figure 3's mean times and scores by (method, model), and the pairs with both.

    No pair: there is nothing to draw.
    """
    times = {(r["method"], r["model"]): r["mean_seconds"] for r in records
             if r["table"] == "time" and r["dataset"] == dataset}
    scores = {(r["method"], r["model"]): r for r in records
              if r["table"] == "f1" and r["dataset"] == dataset}
    keys = [k for k in times if k in scores
            and (scores[k]["f1_true"] is not None or scores[k]["f1_false"] is not None)]
    return times, scores, keys


def _upset_columns(results: Sequence[MethodResults]) -> dict[str, ModelAnswers]:
    # Beside runs of your own, the study's models are named "<model> (study)".
    mixed = any(res.source != STUDY for res in results)
    return {(f"{m.model} (study)" if mixed and res.source == STUDY else m.model): m
            for res in results for m in res.members}


def _upset_facts(results: Sequence[MethodResults], members: dict[str, ModelAnswers]
                 ) -> list[str]:
    gold = results[0].gold if results else {}
    return [f for f in gold if gold[f] is not None
            and all(f in m.labels for m in members.values())]


def upset_members(results: Sequence[MethodResults]
                  ) -> tuple[dict[str, ModelAnswers], list[str]]:
    """Return figure 4's models by column name and the labelled facts every one answered.

    Beside runs of your own, the study's models are named ``<model> (study)``, as the
    tables name them.
    """
    members = _upset_columns(results)
    return members, _upset_facts(results, members)


def upset_drawable(results: Sequence[MethodResults]) -> bool:
    """Tell whether figure 4 has two models or more and a fact they all answered."""
    members = _upset_columns(results)
    return len(members) >= 2 and bool(_upset_facts(results, members))
