"""The strict verdict parser: clear T/F answers pass, prose, both and neither give NA."""

from __future__ import annotations

import pytest

from kgcheck.graphs.parsing import (
    BOTH,
    EMPTY,
    NO_VERDICT,
    UNDECIDED,
    parse_verdict,
    read_verdict,
)

ACCEPTED = [
    ("T", "T"),
    ("F", "F"),
    ("T \n", "T"),
    ("F \n", "F"),
    ("t", "T"),
    ("**F**", "F"),
    ("`T`", "T"),
    ("'F'", "F"),
    ("T.", "T"),
    ("[T]", "T"),
    ("True", "T"),
    ("false", "F"),
    ("**True**", "T"),
    ("Judgment: T", "T"),
    ("Judgment: F \n", "F"),
    ("Judgement: T", "T"),
    ("judgment:T", "T"),
    ("Judgment: **F**", "F"),
    ("**Judgment**: T", "T"),
    ("**Judgment:** F", "F"),
    ("Answer: true", "T"),
    ("The answer is: F", "F"),
    ("Verdict - F", "F"),
    ("Reply: T", "T"),
    ("\n\n  T  \n\n", "T"),
    # A preamble, then the verdict on its own line.
    ("I'm ready to retry.\n\nJudgment: T", "T"),
    ("I'm ready to retry.\n\nJudgment: F", "F"),
    ("I will retry.\n\nJudgment: F", "F"),
    ("I'm ready to provide a compliant answer.\n\nJudgment: F", "F"),
    ("I apologize for my previous response. Here is a revised attempt:\n\nT", "T"),
    # A verdict, then an explanation that does not contradict it.
    ("Judgment: T\n\n(Note: Blake Lively is indeed married to Penn Badgley.)", "T"),
    ("Judgment: T\n\nUpon re-evaluation, my previous response was inaccurate. John Wayne was "
     "indeed married to Pilar Pallete. Therefore, the correct answer is \"T\".", "T"),
    ("F \n\nPlease provide the fact to judge. The input provided seems to be a passage.", "F"),
    ("Fact: Paris is the capital of France.\nJudgment: T", "T"),
    # The same verdict twice is still one verdict.
    ("Judgment: T\n\nFact: X servedAs Y\nJudgment: T", "T"),
    # DBpedia's `label` predicate in an echoed fact is not a labelled verdict.
    ("I'm ready to provide a compliant answer.\n\nFact: Projekt Herz label Independent\n"
     "Judgment: T", "T"),
]

REJECTED = [
    ("", EMPTY),
    ("   \n ", EMPTY),
    (None, EMPTY),
    ("NA", NO_VERDICT),
    ("NA \n", NO_VERDICT),
    ("N", NO_VERDICT),
    ("Maybe, it depends.", NO_VERDICT),
    # Upstream read anything starting with T as true.
    ("The fact is false", NO_VERDICT),
    ("True, but only in 1990; F otherwise", NO_VERDICT),
    ("T - Monica Bellucci was born there", NO_VERDICT),
    ("TF", NO_VERDICT),
    ("T/F", NO_VERDICT),
    ("T or F", NO_VERDICT),
    ("Judgment: T/F", NO_VERDICT),
    ("Judgment: T or F", NO_VERDICT),
    ("I do not have enough information to verify this fact.", NO_VERDICT),
    ("I don't have a fact to judge, only an abstract. If you meant the text, my answer "
     "would be \"T\".", NO_VERDICT),
    ("my answer: I am not sure", NO_VERDICT),
    # Both verdicts.
    ("T\nF", BOTH),
    ("True\n\nFalse", BOTH),
    ("Judgment: T\nJudgment: F", BOTH),
    ("Judgment: T\n\nOn reflection:\nF", BOTH),
    # An explicit refusal.
    ("Judgment: NA \n", UNDECIDED),
    ("Judgment: NA", UNDECIDED),
    ("Judgment: N", UNDECIDED),
    ("I don't have enough information to provide a judgment for this fact. \n\nJudgment: N",
     UNDECIDED),
    ("Judgment: NA\n\nT", UNDECIDED),
]


@pytest.mark.parametrize(("answer", "label"), ACCEPTED)
def test_clear_answers_give_their_label(answer: str, label: str) -> None:
    assert parse_verdict(answer) == label
    assert read_verdict(answer).problem is None
    assert read_verdict(answer).problem is None


@pytest.mark.parametrize(("answer", "problem"), REJECTED)
def test_unclear_answers_are_na_with_the_reason(answer: str | None, problem: str) -> None:
    assert parse_verdict(answer) == "NA"
    assert read_verdict(answer).problem is not None
    assert read_verdict(answer).problem == problem


def test_every_recorded_judge_answer_parses() -> None:
    """The judges' raw answers (REFERENCE.md section 4) all give T, F or NA, none raises."""
    from kgcheck.data.upstream import JUDGES_PATH, open_data

    rows = open_data().read_json(JUDGES_PATH)
    labels = {row["Answer"]: parse_verdict(row["Answer"]) for row in rows}
    assert set(labels.values()) == {"T", "F", "NA"}
    assert labels["T \n"] == "T"
    assert labels["Judgment: T \n"] == "T"
    assert labels["Judgment: NA \n"] == "NA"
    assert labels["I'm ready to retry.\n\nJudgment: T"] == "T"
    # Nearly all judge answers are clear; the unclear ones are a small minority.
    unclear = sum(1 for row in rows if labels[row["Answer"]] == "NA")
    assert 0 < unclear < 0.02 * len(rows)
