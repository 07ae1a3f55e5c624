"""Before the first fact: every prompt file's placeholders, and every live model's server."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kgcheck.cli import app
from tests.stubs import OllamaStub, refused_url

runner = CliRunner()


def _run(tmp_path: Path, *args: str):
    return runner.invoke(app, ["run", "--dataset", "yago", "--limit", "2", "--no-progress",
                               "--out", str(tmp_path / "run"), *args])


def test_a_prompt_file_missing_a_placeholder_stops_the_run_before_it_starts(
        tmp_path: Path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_text("Is {subject} {predicate} true?\n")
    result = _run(tmp_path, "--prompt", str(mine))
    assert result.exit_code == 2
    assert f"{mine}: missing placeholder(s) {{object}}" in result.stderr
    assert "F1(T)" not in result.stdout  # no results table
    assert not (tmp_path / "run" / "verdicts.jsonl").exists()


def test_a_rag_step_prompt_is_checked_too(tmp_path: Path) -> None:
    mine = tmp_path / "questions.txt"
    mine.write_text("Write questions.\n")
    result = _run(tmp_path, "--method", "rag", "--set", f"questions_prompt={mine}")
    assert result.exit_code == 2
    assert f"{mine}: missing placeholder(s) {{sentence}}" in result.stderr


def test_an_unreachable_ollama_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    url = refused_url()
    result = _run(tmp_path, "--model", "ollama:gemma2:9b", "--base-url", url)
    assert result.exit_code == 2
    assert f"cannot reach ollama:gemma2:9b at {url}" in result.stderr
    assert "ollama serve" in result.stderr
    assert "F1(T)" not in result.stdout
    assert not (tmp_path / "run" / "verdicts.jsonl").exists()


def test_an_unreachable_openai_server_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    url = refused_url("/v1")
    result = _run(tmp_path, "--model", "openai-compatible:m", "--base-url", url)
    assert result.exit_code == 2
    assert f"cannot reach openai-compatible:m at {url}" in result.stderr
    assert "F1(T)" not in result.stdout


def test_a_reachable_server_is_asked_once_and_the_run_goes_on(tmp_path: Path) -> None:
    with OllamaStub() as stub:
        result = _run(tmp_path, "--model", "ollama:gemma2:9b", "--base-url", stub.url)
        probes = [r.path for r in stub.requests if r.method == "GET"]
    assert result.exit_code == 0, result.stderr
    assert probes == ["/api/version"]
    assert len(stub.calls()) == 2
