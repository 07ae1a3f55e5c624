"""Each metric on small hand-computed cases and edge cases."""

from __future__ import annotations

import math

import pytest

from kgcheck.evals.metrics import (
    MetricInputError,
    accuracy,
    balanced_accuracy,
    by_predicate,
    class_scores,
    classification_report,
    confusion,
    confusion_matrix,
    consensus_alignment,
    f1,
    f1_true_false,
    invalid_count,
    invalid_rate,
    iqr_filter,
    iqr_mean,
    macro_f1,
    precision,
    random_guess_f1,
    recall,
    tie_rate,
    token_totals,
)
from kgcheck.graphs.votes import decide, tally

# gold: T T T F F ; pred: T F NA T F
GOLD = [True, True, True, False, False]
PRED = ["T", "F", "NA", "T", "F"]


def test_counts_and_class_scores_by_hand() -> None:
    # T: tp=1 (fact 0), fp=1 (fact 3), fn=2 (facts 1 and the NA fact 2)
    assert confusion(GOLD, PRED, "T") == (1, 1, 2)
    # F: tp=1 (fact 4), fp=1 (fact 1), fn=1 (fact 3); the NA on a true fact is no F error
    assert confusion(GOLD, PRED, "F") == (1, 1, 1)
    t = class_scores(GOLD, PRED, "T")
    assert t == {"precision": 0.5, "recall": pytest.approx(1 / 3), "f1": pytest.approx(0.4)}
    f = class_scores(GOLD, PRED, "F")
    assert f == {"precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert f1_true_false(GOLD, PRED) == (pytest.approx(0.4), 0.5)


def test_precision_recall_f1_from_counts() -> None:
    assert precision(3, 1) == 0.75
    assert recall(3, 3) == 0.5
    assert f1(3, 1, 3) == pytest.approx(6 / 10)
    assert precision(0, 0) == recall(0, 0) == f1(0, 0, 0) == 0.0


def test_balanced_accuracy_and_invalid() -> None:
    assert balanced_accuracy(GOLD, PRED) == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert invalid_count(PRED) == 1
    assert invalid_rate(PRED) == pytest.approx(0.2)


def test_classification_report_keys_and_values() -> None:
    report = classification_report(GOLD + [None], PRED + ["T"])
    assert report["n"] == 5  # the unlabelled fact is skipped
    assert report["f1_true"] == pytest.approx(0.4)
    assert report["f1_false"] == 0.5
    assert report["precision_true"] == 0.5
    assert report["recall_true"] == pytest.approx(1 / 3)
    assert report["precision_false"] == 0.5
    assert report["recall_false"] == 0.5
    assert report["balanced_accuracy"] == pytest.approx(5 / 12)
    assert report["invalid"] == 1
    assert report["invalid_rate"] == pytest.approx(0.2)


def test_no_positives() -> None:
    gold = [False, False, False]
    pred = ["F", "T", "F"]
    # T is absent from the gold labels: no score ("-"), not 0.00.
    assert class_scores(gold, pred, "T") == {"precision": None, "recall": None, "f1": None}
    assert class_scores(gold, pred, "F")["f1"] == pytest.approx(0.8)
    # Only the class that occurs counts in balanced accuracy.
    assert balanced_accuracy(gold, pred) == pytest.approx(2 / 3)


def test_all_na() -> None:
    gold = [True, False, True]
    pred = ["NA", "NA", "NA"]
    assert f1_true_false(gold, pred) == (0.0, 0.0)
    assert balanced_accuracy(gold, pred) == 0.0
    assert invalid_count(pred) == 3
    assert invalid_rate(pred) == 1.0
    report = classification_report(gold, pred)
    assert report["invalid"] == 3 and report["f1_true"] == 0.0


def test_one_sample() -> None:
    assert f1_true_false([True], ["T"]) == (1.0, None)
    assert balanced_accuracy([True], ["T"]) == 1.0
    assert f1_true_false([False], ["T"]) == (None, 0.0)


def test_accuracy_macro_f1_and_confusion() -> None:
    gold = [True, True, True, False, False]
    pred = ["T", "F", "NA", "F", "T"]
    assert accuracy(gold, pred) == pytest.approx(2 / 5)
    f1_t, f1_f = f1_true_false(gold, pred)
    assert macro_f1(gold, pred) == pytest.approx((f1_t + f1_f) / 2)
    assert confusion_matrix(gold, pred) == {"T": {"T": 1, "F": 1, "NA": 1},
                                            "F": {"T": 1, "F": 1, "NA": 0}}
    # Unlabelled facts are skipped; with no labels there is nothing to score.
    assert accuracy([None, None], ["T", "F"]) is None
    assert macro_f1([None], ["T"]) is None
    # One gold class only: macro-F1 is that class's F1, the other class has none.
    assert macro_f1([True, True], ["T", "F"]) == pytest.approx(2 / 3)
    report = classification_report([True, True], ["T", "F"])
    assert (report["f1_false"], report["recall_false"], report["accuracy"]) == (None, None, 0.5)


def test_by_predicate_breakdown() -> None:
    records = [
        {"predicate": "bornIn", "label": "T", "gold": "T"},
        {"predicate": "bornIn", "label": "F", "gold": "T"},
        {"predicate": "bornIn", "label": "F", "gold": "F"},
        {"predicate": "diedIn", "label": "T", "gold": None},
        {"label": "T", "gold": "T"},  # an old record without its triple: left out
    ]
    rows = {r["predicate"]: r for r in by_predicate(records)}
    assert list(rows) == ["bornIn", "diedIn"]
    born = rows["bornIn"]
    assert (born["n"], born["scored"], born["na"]) == (3, 3, 0)
    assert born["judged_true"] == pytest.approx(1 / 3)
    assert born["accuracy"] == pytest.approx(2 / 3)
    assert born["f1_true"] == pytest.approx(2 / 3) and born["f1_false"] == pytest.approx(2 / 3)
    died = rows["diedIn"]
    assert (died["n"], died["judged_true"], died["scored"]) == (1, 1.0, 0)
    assert (died["accuracy"], died["f1_true"], died["f1_false"]) == (None, None, None)


def test_empty_and_mismatched_inputs() -> None:
    assert classification_report([], [])["n"] == 0
    assert invalid_rate([]) == 0.0
    with pytest.raises(MetricInputError, match="gold has 2 labels but pred has 1"):
        classification_report([True, False], ["T"])
    with pytest.raises(ValueError, match="class must be 'T' or 'F'"):
        confusion([True], ["T"], "NA")


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (["T", "T", "T", "F"], "T"),   # >= 3 T of 4
        (["T", "T", "T", "T"], "T"),
        (["T", "F", "F", "F"], "F"),   # <= 1 T of 4
        (["F", "F", "F", "F"], "F"),
        (["T", "T", "F", "F"], "tie"),  # 2-2
        (["T", "T", "F", "NA"], "T"),  # NA takes no side
        (["T", "F", "NA", "NA"], "tie"),
        (["NA", "NA", "NA", "NA"], "tie"),  # 0-0
        (["T", "F", "F"], "F"),        # N = 3
        (["T", "T", "T", "F", "F"], "T"),  # N = 5
        (["T", "T", "F", "F", "F", "T"], "tie"),  # N = 6, even split
        ([], "tie"),
    ],
)
def test_majority_vote(labels: list[str], expected: str) -> None:
    assert tally(labels)["decision"] == expected


def test_vote_counts_keep_na_apart() -> None:
    assert tally(["T", "NA", "F", "T"])["counts"] == {"T": 2, "F": 1, "NA": 1}


def test_decide_with_and_without_judge() -> None:
    assert decide(["T", "T", "T", "F"]) == "T"
    assert decide(["T", "T", "T", "F"], judge="F") == "T"  # judge only on ties
    assert decide(["T", "T", "F", "F"], judge="F") == "F"
    assert decide(["T", "T", "F", "F"], judge="NA") == "NA"
    assert decide(["T", "T", "F", "F"]) == "NA"


def test_alignment_and_tie_rate_by_hand() -> None:
    votes = [
        {"a": "T", "b": "T", "c": "T", "d": "F"},  # majority T: a b c agree
        {"a": "F", "b": "F", "c": "T", "d": "F"},  # majority F: a b d agree
        {"a": "T", "b": "T", "c": "F", "d": "F"},  # tie: out of CA
        {"a": "T", "b": "NA", "c": "T", "d": "T"},  # majority T: b's NA is not aligned
    ]
    assert tie_rate(votes) == 0.25
    ca = consensus_alignment(votes)
    assert ca == {"a": 1.0, "b": pytest.approx(2 / 3), "c": pytest.approx(2 / 3),
                  "d": pytest.approx(2 / 3)}


def test_alignment_edge_cases() -> None:
    assert tie_rate([]) == 0.0
    assert consensus_alignment([]) == {}
    all_ties = [{"a": "T", "b": "F"}, {"a": "F", "b": "T"}]
    assert tie_rate(all_ties) == 1.0
    assert consensus_alignment(all_ties) == {"a": 0.0, "b": 0.0}
    one = [{"a": "T", "b": "T", "c": "F"}]
    assert consensus_alignment(one) == {"a": 1.0, "b": 1.0, "c": 0.0}


def test_iqr_filter_and_mean_by_hand() -> None:
    times = [1.0, 2.0, 3.0, 4.0, 100.0]
    # numpy linear quartiles: Q1 = 2, Q3 = 4, IQR = 2 -> keep [-1, 7]
    assert iqr_filter(times) == [1.0, 2.0, 3.0, 4.0]
    assert iqr_mean(times) == 2.5
    # Q1 = 1.75, Q3 = 3.25 (linear interpolation), bounds [-0.5, 5.5]
    assert iqr_filter([1.0, 2.0, 3.0, 4.0]) == [1.0, 2.0, 3.0, 4.0]


def test_iqr_edge_cases() -> None:
    assert iqr_mean([]) is None
    assert iqr_filter([]) == []
    assert iqr_mean([0.7]) == 0.7  # one sample
    assert iqr_mean([0.3, 0.3, 0.3]) == pytest.approx(0.3)  # identical times: IQR 0
    # IQR 0 drops every time that differs from the bulk
    assert iqr_filter([0.3, 0.3, 0.3, 0.3, 0.9]) == [0.3, 0.3, 0.3, 0.3]
    assert iqr_mean([None, 1.0]) == 1.0  # type: ignore[list-item]


def test_token_totals() -> None:
    records = [{"tokens_in": 10, "tokens_out": 2}, {"tokens_in": None, "tokens_out": 3},
               {"other": 1}]
    assert token_totals(records) == {"tokens_in": 10, "tokens_out": 5}
    assert token_totals([{"tokens_in": None}]) == {"tokens_in": None, "tokens_out": None}
    assert token_totals([]) == {"tokens_in": None, "tokens_out": None}


def test_random_guess_f1() -> None:
    t, f = random_guess_f1(0.5)
    assert t == f == 0.5
    t, f = random_guess_f1(0.99)
    assert t == pytest.approx(0.99 / 1.49)
    assert f == pytest.approx(0.01 / 0.51)
    assert random_guess_f1(0.0) == (0.0, 1.0 / 1.5)
    assert not math.isnan(random_guess_f1(1.0)[1])
    with pytest.raises(ValueError, match="true_share"):
        random_guess_f1(1.5)
