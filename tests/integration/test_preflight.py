"""Before the first fact: every prompt file's placeholders, and every live model's server."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from tests.support.stubs import OllamaStub, refused_url

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


@pytest.mark.parametrize("models", [("gemma2:9b",), None],
                         ids=["the-model-is-pulled", "no-model-list"])
def test_a_reachable_server_with_the_model_lets_the_run_go_on(
        tmp_path: Path, models: tuple[str, ...] | None) -> None:
    # None: an older server or a proxy without /api/tags; the run goes on.
    with OllamaStub(models=models) as stub:
        result = _run(tmp_path, "--model", "ollama:gemma2:9b", "--base-url", stub.url)
        probes = [r.path for r in stub.requests if r.method == "GET"]
    assert result.exit_code == 0, result.stderr
    # Its version (that it answers), then its models (that this one is pulled).
    assert probes == ["/api/version", "/api/tags"]
    assert len(stub.calls()) == 2


def test_a_model_never_pulled_stops_the_run_with_the_fix(tmp_path: Path) -> None:
    pulled = ("gemma2:9b", "llama3.1:8b", "qwen2.5:7b", "mistral:7b", "phi3:mini",
              "nomic-embed-text:latest", "gemma2:27b")
    with OllamaStub(models=pulled) as stub:
        url = stub.url
        result = _run(tmp_path, "--model", "ollama:gemma3:4b", "--base-url", url)
        asked = len(stub.calls())
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert f"ollama:gemma3:4b at {url}" in line
    assert "`ollama pull gemma3:4b`" in line
    # A few of the server's models, not all of them.
    assert "gemma2:9b, llama3.1:8b, qwen2.5:7b, mistral:7b, phi3:mini and 2 more" in line
    assert asked == 0 and not (tmp_path / "run" / "verdicts.jsonl").exists()


@pytest.mark.parametrize(("model", "pulled"), [
    ("gemma2", ("gemma2:latest",)),  # no tag: latest
    ("gemma2:latest", ("gemma2",)),
    ("Gemma2:9B", ("gemma2:9b",)),  # names compare case-insensitively
    ("library/gemma2:9b", ("gemma2:9b",)),
    ("gemma2:9b", ("registry.ollama.ai/library/gemma2:9b",)),
    ("hf.co/org/repo:Q4_K_M", ("hf.co/org/repo:Q4_K_M",)),
])
def test_model_names_follow_ollamas_rules(tmp_path: Path, model: str,
                                          pulled: tuple[str, ...]) -> None:
    with OllamaStub(models=pulled) as stub:
        result = _run(tmp_path, "--model", f"ollama:{model}", "--base-url", stub.url)
        asked = len(stub.calls())
    assert result.exit_code == 0, result.stderr
    assert asked == 2


@pytest.mark.parametrize(("model", "pulled"), [
    ("gemma2", ("gemma2:9b",)),  # gemma2 is gemma2:latest, not any gemma2
    ("gemma2:9b", ("gemma2:27b", "other/gemma2:9b")),
])
def test_a_different_tag_or_namespace_is_another_model(tmp_path: Path, model: str,
                                                       pulled: tuple[str, ...]) -> None:
    with OllamaStub(models=pulled) as stub:
        result = _run(tmp_path, "--model", f"ollama:{model}", "--base-url", stub.url)
    assert result.exit_code == 2
    assert f"`ollama pull {model}`" in result.stderr


def test_an_empty_server_says_so(tmp_path: Path) -> None:
    with OllamaStub(models=()) as stub:
        result = _run(tmp_path, "--model", "ollama:gemma2:9b", "--base-url", stub.url)
    assert result.exit_code == 2
    assert "it has no models" in result.stderr and "`ollama pull gemma2:9b`" in result.stderr
