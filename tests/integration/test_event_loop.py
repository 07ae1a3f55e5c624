"""The event loop kgcheck's entry points run on: uvloop by default, asyncio's when asked."""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path

import pytest
import uvloop
from typer.testing import CliRunner

import kgcheck
from kgcheck import event_loop
from kgcheck.cli import app
from tests.support.stubs import Behaviour, OllamaStub

FACTS = [{"subject": "Paris", "predicate": "capital of", "object": "France"},
         {"subject": "Rome", "predicate": "capital of", "object": "Spain"},
         {"subject": "Oslo", "predicate": "capital of", "object": "Norway"}]


@pytest.fixture(scope="module")
def ollama():
    with OllamaStub(Behaviour(answer="T")) as stub:
        yield stub


async def running_loop() -> type:
    return type(asyncio.get_running_loop())


def test_runs_on_uvloop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.ENV_VAR, raising=False)
    assert event_loop.run(running_loop()) is uvloop.Loop
    assert event_loop.loop_factory() is uvloop.new_event_loop
    with event_loop.runner() as runner:
        assert runner.run(running_loop()) is uvloop.Loop


@pytest.mark.parametrize(("value", "loop"), [("asyncio", "asyncio"), (" AsyncIO ", "asyncio"),
                                             ("uvloop", "uvloop"), ("auto", "uvloop"),
                                             ("", "uvloop")])
def test_the_environment_picks_the_loop(monkeypatch: pytest.MonkeyPatch, value: str,
                                        loop: str) -> None:
    monkeypatch.setenv(event_loop.ENV_VAR, value)
    kind = event_loop.run(running_loop())
    assert (event_loop.loop_factory() is uvloop.new_event_loop) == (loop == "uvloop")
    assert (kind is uvloop.Loop) == (loop == "uvloop")


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    monkeypatch.delenv(event_loop.ENV_VAR, raising=False)
    assert event_loop.run(running_loop()) is not uvloop.Loop
    monkeypatch.setenv(event_loop.ENV_VAR, "uvloop")
    with pytest.raises(event_loop.EventLoopError, match=r"uvloop is not installed"):
        event_loop.loop_factory()


def test_a_misspelt_loop_is_refused_and_the_coroutine_closed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.ENV_VAR, "trio")
    job = running_loop()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine was never awaited" would be raised here
        with pytest.raises(event_loop.EventLoopError,
                           match=r"KGCHECK_EVENT_LOOP='trio' is not one of auto, uvloop"):
            event_loop.run(job)
    assert job.cr_frame is None  # closed


def test_a_run_gives_the_same_verdicts_on_both_loops(ollama: OllamaStub, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    records = {}
    for loop in ("uvloop", "asyncio"):
        monkeypatch.setenv(event_loop.ENV_VAR, loop)
        before = len(ollama.calls())
        result = kgcheck.run(facts=FACTS, model="ollama:gemma2:9b", base_url=ollama.url,
                             out=tmp_path / loop, max_retries=0, cache=False)
        assert len(ollama.calls()) - before == len(FACTS)  # each fact went over HTTP
        records[loop] = sorted((r["fact_id"], r["label"], r["error"]) for r in result.records)
        assert result.summary["n"] == 3 and result.summary["errors"] == 0
    assert records["uvloop"] == records["asyncio"] == [("1", "T", None), ("2", "T", None),
                                                       ("3", "T", None)]


def test_the_command_line_names_a_misspelt_loop(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.ENV_VAR, "trio")
    result = CliRunner().invoke(app, ["run", "--dataset", "yago", "--limit", "2", "--model",
                                      "replay:gemma2:9b", "--out", str(tmp_path / "run"),
                                      "--no-progress", "--no-cache"])
    assert result.exit_code == 2, result.output
    assert "KGCHECK_EVENT_LOOP='trio' is not one of auto, uvloop, asyncio" in result.output
    assert "Traceback" not in result.output
