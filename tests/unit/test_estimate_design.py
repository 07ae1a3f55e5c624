"""An estimate knows how its labels were chosen, and whose accuracy it estimates."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.review.session import ReviewSession, parse_only
from tests.support.cli_runs import cli_run

runner = CliRunner()
KG = "id,subject,predicate,object\n" + "".join(
    f"{i},Town{i},located in,Region{i % 3}\n" for i in range(40))
ANSWERS = ["T", "F", "T", "T", "F"] * 8


@pytest.fixture
def run_dir(tmp_path: Path, scripted) -> Path:
    kg = tmp_path / "kg.csv"
    kg.write_text(KG)
    return cli_run(kg, scripted("design", ANSWERS), tmp_path / "run", "--concurrency", "1")


async def _review(run_dir: Path, decisions: int | None = None, only: str | None = None,
                  sample: int | None = None) -> None:
    async with ReviewSession.open(run_dir, only=parse_only(only), sample=sample) as review:
        items = review.items if decisions is None else review.items[:decisions]
        for n, item in enumerate(items):
            await review.decide(item.fact_id, "T" if n % 4 else "F")


def _designs(run_dir: Path) -> set[str]:
    with (run_dir / "labels.csv").open(newline="") as fh:
        return {row["design"] for row in csv.DictReader(fh)}


def _estimate(run_dir: Path):
    result = runner.invoke(app, ["estimate", str(run_dir), "--labels",
                                 str(run_dir / "labels.csv"), "--no-plots"])
    return result, " ".join((result.output + result.stderr).split())


async def test_labels_of_a_filtered_review_are_refused(run_dir: Path) -> None:
    await _review(run_dir, only="F")
    assert _designs(run_dir) == {"filtered:F"}
    result, text = _estimate(run_dir)
    assert result.exit_code == 2
    assert "come from a review of the F verdicts only (--only)" in text
    assert "kgcheck review RUN --sample N" in text and "Traceback" not in text


async def test_labels_taken_in_queue_order_warn_loudly(run_dir: Path) -> None:
    await _review(run_dir, decisions=12)
    assert _designs(run_dir) == {"queue"}
    result, text = _estimate(run_dir)
    assert result.exit_code == 0, text
    assert "NOT A RANDOM SAMPLE" in text and "cover 12 of the run's 40 facts" in text
    report = json.loads((run_dir / "estimate.json").read_text())
    assert report["labels"]["chosen"] == {"queue": 12}
    assert any("NOT A RANDOM SAMPLE" in w for w in report["warnings"])


async def test_a_random_sample_review_estimates_without_warning(run_dir: Path) -> None:
    await _review(run_dir, sample=12)
    assert _designs(run_dir) == {"srs"}
    result, text = _estimate(run_dir)
    assert result.exit_code == 0, text
    assert "warning" not in text
    # The run checked every fact of its file: the estimate stands for that KG.
    assert "estimated: the accuracy of the KG kg (the run checked all its 40 facts)" in text


async def test_a_random_sample_is_used_alone_beside_filtered_decisions(run_dir: Path) -> None:
    await _review(run_dir, only="F")
    await _review(run_dir, sample=14)
    assert _designs(run_dir) >= {"srs", "filtered:F"}
    result, text = _estimate(run_dir)
    assert result.exit_code == 0, text
    report = json.loads((run_dir / "estimate.json").read_text())
    srs = report["labels"]["chosen"]["srs"]
    assert report["labels"]["usable"] == srs
    assert "left out; the estimate uses the" in text


def test_run_json_says_how_the_facts_were_chosen(tmp_path: Path, scripted) -> None:
    kg = tmp_path / "big.csv"
    kg.write_text(KG)
    drawn = {}
    for name, extra in (("sample", ["--sample", "5", "--seed", "3"]),
                        ("first", ["--limit", "5"]), ("all", [])):
        out = cli_run(kg, scripted(f"drawn-{name}", ["T"] * 40), tmp_path / name, *extra)
        drawn[name] = json.loads((out / "run.json").read_text())["input"]["drawn"]
    assert drawn["sample"] == {"how": "sample", "seed": 3, "of": 40}
    assert drawn["first"] == {"how": "first", "limit": 5}
    assert drawn["all"] == {"how": "all"}


def test_the_estimate_of_a_limited_run_names_the_runs_facts(tmp_path: Path,
                                                            scripted) -> None:
    kg = tmp_path / "kg.csv"
    kg.write_text(KG)
    out = cli_run(kg, scripted("limited", ANSWERS), tmp_path / "run", "--limit", "20")
    asyncio.run(_review(out, sample=12))
    result, text = _estimate(out)
    assert result.exit_code == 0, text
    assert ("estimated: the accuracy of the 20 facts the run checked, chosen by the first "
            "facts of the input (--limit); the estimate does not extend to the rest of kg"
            in text)


def test_a_label_file_without_designs_is_read_as_a_random_sample(run_dir: Path) -> None:
    ids = [json.loads(line)["fact_id"] for line in
           (run_dir / "verdicts.jsonl").read_text().splitlines()][:12]
    labels = run_dir / "mine.csv"
    labels.write_text("fact_id,label\n" + "".join(f"{i},T\n" for i in ids))
    result = runner.invoke(app, ["estimate", str(run_dir), "--labels", str(labels),
                                 "--no-plots"])
    text = " ".join((result.output + result.stderr).split())
    assert result.exit_code == 0, text
    assert "NOT A RANDOM SAMPLE" not in text and "warning" not in text
