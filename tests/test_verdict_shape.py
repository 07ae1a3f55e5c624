"""Verdict records of another shape are refused with their line by every reader that shows them.

``export``, ``show``, the review and the reports read ``verdicts.jsonl`` through one typed
reader (``runfolder.read_verdicts``, checked by ``kgcheck.data.verdict_schema``): a record
whose ``details`` is a list or whose ``seconds`` is a string is one clear line naming the
file and the line, never a traceback.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.runfolder import RunFolderError, read_verdicts
from kgcheck.data.verdict_schema import shape_problem

GOOD = {"fact_id": "f1", "label": "F", "method": "DKA", "model": "m", "seconds": 0.5,
        "details": {}, "subject": "Danube", "predicate": "flowsThrough", "object": "Spain",
        "conversation": [{"role": "user", "content": "?"}]}
BAD = [
    ({"details": ["reason"]}, "details: input should be a valid dictionary, got a list"),
    ({"seconds": "0.5"}, "seconds: input should be a valid number, got a string"),
    ({"confidence": "high"}, "confidence: input should be a valid number, got a string"),
    ({"conversation": [{"role": "user"}]}, "conversation[0].content is missing"),
    ({"correction": {"part": "object"}}, "correction.value is missing"),
    ({"citations": [{"text": 3}]}, "citations[0].text: input should be a valid string"),
    ({"rdf": {"subject": "<http://a>"}}, "rdf.predicate is missing"),
]


def _run(folder: Path, second: dict) -> Path:
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"run_id": "r1", "dataset": "kg"}))
    lines = [GOOD, {**GOOD, "fact_id": "f2", **second}]
    (folder / "verdicts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return folder


@pytest.mark.parametrize(("change", "why"), BAD)
def test_export_and_show_refuse_a_record_of_another_shape_naming_its_line(tmp_path, change,
                                                                            why):
    run = _run(tmp_path / "run", change)
    runner = CliRunner()
    for args in (["export", str(run), "--format", "jsonl", "--out", str(tmp_path / "x.jsonl")],
                 ["export", str(run), "--format", "factcheck", "--out", str(tmp_path)],
                 ["export", str(run), "--format", "ttl", "--out", str(tmp_path / "x.ttl")],
                 ["show", str(run), "f2"], ["show", str(run), "f1"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output, result.exception)
        said = " ".join(result.output.split())
        assert f"verdicts.jsonl, line 2: the verdict of fact 'f2' is malformed: {why}" in said
        assert "Traceback" not in result.output


def test_records_of_the_expected_shape_and_torn_lines_read_as_before(tmp_path):
    run = _run(tmp_path / "run", {"seconds": 2, "confidence": None, "extra": [1, 2]})
    with (run / "verdicts.jsonl").open("a") as fh:
        fh.write('{"fact_id": "f3", "label": "T", "details": [')  # a torn last line
    warned: list[str] = []
    records = read_verdicts(run, warned.append)
    assert list(records) == ["f1", "f2"] and records["f2"]["extra"] == [1, 2]
    assert list(records["f2"]) == list({**GOOD, "seconds": 2, "confidence": None,
                                        "extra": [1, 2]})  # kept as written, in its order
    assert "line 3: incomplete or malformed JSON" in warned[0]
    lone = run / "lone.jsonl"
    lone.write_text('{"fact_id": "f4", "label": "T", "raw": "a\\ud800"}\n')
    with pytest.raises(RunFolderError, match=r"lone.jsonl, line 1: .* lone surrogate"):
        read_verdicts(lone)


def test_the_typed_reader_checks_a_record_in_microseconds():
    line = json.dumps({**GOOD, "raws": ["F"], "attempts": 1, "gold": "T", "run_id": "r",
                       "checked_at": "2026-12-01T00:00:00Z"})
    records = [json.loads(line)] * 20_000
    start = time.perf_counter()
    assert all(shape_problem(r) is None for r in records)
    per_record = (time.perf_counter() - start) / len(records)
    # About 5-10 us a record here, beside about 12 us to parse its JSON line.
    assert per_record < 60e-6, per_record
