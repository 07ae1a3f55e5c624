"""A run's summary figures from counts: tallies of parts of a run merge into the run's tally.

A sharded run's driver merges the tallies its shards write; the figures must be those one
tally of every verdict gives, whatever the order the verdicts came in.
"""

from __future__ import annotations

import json
import random
from typing import Any

from kgcheck.evals.metrics import classification_report, key_counts, score_counts, score_summary
from kgcheck.runs.runner import SummaryTally

PREDICATES = ("birthPlace", "deathPlace", "spouse", None)


def _records(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        label = rng.choice(("T", "F", "NA", "NEI", "T", "F"))
        record: dict[str, Any] = {
            "fact_id": str(i), "label": label, "predicate": rng.choice(PREDICATES),
            "gold": rng.choice(("T", "F", None, "T")), "tokens_in": rng.randint(10, 90),
            "tokens_out": rng.randint(1, 5), "seconds": rng.random(),
        }
        if rng.random() < 0.6:
            # Few distinct values: ties, which a curve must order the same way every time.
            record["confidence"] = rng.choice((0.1, 0.5, 0.7, 0.7, 0.9, rng.random()))
            record["confidence_source"] = rng.choice(("logprobs", "votes"))
        if rng.random() < 0.1:
            record["error"] = "the server went away"
            record["label"] = "NA"
        if rng.random() < 0.1:
            record["answer_problems"] = ["sample 1: invented passage 'p9'"]
        records.append(record)
    return records


def _figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    tally = SummaryTally(["ollama:m"])
    for record in records:
        tally.add(record)
    figures = tally.figures()
    figures.pop("mean_model_seconds")  # a float sum: its last bits follow the order
    return figures


def test_merged_tallies_give_the_figures_of_one_tally() -> None:
    records = _records(400, seed=1)
    whole = _figures(records)
    cuts = [0, 13, 13, 150, 333, 400]  # an empty part too
    merged = SummaryTally(["ollama:m"])
    for start, end in zip(cuts, cuts[1:], strict=False):
        part = SummaryTally(["ollama:m"])
        for record in records[start:end]:
            part.add(record)
        # Through JSON, as a shard's done marker carries it.
        merged.merge(SummaryTally.from_state(["ollama:m"], json.loads(json.dumps(
            part.state()))))
    figures = merged.figures()
    figures.pop("mean_model_seconds")
    assert figures == whole
    assert whole["calibration"]["scores"]["n"] > 100 and whole["by_predicate"]


def test_the_figures_do_not_depend_on_the_order_of_the_records() -> None:
    records = _records(300, seed=2)
    shuffled = records[:]
    random.Random(5).shuffle(shuffled)
    assert _figures(records) == _figures(shuffled)


def _reference(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The scores written out by hand: counts over the labelled records."""
    labelled = [r for r in records if r["gold"] in ("T", "F")]
    tp = sum(r["gold"] == "T" and r["label"] == "T" for r in labelled)
    fp = sum(r["gold"] == "F" and r["label"] == "T" for r in labelled)
    fn = sum(r["gold"] == "T" and r["label"] != "T" for r in labelled)
    right = sum(r["label"] == r["gold"] for r in labelled)
    per = {}
    for p in {r["predicate"] for r in records if r["predicate"] is not None}:
        mine = [r for r in records if r["predicate"] == p]
        per[p] = (len(mine), sum(r["label"] == "F" for r in mine) / len(mine))
    return {"f1_true": 2 * tp / (2 * tp + fp + fn), "accuracy": right / len(labelled),
            "scored": len(labelled), "per": per,
            "nei": sum(r["label"] == "NEI" for r in records)}


def test_scores_from_counts_are_the_scores_of_the_records() -> None:
    records = _records(250, seed=3)
    found = score_summary(records)
    expected = _reference(records)
    assert found == score_counts(key_counts(records))
    assert found["f1_true"] == expected["f1_true"]
    assert found["accuracy"] == expected["accuracy"]
    assert found["scored"] == expected["scored"] and found["nei"] == expected["nei"]
    assert {r["predicate"]: (r["n"], r["judged_false"]) for r in found["by_predicate"]} == \
        expected["per"]
    labelled = [r for r in records if r["gold"] in ("T", "F")]
    report = classification_report([r["gold"] == "T" for r in labelled],
                                   [r["label"] for r in labelled])
    assert {k: found[k] for k in ("f1_false", "macro_f1", "balanced_accuracy")} == {
        k: report[k] for k in ("f1_false", "macro_f1", "balanced_accuracy")}
