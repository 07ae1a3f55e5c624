"""One rule for estimates and one reader of truths, whatever surface shows them.

The review page's running estimate applies the rule ``kgcheck estimate`` applies
(``kgcheck.evals.accuracy.support``); ``compare``, ``errors``, ``view`` and ``report`` judge
verdicts against the same truths (``kgcheck.data.truths``): a review decision, else gold.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.api import estimate
from kgcheck.cli.app import app
from kgcheck.data.runfolder import LABELS_FILE, read_verdicts
from kgcheck.data.truths import run_truths
from kgcheck.evals.accuracy.estimators import MIN_LABELS, EstimateError
from kgcheck.evals.errors.selection import read_run_errors
from kgcheck.evals.stats.paired import compare_runs
from kgcheck.review.session import ReviewSession
from kgcheck.view.explorer import Explorer, FactQuery
from tests.support.stats_runs import make_replay_run


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_replay_run(tmp_path_factory.mktemp("truths") / "run", "gemma2:9b", limit=60)


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


async def _review(run: Path, decide: int, **options) -> dict:
    """Decide the first ``decide`` facts of a review queue by their gold; return its estimate."""
    gold = {f: r["gold"] for f, r in read_verdicts(run / "verdicts.jsonl").items()}
    async with ReviewSession.open(run, **options) as session:
        for item in session.items[:decide]:
            await session.decide(item.fact_id, gold[item.fact_id] or "T")
        return session.estimate()


async def test_a_review_of_chosen_verdicts_shows_no_estimate_as_estimate_refuses(
        replay_run: Path, tmp_path: Path) -> None:
    run = _copy(replay_run, tmp_path / "run")
    shown = await _review(run, MIN_LABELS + 2, only=("T", "F", "NA"))
    assert "error" in shown and shown.get("wilson") is None, shown
    assert "--only" in shown["error"]
    with pytest.raises(EstimateError) as refused:
        estimate(run, labels=run / LABELS_FILE, plots=False)
    # One rule: the page and the command refuse for the same reason, in the same words.
    assert str(refused.value) == shown["error"]


async def test_a_random_sample_review_shows_the_estimate_estimate_gives(
        replay_run: Path, tmp_path: Path) -> None:
    run = _copy(replay_run, tmp_path / "run")
    shown = await _review(run, MIN_LABELS + 2, sample=MIN_LABELS + 2, seed=3)
    assert "error" not in shown and shown["warnings"] == []
    found = estimate(run, labels=run / LABELS_FILE, plots=False)
    human = next(i for i in found.estimates if i.estimator == "human")
    assert shown["wilson"]["estimate"] == pytest.approx(human.accuracy)


async def test_decisions_in_queue_order_warn_on_the_page_as_in_estimate(
        replay_run: Path, tmp_path: Path) -> None:
    run = _copy(replay_run, tmp_path / "run")
    shown = await _review(run, MIN_LABELS + 2)
    assert shown.get("wilson") and any("NOT A RANDOM SAMPLE" in w for w in shown["warnings"])


def _with_review(run: Path, to: Path, decisions: dict[str, str]) -> Path:
    folder = _copy(run, to)
    lines = ["fact_id,label,note,reviewer,reviewed_at,design,annotator,correction,"
             "corrected_value"]
    lines += [f"{fid},{label},,,2026-01-01T00:00:00,srs,,," for fid, label in decisions.items()]
    (folder / LABELS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _without_gold(run: Path, to: Path) -> Path:
    folder = _copy(run, to)
    path = folder / "verdicts.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    path.write_text("".join(json.dumps({**r, "gold": None}) + "\n" for r in records),
                    encoding="utf-8")
    return folder


def test_every_command_reads_review_decisions_as_truths(replay_run: Path,
                                                        tmp_path: Path) -> None:
    records = read_verdicts(replay_run / "verdicts.jsonl")
    # The review overturns the gold label of five facts; the runs hold no gold at all.
    flipped = {fid: "F" if r["gold"] == "T" else "T" for fid, r in list(records.items())[:5]}
    kept = {fid: r["gold"] for fid, r in list(records.items())[5:30]}
    review = {**flipped, **kept}
    a = _with_review(_without_gold(replay_run, tmp_path / "nogold"), tmp_path / "a", review)
    b = _without_gold(replay_run, tmp_path / "b")

    truths = run_truths(a, read_verdicts(a / "verdicts.jsonl").values())
    assert truths.labels == review and set(truths.sources.values()) == {"review"}

    # compare: scores the 30 reviewed facts (it once said they had no gold label).
    compared = compare_runs(a, b, resamples=50)
    assert compared.facts == len(review)
    # errors: the wrong verdicts are those the review says are wrong.
    (run,) = read_run_errors([a])
    expected = {fid for fid, t in review.items()
                if records[fid]["label"] in ("T", "F") and records[fid]["label"] != t}
    assert expected and {c["fact_id"] for c in run.errors} == expected
    assert run.truth_from == "review labels" and len(run.scored) == len(review)
    # view: the explorer's "wrong" filter finds the same facts.
    explorer = Explorer([a])
    try:
        page = explorer.facts(FactQuery(filters=("wrong",), size=100))
    finally:
        explorer.close()
    assert {r["fact_id"] for r in page["rows"]} == expected


def test_compare_says_how_to_get_truths_when_there_are_none(replay_run: Path,
                                                            tmp_path: Path) -> None:
    a = _without_gold(replay_run, tmp_path / "a")
    result = CliRunner().invoke(app, ["compare", str(a), str(a)])
    assert result.exit_code != 0
    assert "review decision" in result.output and "--labels" in result.output
