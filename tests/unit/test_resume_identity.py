"""A resume continues the same run only: same input facts, settings and prompt files.

Also: the summary describes every verdict in the folder (a resume with a smaller --limit),
defective input is skipped rather than failed, and lines of verdicts.jsonl that are not
verdicts are ignored with one warning instead of crashing the run or replacing a verdict.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.prompts import PROMPTS_DIR

runner = CliRunner()
KG = "subject,predicate,object,label\nParis,capitalOf,France,1\nParis,capitalOf,Spain,0\n" \
     "Berlin,capitalOf,Germany,1\n"


def _text(result) -> str:
    return " ".join(result.output.split())


def _run(*args: str):
    return runner.invoke(app, ["run", "--no-progress", "--concurrency", "1", *args])


def _verdicts(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]


def test_resume_refuses_an_edited_triples_file(tmp_path, scripted) -> None:
    kg, out = tmp_path / "kg.csv", tmp_path / "run"
    kg.write_text(KG)
    first = _run("--triples", str(kg), "--model", scripted("a", ["T", "F", "T"]), "--out", str(out))
    assert first.exit_code == 0, first.output
    # A row inserted at the top shifts every row id: old verdicts would land on other facts.
    kg.write_text(KG.replace("label\n", "label\nRome,capitalOf,Italy,1\n"))
    again = _run("--triples", str(kg), "--model", scripted("a", ["T"] * 4), "--out", str(out),
                 "--resume")
    assert again.exit_code == 2, again.output
    text = _text(again)
    assert "cannot resume" in text and "the input facts (3 of the 3 facts with verdicts" in text
    assert "e.g. fact '1'" in text
    assert "--fresh" in text and "another --out" in text and "Traceback" not in text
    assert len(_verdicts(out)) == 3


def test_resume_accepts_the_same_facts_from_another_path(tmp_path, scripted) -> None:
    kg, out = tmp_path / "kg.csv", tmp_path / "run"
    kg.write_text(KG)
    assert _run("--triples", str(kg), "--model", scripted("a", ["T", "F"]), "--limit", "2",
                "--out", str(out)).exit_code == 0
    moved = tmp_path / "elsewhere" / "kg.csv"
    moved.parent.mkdir()
    shutil.move(kg, moved)
    # Identified by content, not path; transport settings may change on resume.
    again = _run("--triples", str(moved), "--model", scripted("a", ["T"]), "--out", str(out),
                 "--resume", "--set", "timeout=5")
    assert again.exit_code == 0, again.output
    assert sorted(r["fact_id"] for r in _verdicts(out)) == ["1", "2", "3"]


BASE = ["--dataset", "yago", "--limit", "3"]


def _edited_prompt(tmp_path: Path) -> Path:
    path = tmp_path / "my-dka.txt"
    path.write_text((PROMPTS_DIR / "dka.txt").read_text() + "\nBe careful.\n")
    return path


@pytest.mark.parametrize(
    ("first", "then", "named"),
    [
        ([], ["--set", "temperature=0"], "setting temperature (0.75 then, 0.0 now)"),
        ([], ["--prompt", "EDITED"], "setting prompt ('dka.txt' then"),
        (["--method", "giv-z"], ["--method", "giv-z", "--set", "max_attempts=5"],
         "setting max_attempts (3 then, 5 now)"),
        (["--method", "giv-f"], ["--method", "giv-f", "--set", "seed=7"], "setting seed"),
        ([], ["--method", "giv-z"], "strategy ('dka' then, 'giv-z' now)"),
    ],
)
def test_resume_refuses_other_settings(tmp_path, first: list[str], then: list[str],
                                       named: str) -> None:
    out = tmp_path / "run"
    done = _run(*BASE, *first, "--out", str(out))
    assert done.exit_code == 0, done.output
    stored = json.loads((out / "run.json").read_text())
    then = [str(_edited_prompt(tmp_path)) if a == "EDITED" else a for a in then]
    again = _run(*BASE, *then, "--out", str(out), "--resume")
    assert again.exit_code == 2, again.output
    text = _text(again)
    assert "cannot resume" in text and named in text and "--fresh" in text
    # The stored run keeps its own settings: nothing of the refused one was written.
    assert json.loads((out / "run.json").read_text()) == stored


def test_resume_refuses_a_prompt_file_edited_in_place(tmp_path) -> None:
    out, prompt = tmp_path / "run", tmp_path / "mine.txt"
    text = (PROMPTS_DIR / "dka.txt").read_text()
    prompt.write_text(text)
    assert _run(*BASE, "--prompt", str(prompt), "--out", str(out)).exit_code == 0
    prompt.write_text(text + "\nAnswer quickly.\n")
    again = _run(*BASE, "--prompt", str(prompt), "--out", str(out), "--resume")
    assert again.exit_code == 2, again.output
    assert "the content of the prompt file" in _text(again)
    # The same text under another name is the same prompt.
    copy = tmp_path / "same-text.txt"
    copy.write_text(text)
    assert _run(*BASE, "--prompt", str(copy), "--out", str(out), "--resume").exit_code == 0


def test_run_json_records_the_input_and_every_setting(tmp_path) -> None:
    out = tmp_path / "run"
    assert _run(*BASE, "--out", str(out)).exit_code == 0
    info = json.loads((out / "run.json").read_text())
    assert info["input"]["facts"] == 3 and len(info["input"]["sha256"]) == 64
    assert all(len(r["fact_sha"]) == 16 for r in _verdicts(out))
    assert info["settings"]["temperature"] == 0.75 and info["settings"]["prompt"] == "dka.txt"
    assert set(info["prompts"]) == {"prompt"}


def test_resume_with_a_smaller_limit_keeps_the_whole_summary(tmp_path) -> None:
    out = tmp_path / "run"
    assert _run("--dataset", "yago", "--limit", "12", "--out", str(out)).exit_code == 0
    full = json.loads((out / "summary.json").read_text())
    again = _run("--dataset", "yago", "--limit", "3", "--out", str(out), "--resume")
    assert again.exit_code == 0, again.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 12 and summary["asked"] == 3 and summary["ran_this_time"] == 0
    assert (summary["f1_true"], summary["verdicts"]) == (full["f1_true"], full["verdicts"])
    assert "the summary covers all 12 verdicts" in _text(again)
    assert len(_verdicts(out)) == 12


def test_defective_input_is_skipped_not_failed(tmp_path, scripted) -> None:
    kg, out = tmp_path / "kg.csv", tmp_path / "run"
    kg.write_text(KG + f"{'x' * 25_000},capitalOf,Nowhere,0\n")
    done = _run("--triples", str(kg), "--model", scripted("a", ["T", "F", "T"]), "--out", str(out))
    assert done.exit_code == 0, done.output
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["errors"], summary["skipped"], summary["n"]) == (0, 1, 4)
    text = _text(done)
    assert "1 fact(s) skipped as invalid input" in text and "25,000 characters" in text
    assert "--resume" not in text and "failed" not in text
    # A resume has nothing to retry: the defect would come out the same.
    again = _run("--triples", str(kg), "--model", scripted("a", []), "--out", str(out), "--resume")
    assert again.exit_code == 0, again.output
    assert json.loads((out / "summary.json").read_text())["ran_this_time"] == 0


def test_lines_that_are_not_verdicts_are_ignored_with_one_warning(tmp_path) -> None:
    out = tmp_path / "run"
    assert _run(*BASE, "--out", str(out)).exit_code == 0
    good = _verdicts(out)
    with (out / "verdicts.jsonl").open("a") as fh:
        fh.write("{}\n")
        fh.write(json.dumps({"fact_id": good[0]["fact_id"], "gold": "T"}) + "\n")  # no label
        fh.write(json.dumps({**good[1], "label": "maybe"}) + "\n")
        fh.write('{"fact_id": "' + good[2]["fact_id"] + '", "label": "F", "ra\n')  # truncated
    again = _run("--dataset", "yago", "--limit", "4", "--out", str(out), "--resume")
    assert again.exit_code == 0, again.output
    text = _text(again)
    assert text.count("ignored 4 line(s) that are not verdicts") == 1
    assert "line 4: not a JSON object" not in text
    assert all(f"line {n}:" in text for n in (4, 5, 6, 7)) and "no label" in text
    assert "KeyError" not in text and "Traceback" not in text
    kept = {r["fact_id"]: r for r in _verdicts(out)}
    assert len(kept) == 4
    for record in good:  # no bad line replaced a good verdict
        assert kept[record["fact_id"]] == record


def test_resume_refuses_a_run_json_without_an_input_fingerprint(tmp_path) -> None:
    out = tmp_path / "run"
    assert _run(*BASE, "--out", str(out)).exit_code == 0
    info = json.loads((out / "run.json").read_text())
    del info["input"]
    (out / "run.json").write_text(json.dumps(info))
    again = _run(*BASE, "--out", str(out), "--resume")
    assert again.exit_code == 2, again.output
    assert "records no fingerprint of its input facts" in _text(again)
    assert "--fresh" in _text(again)
