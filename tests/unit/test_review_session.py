"""Reviews of a run folder: the queue, decisions that survive a restart and a crash, undo,
and the bad inputs (no verdicts, another run's labels, a second review of the same run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.data.runfolder import LABEL_COLUMNS as COLUMNS
from kgcheck.data.runfolder import LabelsError, read_labels
from kgcheck.review.session import ReviewError, ReviewSession, parse_only
from tests.support.review_runs import checkpoint_reviews, label_rows, make_run


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path / "run")


async def test_decisions_are_saved_as_made_and_survive_a_restart(run_dir: Path) -> None:
    async with kgcheck.open_review(run_dir, reviewer="ana") as review:
        assert [i.fact_id for i in review.items] == ["1", "2", "3", "4", "5", "6"]
        assert all(i.review is None for i in review.items)
        await review.decide("2", "F", "Berlin is")
        await review.decide("1", "T")
        await review.decide("3", "skip")
        assert [r["fact_id"] for r in label_rows(run_dir)] == ["2", "1", "3"]
        assert await review.undo() == "3"
        await review.decide("1", "F", "changed my mind")  # a new decision replaces the old
    rows = label_rows(run_dir)
    assert list(rows[0]) == list(COLUMNS)
    assert [(r["fact_id"], r["label"], r["note"], r["reviewer"]) for r in rows] == [
        ("2", "F", "Berlin is", "ana"), ("1", "F", "changed my mind", "ana")]
    # Threads exist for decided facts only: 3's was deleted by the undo.
    assert checkpoint_reviews(run_dir) == {"1": "F", "2": "F"}

    async with ReviewSession.open(run_dir) as review:
        assert review.progress() == {"total": 6, "decided": 2, "T": 0, "F": 2, "skip": 0}
        assert review.item("2").review["note"] == "Berlin is"
        assert await review.undo() == "1"  # the last decision, across the restart
    assert [r["fact_id"] for r in label_rows(run_dir)] == ["2"]


async def test_nothing_is_lost_when_one_of_the_two_stores_is(run_dir: Path) -> None:
    async with ReviewSession.open(run_dir) as review:
        await review.decide("1", "T", "seen")
        await review.decide("6", "F")
    saved = label_rows(run_dir)
    # A crash between the checkpoint and the labels file: the checkpoints write it again.
    (run_dir / "labels.csv").unlink()
    async with ReviewSession.open(run_dir):
        pass
    assert label_rows(run_dir) == saved
    # The checkpoint file lost: the labels file's decisions are replayed into the graph.
    (run_dir / "review.sqlite").unlink()
    async with ReviewSession.open(run_dir) as review:
        assert review.progress()["decided"] == 2
    assert label_rows(run_dir) == saved  # times and notes kept, not re-stamped
    assert checkpoint_reviews(run_dir)["1"] == "T"


async def test_only_and_sample_pick_the_queue_and_keep_other_decisions(run_dir: Path) -> None:
    async with kgcheck.open_review(run_dir, only="F,ties") as review:
        assert [i.fact_id for i in review.items] == ["2", "5", "6"]
        await review.decide("5", "T")
    async with kgcheck.open_review(run_dir, only="NA") as review:
        assert [i.fact_id for i in review.items] == ["3", "5"]
        assert review.item("5").review["label"] == "T"
        await review.decide("3", "F")
    async with kgcheck.open_review(run_dir, only="F") as review:
        assert review.progress()["decided"] == 0
    # Decisions outside the queue stay in the labels file.
    assert {r["fact_id"] for r in label_rows(run_dir)} == {"5", "3"}
    async with kgcheck.open_review(run_dir, sample=3, seed=7) as first:
        picked = [i.fact_id for i in first.items]
    async with kgcheck.open_review(run_dir, sample=3, seed=7) as again:
        assert [i.fact_id for i in again.items] == picked and len(picked) == 3
    with pytest.raises(ReviewError, match="unknown filter maybe; use any of F, T, NA, NEI, ties"):
        parse_only("F,maybe")


async def test_bad_input_gets_one_clear_line(run_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    make_run(empty)
    (empty / "verdicts.jsonl").write_text("")
    with pytest.raises(ReviewError, match="no verdicts to review; run `kgcheck run"):
        async with ReviewSession.open(empty):
            pass
    with pytest.raises(ReviewError, match="is not a kgcheck run folder"):
        async with ReviewSession.open(tmp_path):
            pass

    other = make_run(tmp_path / "other", run_id="run0002")
    (other / "verdicts.jsonl").write_text(
        (run_dir / "verdicts.jsonl").read_text().replace('"fact_id": "6"', '"fact_id": "60"'))
    facts = tmp_path / "other-facts.csv"
    facts.write_text(facts.read_text().replace("\n6,", "\n60,"))
    async with ReviewSession.open(other) as review:
        await review.decide("60", "T")
    shutil.copy(other / "labels.csv", run_dir / "labels.csv")
    with pytest.raises(LabelsError, match=r"labels 1 facts this run did not check \(e.g. 60\): "
                                          "it belongs to another run"):
        async with ReviewSession.open(run_dir):
            pass
    (run_dir / "labels.csv").write_text("id,verdict\n1,T\n")
    with pytest.raises(LabelsError, match="expected the columns fact_id,label,note,reviewer,"
                                          "reviewed_at,design,annotator,correction,"
                                          "corrected_value, found id,verdict"):
        read_labels(run_dir / "labels.csv")
    (run_dir / "labels.csv").write_text("fact_id,label,note,reviewer,reviewed_at\n1,yes,,,\n")
    with pytest.raises(LabelsError, match="row 2: label 'yes' is not one of T, F, skip"):
        read_labels(run_dir / "labels.csv")


async def test_one_review_per_run_folder(run_dir: Path) -> None:
    async with ReviewSession.open(run_dir):
        with pytest.raises(ReviewError, match="another kgcheck review is serving .*review.lock"):
            async with ReviewSession.open(run_dir):
                pass
    async with ReviewSession.open(run_dir):  # released when the first one ends
        pass


def test_the_cli_names_the_bad_input(run_dir: Path, tmp_path: Path) -> None:
    (run_dir / "verdicts.jsonl").write_text("")
    result = CliRunner().invoke(app, ["review", str(run_dir), "--port", "0"])
    assert result.exit_code == 2
    assert "no verdicts to review" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["review", str(run_dir), "--only", "X"])
    assert result.exit_code == 2 and "unknown filter X" in result.output
    info = json.loads((run_dir / "run.json").read_text())
    info["source"] = "memory"
    (run_dir / "run.json").write_text(json.dumps(info))
    make_run(tmp_path / "mem")
    (tmp_path / "mem" / "run.json").write_text(json.dumps(info))
    result = CliRunner().invoke(app, ["review", str(tmp_path / "mem"), "--port", "0"])
    assert result.exit_code == 2 and "given in memory" in result.output
