"""One label-word parser: the same vocabulary in triples files, gold files and labels files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgcheck.data.gold import read_gold
from kgcheck.data.labels import LabelsError, label_word, read_labels
from kgcheck.data.sources import TriplesError
from kgcheck.data.triples import read_triples

TRUE = ["T", "true", "1", "yes", "y", "correct", " Correct "]
FALSE = ["F", "false", "0", "no", "n", "incorrect", "INCORRECT"]
NONE = ["", "idk", "na", "N/A", "skip", "skipped", "unknown", "?"]
WORDS = [*TRUE, *FALSE, *NONE]
EXPECTED = [True] * len(TRUE) + [False] * len(FALSE) + [None] * len(NONE)


def test_the_vocabulary_and_json_values() -> None:
    assert [label_word(w, "x") for w in WORDS] == EXPECTED
    assert [label_word(v, "x") for v in (True, False, 1, 0, 1.0, None)] == [
        True, False, True, False, True, None]
    with pytest.raises(LabelsError, match=r"^x: unknown label 'maybe'; use T/F, true/false, "
                                          "1/0, yes/no, correct/incorrect, or idk/na/skip"):
        label_word("maybe", "x")
    with pytest.raises(TriplesError, match="unknown label 2"):
        label_word(2, "x", TriplesError)


def test_a_triples_file_reads_every_word(tmp_path: Path) -> None:
    rows = "".join(f"S{i},p,O{i},{w}\n" for i, w in enumerate(WORDS))
    (tmp_path / "kg.csv").write_text("subject,predicate,object,label\n" + rows)
    assert [f.label for f in read_triples(tmp_path / "kg.csv")] == EXPECTED


def test_a_gold_file_reads_every_word_and_refuses_no_label(tmp_path: Path) -> None:
    words = [*TRUE, *FALSE]
    rows = "".join(f"{i},{w}\n" for i, w in enumerate(words))
    (tmp_path / "gold.csv").write_text("id,label\n" + rows)
    gold = read_gold(tmp_path / "gold.csv")
    assert [gold.by_id[str(i)] for i in range(len(words))] == EXPECTED[:len(words)]
    (tmp_path / "idk.csv").write_text("id,label\n1,T\n2,idk\n")
    with pytest.raises(TriplesError, match=r"idk.csv, row 3: missing label \('idk' is no "
                                           r"label; give T or F\)"):
        read_gold(tmp_path / "idk.csv")


def test_a_labels_file_reads_every_word(tmp_path: Path) -> None:
    rows = "".join(f"f{i},{w}\n" for i, w in enumerate(WORDS))
    (tmp_path / "labels.csv").write_text("fact_id,label\n" + rows)
    read = read_labels(tmp_path / "labels.csv")
    assert [r.true for r in read.rows] == [e for e in EXPECTED if e is not None]
    assert read.unlabeled == len(NONE)
