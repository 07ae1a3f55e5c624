"""A consensus member or judge that fails on every call stops the run as a single model does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.runs.runner import StopRule, _tally
from tests.support.stubs import Behaviour, OllamaStub

runner = CliRunner()


@pytest.fixture(scope="module")
def ollama():
    with OllamaStub() as stub:
        yield stub


def _run(tmp_path: Path, consensus: str, url: str, *extra: str, limit: int = 6):
    out = tmp_path / "run"
    result = runner.invoke(app, [
        "run", "--dataset", "yago", "--limit", str(limit), "--consensus", consensus,
        "--base-url", url, "--concurrency", "1", "--set", "max_retries=0", "--no-progress",
        "--out", str(out), *extra])
    summary = json.loads((out / "summary.json").read_text()) \
        if (out / "summary.json").exists() else {}
    return result, summary


def test_a_member_whose_model_is_missing_stops_the_run_at_once(tmp_path: Path, scripted,
                                                             ollama) -> None:
    # Ollama answers 404 for a model it has not pulled: no fact escapes it.
    ollama.behaviour = Behaviour(fail_times=10**6, fail_status=404)
    good = scripted("good-member", ["T"] * 10)
    result, summary = _run(tmp_path, f"{good},ollama:gemma2:9b", ollama.url)
    assert result.exit_code != 0
    message = " ".join(result.stderr.split())
    assert "member ollama:gemma2:9b" in message and "not found" in message
    assert summary["aborted_because"] == "configuration"
    assert summary["n"] == 1  # the first fact's record, then the stop
    assert summary["member_scores"]["ollama:gemma2:9b"]["errors"] == 1


def test_a_member_whose_server_fails_every_call_stops_after_a_streak(tmp_path: Path, scripted,
                                                                    ollama) -> None:
    ollama.behaviour = Behaviour(fail_times=10**6, fail_status=503)
    good = scripted("steady-member", ["T"] * 20)
    result, summary = _run(tmp_path, f"{good},ollama:gemma2:9b", ollama.url, limit=12)
    assert result.exit_code != 0
    assert summary["aborted_because"] == "server"
    assert "member ollama:gemma2:9b" in summary["aborted"]
    # The streak limit is max(5, 2 x concurrency): five facts, not all twelve.
    assert summary["n"] == 5 and summary["member_errors"] == 5
    assert summary["member_scores"][good]["errors"] == 0


def test_a_judge_that_fails_on_every_tie_stops_the_run(tmp_path: Path, scripted,
                                                       ollama) -> None:
    ollama.behaviour = Behaviour(fail_times=10**6, fail_status=404)
    yes, no = scripted("always-t", ["T"] * 10), scripted("always-f", ["F"] * 10)
    result, summary = _run(tmp_path, f"{yes},{no}", ollama.url, "--judge",
                           "ollama:gemma2:9b")
    assert result.exit_code != 0
    assert summary["aborted_because"] == "configuration"
    assert "member ollama:gemma2:9b" in summary["aborted"]
    assert summary["judge_errors"] == 1 and summary["n"] == 1


def test_a_member_that_fails_now_and_then_does_not_stop_the_run() -> None:
    rule = StopRule(limit=3)
    ok = {"model": "a", "error": None, "error_type": None}
    bad = {"model": "b", "error": "503", "error_type": "ResponseError"}
    good = {"model": "b", "error": None, "error_type": None}
    for votes in ([ok, bad], [ok, bad], [ok, good], [ok, bad], [ok, bad]):
        record = {"label": "T", "details": {"strategy": "consensus", "votes": votes}}
        rule.see(record)
    assert rule.reason is None  # the streak was broken by the good answer
    rule.see({"label": "T", "details": {"strategy": "consensus", "votes": [ok, bad]}})
    assert rule.reason == "server" and "member b" in str(rule.message)


def test_the_progress_line_counts_failed_member_calls() -> None:
    state = {"ties": 1, "na": 2, "errors": 0, "member_errors": 4}
    assert _tally(state, "members") == "ties 1 NA 2 errors 0, members 4"
    assert _tally({**state, "member_errors": 0}, "members") == "ties 1 NA 2 errors 0"
