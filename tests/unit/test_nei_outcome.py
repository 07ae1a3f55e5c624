"""Not enough evidence (NEI): the abstaining variants, their parsers, metrics and consumers."""

from __future__ import annotations

import pytest
from sklearn.metrics import accuracy_score, f1_score

from kgcheck.data.facts import Fact
from kgcheck.data.runfolder import record_problem
from kgcheck.evals.accuracy.estimators import VERDICT_SCORE
from kgcheck.evals.export import parse_only
from kgcheck.evals.metrics import by_predicate, classification_report, score_summary
from kgcheck.graphs.parsing import read_with
from kgcheck.graphs.registry import get_strategy
from kgcheck.graphs.votes import undecided

FACT = Fact(id="x1", dataset="YAGO", subject="Jaya_Bachchan", predicate="isMarriedTo",
            object="Amitabh_Bachchan")


@pytest.mark.parametrize(("parser", "answer", "label"), [
    ("strict-nei", "NEI", "NEI"),
    ("strict-nei", "Answer: not enough information", "NEI"),
    ("strict-nei", "T", "T"),
    ("strict-nei", "T\nNEI", "NA"),
    ("strict-nei", "I wonder", "NA"),
    ("yes-no-nei-json", '{"output": "not enough evidence"}', "NEI"),
    ("yes-no-nei-json", '{"output": "no"}', "F"),
    ("yes-no-nei-json", '{"output": "yes"} {"output": "nei"}', "NA"),
    # The study's parsers never give NEI: an abstention is not a T/F verdict there.
    ("strict", "NEI", "NA"),
    ("yes-no-json", '{"output": "not enough evidence"}', "NA"),
])
def test_parsers_read_nei_only_in_the_variants(parser, answer, label):
    assert read_with(parser, answer).label == label


@pytest.mark.parametrize("name", ["dka", "giv-z", "giv-f", "rag", "dka-sc"])
def test_defaults_stay_the_study_and_abstain_switches_prompt_and_parser(name):
    strategy = get_strategy(name)
    plain = strategy.make_context()
    assert "nei" not in plain.prompt and "nei" not in plain.parser
    switched = strategy.make_context(abstain=True)
    assert "nei" in switched.prompt and switched.parser.endswith(("nei", "nei-json"))
    # A prompt chosen by the caller is kept.
    assert strategy.make_context(abstain=True, prompt="mine.txt").prompt == "mine.txt"


async def test_dka_abstains_with_the_variant(scripted):
    ctx = get_strategy("dka").make_context(model=scripted("nei-dka", ["NEI"]), abstain=True)
    out = await get_strategy("dka").compile().ainvoke({"fact": FACT.as_input()}, context=ctx)
    assert out["verdict"]["label"] == "NEI"
    assert "NEI" in out["verdict"]["conversation"][0]["content"]  # the variant's prompt


async def test_giv_accepts_nei_as_compliant(scripted):
    ctx = get_strategy("giv-z").make_context(model=scripted("nei-giv", ["maybe", "NEI"]),
                                             abstain=True)
    out = await get_strategy("giv-z").compile().ainvoke({"fact": FACT.as_input()}, context=ctx,
                                                        config={"recursion_limit": 30})
    verdict = out["verdict"]
    assert verdict["label"] == "NEI" and verdict["attempts"] == 2
    assert "NEI (not enough evidence" in verdict["conversation"][3]["content"]


def test_undecided_votes():
    assert undecided(["NEI", "NEI", "NA"]) == "NEI"
    assert undecided(["T", "F", "NEI"]) == "NA"
    assert undecided(["NA", "NA"]) == "NA"


def test_record_with_nei_is_a_verdict():
    assert record_problem({"fact_id": "1", "label": "NEI"}) is None
    assert record_problem({"fact_id": "1", "label": "X"}) is not None


def test_coverage_and_covered_scores_against_scikit_learn():
    gold = [True, True, False, False, True, False, True, False]
    pred = ["T", "NEI", "F", "T", "NA", "NEI", "T", "F"]
    report = classification_report(gold, pred)
    assert report["nei"] == 2
    assert report["coverage"] == pytest.approx(6 / 8)
    kept = [(g, p) for g, p in zip(gold, pred, strict=True) if p != "NEI"]
    y = ["T" if g else "F" for g, _ in kept]
    yhat = [p for _, p in kept]
    assert report["accuracy_covered"] == pytest.approx(accuracy_score(y, yhat))
    assert report["f1_true_covered"] == pytest.approx(
        f1_score(y, yhat, labels=["T"], average="macro", zero_division=0))
    assert report["f1_false_covered"] == pytest.approx(
        f1_score(y, yhat, labels=["F"], average="macro", zero_division=0))
    # The study's F1 counts NEI as it counts NA: a miss for its gold class.
    as_na = classification_report(gold, ["NA" if p == "NEI" else p for p in pred])
    assert (report["f1_true"], report["f1_false"]) == (as_na["f1_true"], as_na["f1_false"])
    y_all = ["T" if g else "F" for g in gold]
    assert report["f1_true"] == pytest.approx(
        f1_score(y_all, pred, labels=["T"], average="macro", zero_division=0))


def test_per_predicate_and_summary_coverage():
    records = [{"predicate": "p", "label": "T", "gold": "T"},
               {"predicate": "p", "label": "NEI", "gold": "F"},
               {"predicate": "q", "label": "F", "gold": "F"}]
    rows = {r["predicate"]: r for r in by_predicate(records)}
    assert rows["p"]["coverage"] == pytest.approx(0.5) and rows["p"]["nei"] == 1
    assert rows["p"]["accuracy_covered"] == pytest.approx(1.0)
    assert rows["q"]["coverage"] == pytest.approx(1.0)
    summary = score_summary(records)
    assert summary["nei"] == 1 and summary["coverage"] == pytest.approx(2 / 3)


def test_nei_is_for_review_not_deletion():
    assert parse_only("F") == ("F",)
    assert parse_only("nei,F") == ("NEI", "F")
    assert VERDICT_SCORE["NEI"] == VERDICT_SCORE["NA"] == 0.5
