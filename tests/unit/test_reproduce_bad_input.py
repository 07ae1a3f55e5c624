"""``kgcheck reproduce`` and ``report`` on data that cannot be scored: never tables of zeros."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kgcheck.cli import app
from tests.unit.test_reproduce_layout import toy  # noqa: F401 - the made-up upstream folder

runner = CliRunner()
DKA = "results/paper_results/DKA"


def _reproduce(data: Path | None, out: Path):
    where = ["--data", str(data)] if data else []
    return runner.invoke(app, ["reproduce", *where, "--out", str(out), "--no-plots"])


def _text(result) -> str:
    return " ".join(result.output.split())


def test_missing_gold_is_an_error_not_zeros(toy: Path, tmp_path: Path) -> None:  # noqa: F811
    (toy / "dataset/Toy/data/gt.json").unlink()
    result = _reproduce(toy, tmp_path / "out")
    assert result.exit_code != 0, result.output
    text = _text(result)
    assert "nothing could be scored" in text and "no gold labels" in text
    assert "gt.json" in text and "Traceback" not in text
    assert not (tmp_path / "out" / "tables.md").exists()


def test_unusable_answer_files_are_left_out_loudly(toy: Path, tmp_path: Path) -> None:  # noqa: F811
    results = toy / DKA
    # A folder where a file belongs, a file without answers, one with a record missing one.
    (results / "Toy_open-source_m1:1b_dka.json").unlink()
    (results / "Toy_open-source_m1:1b_dka.json").mkdir()
    rows = json.loads((results / "Toy_open-source_m2:2b_dka.json").read_text())
    (results / "Toy_open-source_m2:2b_dka.json").write_text(
        json.dumps([{k: v for k, v in r.items() if k != "response"} for r in rows]))
    rows = json.loads((results / "Toy_open-source_m3:3b_dka.json").read_text())
    del rows[0]["response"]
    (results / "Toy_open-source_m3:3b_dka.json").write_text(json.dumps(rows))
    result = _reproduce(toy, tmp_path / "out")
    assert result.exit_code == 0, result.output
    text = _text(result)
    assert "left out m1:1b" in text and "is a folder, expected a JSON file" in text
    assert "left out m2:2b" in text and "none of its 6 records has a 'response'" in text
    assert "1 of 6 records have no 'response'" in text
    records = json.loads((tmp_path / "out" / "tables.json").read_text())
    dka = {r["model"] for r in records if r["table"] == "f1" and r["method"] == "DKA"}
    assert dka == {"m3:3b", "m4:4b"}  # no row of zeros for the unreadable ones
    md = (tmp_path / "out" / "tables.md").read_text()
    assert "warning: left out m1:1b" in md and "warning: left out m2:2b" in md


def test_nothing_readable_fails_the_command(toy: Path, tmp_path: Path) -> None:  # noqa: F811
    shutil.rmtree(toy / "results/paper_results/RAG")
    for path in (toy / DKA).glob("*.json"):
        path.write_text(json.dumps([{"id": "1"}]))
    result = _reproduce(toy, tmp_path / "out")
    assert result.exit_code != 0, result.output
    assert "nothing could be scored" in _text(result)


def test_out_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine")
    result = _reproduce(None, taken)
    assert result.exit_code == 2, result.output
    assert "--out" in result.output and "exists and is not a folder" in _text(result)
    assert "Traceback" not in result.output and taken.read_text() == "mine"


def test_report_notes_verdict_lines_it_ignored(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = runner.invoke(app, ["run", "--dataset", "yago", "--limit", "3", "--out", str(out),
                               "--no-progress"])
    assert done.exit_code == 0, done.output
    with (out / "verdicts.jsonl").open("a") as fh:
        fh.write("{}\n")
    result = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep"),
                                 "--no-plots"])
    assert result.exit_code == 0, result.output
    md = " ".join((tmp_path / "rep" / "tables.md").read_text().split())
    assert "ignored 1 line(s) that are not verdicts (line 4: no fact_id)" in md
