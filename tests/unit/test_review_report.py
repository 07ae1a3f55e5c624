"""`kgcheck report` on reviewed runs: how many verdicts a person reviewed and how often they
overturned the model, per method and model (a consensus run's members included)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.review.session import ReviewSession
from tests.support.review_runs import make_run


async def _review(run_dir: Path, decisions: dict[str, str]) -> None:
    async with ReviewSession.open(run_dir) as review:
        for fact_id, label in decisions.items():
            await review.decide(fact_id, label)


async def test_report_counts_reviews_and_overturns(tmp_path: Path) -> None:
    single = make_run(tmp_path / "single")
    # Model labels: 1 T, 2 F, 3 NA, 4 T, 5 NA (a tie), 6 F.
    await _review(single, {"1": "F", "2": "F", "3": "T", "4": "skip"})
    voted = make_run(tmp_path / "voted", run_id="run0002")
    info = json.loads((voted / "run.json").read_text())
    (voted / "run.json").write_text(json.dumps({**info, "models": ["ollama:a", "ollama:b"]}))
    await _review(voted, {"5": "F", "6": "T"})
    unreviewed = make_run(tmp_path / "plain", run_id="run0003")

    result = CliRunner().invoke(app, ["report", str(single), str(voted), str(unreviewed),
                                      "--out", str(tmp_path / "report"), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "reviewed single DKA ollama:gemma2:9b: 4 of 6, overturned 1 of 2 (50%)" in (
        result.output)
    tables = (tmp_path / "report" / "tables.md").read_text()
    section = tables[tables.index("## Human review"):]
    rows = [line for line in section.split("\n\n#")[0].splitlines()
            if line.startswith("| ") and "---" not in line]
    assert rows[1:] == [
        "| single | DKA | ollama:gemma2:9b | 6 | 4 | 1 | 1 | 1 | 50% | 1 |",
        "| voted | DKA | consensus of ollama:a, ollama:b | 6 | 2 | 0 | 0 | 1 | 100% | 1 |",
        # Only fact 5 records the members' votes: a said T (overturned), b said F.
        "| voted | DKA | ollama:a | 1 | 1 | 0 | 0 | 1 | 100% | 0 |",
        "| voted | DKA | ollama:b | 1 | 1 | 0 | 1 | 0 | 0% | 0 |",
    ]
    assert not any(r.startswith("| plain ") for r in rows)


def test_report_refuses_another_runs_labels(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    (run_dir / "labels.csv").write_text("fact_id,label,note,reviewer,reviewed_at\n"
                                        "999,T,,,2026-01-01T00:00:00+00:00\n")
    result = CliRunner().invoke(app, ["report", str(run_dir), "--out", str(tmp_path / "r"),
                                      "--no-plots"])
    assert result.exit_code == 2
    assert "labels.csv labels 1 facts this run did not check" in result.output
