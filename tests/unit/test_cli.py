"""The CLI: clear one-line errors for bad input, tables for good input."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app

runner = CliRunner()


def test_datasets_lists_counts() -> None:
    result = runner.invoke(app, ["datasets"])
    assert result.exit_code == 0, result.output
    assert "FactBench" in result.output and "2,800" in result.output
    assert "9,344" in result.output and "0.85" in result.output


def test_run_prints_the_f1_table_and_writes_the_summary(tmp_path) -> None:
    result = runner.invoke(app, ["run", "--dataset", "factbench", "--limit", "30", "--out",
                                 str(tmp_path), "--no-progress", "--concurrency", "3"])
    assert result.exit_code == 0, result.output
    assert "DKA on FactBench" in result.output and "F1(T)" in result.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n"] == 30 and summary["models"] == ["replay:gemma2:9b"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "nope"], "unknown dataset 'nope'"),
        (["--dataset", "yago", "--method", "nope"], "unknown strategy 'nope'; known: dka"),
        (["--dataset", "yago", "--model", "bard:x"], "unknown model provider 'bard'"),
        (["--dataset", "yago", "--model", "gemma"], "not of the form provider:model"),
        (["--dataset", "yago", "--model", "replay:gpt-5"], "replay:gpt-5 has no recorded DKA answers for YAGO"),
        ([], "give exactly one of --dataset, --triples, --sparql"),
        (["--dataset", "yago", "--set", "colour=blue"], "--set colour=blue: unknown setting"),
        (["--dataset", "yago", "--set", "max_tokens=lots"], "expected a int"),
        (["--dataset", "yago", "--data", "/nonexistent/dir"], "data folder not found"),
        (["--dataset", "yago", "--model", "openai-compatible:x"], "needs a server URL"),
        (["--dataset", "yago", "--limit", "0"], "--limit 0 must be at least 1"),
        (["--dataset", "yago", "--replay-latency", "-1"], "--replay-latency -1.0 must be 0 or more"),
        (["--dataset", "yago", "--judge", "cons-up"], "--judge cons-up needs --consensus"),
        (["--dataset", "yago", "--prompt", "no-such-prompt.txt"], "prompt file 'no-such-prompt.txt' not found"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, monkeypatch, args: list[str], message: str) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    result = runner.invoke(app, ["run", *args, "--out", str(tmp_path / "o"), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_prompt_without_placeholders_stops_the_run(tmp_path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("Is it true?")
    result = runner.invoke(app, ["run", "--dataset", "yago", "--limit", "5", "--prompt", str(bad),
                                 "--out", str(tmp_path / "o"), "--no-progress"])
    # Checked before the first fact: an error naming the file, and no run at all.
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert f"{bad}: missing placeholder(s) {{object}}, {{predicate}}, {{subject}}" in text
    assert not (tmp_path / "o" / "verdicts.jsonl").exists()


def test_own_triples_need_a_live_model(tmp_path, scripted) -> None:
    kg = tmp_path / "kg.csv"
    kg.write_text("subject,predicate,object,label\nParis,capitalOf,France,1\nParis,capitalOf,Spain,0\n")
    result = runner.invoke(app, ["run", "--triples", str(kg), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "only answers facts of a recorded dataset" in " ".join(result.output.split())
    spec = scripted("own", ["T", "F"])
    result = runner.invoke(app, ["run", "--triples", str(kg), "--model", spec, "--concurrency", "1",
                                 "--out", str(tmp_path / "r"), "--no-progress"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert (summary["f1_true"], summary["f1_false"], summary["dataset"]) == (1.0, 1.0, "kg")


def test_unlabelled_triples_are_counted_not_scored(tmp_path, scripted) -> None:
    kg = tmp_path / "kg.csv"
    kg.write_text("subject,predicate,object\nParis,capitalOf,France\nParis,capitalOf,Spain\n")
    spec = scripted("unlabelled", ["T", "F"])
    result = runner.invoke(app, ["run", "--triples", str(kg), "--model", spec, "--concurrency", "1",
                                 "--out", str(tmp_path / "r"), "--no-progress"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["f1_true"] is None and summary["scored"] == 0
    assert summary["verdicts"] == {"T": 1, "F": 1, "NA": 0, "NEI": 0}
    assert "verdicts: T 1, F 1, NA 0" in result.output


def test_an_unreachable_server_stops_the_command_before_the_run(tmp_path, free_port) -> None:
    result = runner.invoke(app, ["run", "--dataset", "yago", "--limit", "2", "--model",
                                 "ollama:gemma2:9b", "--base-url", f"http://127.0.0.1:{free_port}",
                                 "--set", "max_retries=0", "--out", str(tmp_path / "r"),
                                 "--no-progress"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"cannot reach ollama:gemma2:9b at http://127.0.0.1:{free_port}" in text
    assert not (tmp_path / "r" / "verdicts.jsonl").exists()


def test_resume_refuses_a_folder_that_is_not_a_run(tmp_path) -> None:
    (tmp_path / "tables.md").write_text("# not a run")
    result = runner.invoke(app, ["run", "--dataset", "yago", "--limit", "2", "--resume",
                                 "--out", str(tmp_path), "--no-progress"])
    assert result.exit_code == 2
    assert "is not a kgcheck run folder" in " ".join(result.output.split())
    assert not (tmp_path / "run.json").exists()


def test_rag_run_warns_about_facts_without_evidence(tmp_path) -> None:
    corpus = tmp_path / "rag_dataset" / "yago" / "10019"
    corpus.mkdir(parents=True)
    (corpus / "0.txt").write_text("Paul Spence produced the film FUBAR in 2002.")
    result = runner.invoke(app, ["run", "--dataset", "yago", "--method", "rag", "--limit", "3",
                                 "--set", f"corpus={tmp_path}", "--set", "index=memory",
                                 "--out", str(tmp_path / "o"), "--no-progress"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"the evidence corpus {tmp_path} has no documents for 2 of 3 facts" in text
    assert "kgcheck corpus import --dataset yago" in text
