"""Transport failures against stub servers: retries, timeouts, NA verdicts, stopped runs."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage
from ollama import ResponseError

from kgcheck.data.facts import Fact
from kgcheck.data.runfolder import VERDICTS
from kgcheck.failures import Failure, classify
from kgcheck.graphs.strategies.dka import DKAContext, graph
from kgcheck.providers import ModelSettings, UnknownModelError, redact_url, resolve_model
from kgcheck.providers.transports import ModelReplyError, backoff_delay
from kgcheck.runs.runner import RECURSION_LIMIT, RunInfo, check_facts
from tests.support.stubs import Behaviour, OllamaStub, OpenAIStub, refused_url
from tests.support.stubs.base import MAX_HANG_SECONDS

OLLAMA = "ollama:gemma2:9b"
KEY = "sk-kgcheck-secret-5f1c2e9a7b3d4c6e8f"
FACTS = [Fact(id=f"f{i}", dataset="YAGO", subject=f"Person_{i}", predicate="isMarriedTo",
              object=f"Spouse_{i}", label=i % 2 == 0) for i in range(12)]


@dataclass(kw_only=True)
class QuickRetryContext(DKAContext):
    """DKA settings with a short retry backoff, so failing tests stay fast."""

    retry_backoff: float = field(default=0.01, metadata={"description": "First retry pause."})


def fast(**values: Any) -> ModelSettings:
    return ModelSettings(retry_backoff=0.01, **values)


@pytest.fixture
def ollama() -> Iterator[OllamaStub]:
    with OllamaStub() as stub:
        yield stub


@pytest.fixture
def server() -> Iterator[OpenAIStub]:
    with OpenAIStub() as stub:
        yield stub


# kgcheck's own entry points run on uvloop, an async caller's on its loop: both read alike.
pytestmark = [pytest.mark.usefixtures("no_openai_env"), pytest.mark.both_loops]


# --- Ollama: our retry loop -------------------------------------------------------------

@pytest.mark.parametrize("status", [500, 503])
async def test_ollama_fails_twice_then_answers(ollama: OllamaStub, status: int) -> None:
    ollama.behaviour = Behaviour(answer="T", fail_times=2, fail_status=status)
    model = resolve_model(OLLAMA, fast(base_url=ollama.url, max_retries=3))
    reply = await model.ainvoke([HumanMessage("?")])
    assert reply.content == "T"
    assert len(ollama.calls()) == 3


async def test_ollama_stream_is_retried_before_the_first_chunk(ollama: OllamaStub) -> None:
    ollama.behaviour = Behaviour(answer="True", fail_times=2)
    model = resolve_model(OLLAMA, fast(base_url=ollama.url))
    text = "".join([chunk.content async for chunk in model.astream([HumanMessage("?")])])
    assert text == "True"
    assert len(ollama.calls()) == 3


def test_ollama_sync_call_is_retried(ollama: OllamaStub) -> None:
    ollama.behaviour = Behaviour(answer="F", fail_times=1)
    reply = resolve_model(OLLAMA, fast(base_url=ollama.url)).invoke([HumanMessage("?")])
    assert reply.content == "F"
    assert len(ollama.calls()) == 2


async def test_ollama_spent_retries_say_what_failed(ollama: OllamaStub) -> None:
    ollama.behaviour = Behaviour(fail_times=99, fail_status=503)
    model = resolve_model(OLLAMA, fast(base_url=ollama.url, max_retries=2))
    with pytest.raises(ResponseError) as info:
        await model.ainvoke([HumanMessage("?")])
    assert info.value.status_code == 503
    message = str(info.value)
    assert f"{OLLAMA} at {ollama.url}" in message
    assert "HTTP 503 (3 attempts)" in message and "server busy" in message
    assert len(ollama.calls()) == 3


async def test_ollama_client_errors_are_not_retried(ollama: OllamaStub) -> None:
    ollama.behaviour = Behaviour(fail_times=99, fail_status=400)
    model = resolve_model(OLLAMA, fast(base_url=ollama.url))
    with pytest.raises(ResponseError, match="invalid options"):
        await model.ainvoke([HumanMessage("?")])
    assert len(ollama.calls()) == 1


async def test_ollama_missing_model_is_a_settings_error(ollama: OllamaStub) -> None:
    ollama.behaviour = Behaviour(fail_times=99, fail_status=404)
    model = resolve_model(OLLAMA, fast(base_url=ollama.url))
    with pytest.raises(UnknownModelError, match="not found.*ollama pull gemma2:9b"):
        await model.ainvoke([HumanMessage("?")])
    assert len(ollama.calls()) == 1


async def test_ollama_that_never_answers_times_out(ollama: OllamaStub) -> None:
    ollama.behaviour = Behaviour(hang=True)
    model = resolve_model(OLLAMA, fast(base_url=ollama.url, timeout=0.3, max_retries=1))
    with pytest.raises(httpx.ReadTimeout) as info:
        await model.ainvoke([HumanMessage("?")])
    assert "gave no answer within 0.3 s (2 attempts)" in str(info.value)
    assert len(ollama.calls()) == 2


async def test_ollama_refused_connection() -> None:
    url = refused_url()
    model = resolve_model(OLLAMA, fast(base_url=url, max_retries=2))
    with pytest.raises(httpx.ConnectError) as info:
        await model.ainvoke([HumanMessage("?")])
    assert f"cannot reach {OLLAMA} at {url} (3 attempts)" in str(info.value)


async def test_a_server_that_hangs_up_is_unreachable_not_slow() -> None:
    # aiohttp reports a dropped connection as it reports a timeout; kgcheck tells them apart.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        stop = threading.Event()

        def hang_up() -> None:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                with conn:
                    conn.recv(65536)

        thread = threading.Thread(target=hang_up, daemon=True)
        thread.start()
        try:
            model = resolve_model(OLLAMA, fast(base_url=url, max_retries=1))
            with pytest.raises(httpx.RemoteProtocolError) as info:
                await model.ainvoke([HumanMessage("?")])
        finally:
            stop.set()
            thread.join()
    assert classify(info.value) is Failure.UNREACHABLE
    assert f"cannot reach {OLLAMA} at {url} (2 attempts)" in str(info.value)


def test_backoff_doubles_and_is_capped() -> None:
    assert 0.75 <= backoff_delay(1, 1.0) <= 1.0
    assert 1.5 <= backoff_delay(2, 1.0) <= 2.0
    assert 6.0 <= backoff_delay(10, 1.0) <= 8.0


def test_credentials_are_dropped_from_urls() -> None:
    assert redact_url("http://me:pw@127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


# --- OpenAI: the client's own retries ---------------------------------------------------

async def test_openai_fails_twice_then_answers(server: OpenAIStub) -> None:
    server.behaviour = Behaviour(answer="T", fail_times=2, fail_status=503, retry_after_ms=5)
    model = resolve_model("openai-compatible:m", ModelSettings(base_url=server.url))
    reply = await model.ainvoke([HumanMessage("?")])
    assert reply.content == "T"
    calls = server.calls()
    assert len(calls) == 3
    # The openai client numbers its retries; this shows the retries were its own.
    assert [c.headers["x-stainless-retry-count"] for c in calls] == ["0", "1", "2"]


async def test_openai_spent_retries_say_what_failed(server: OpenAIStub) -> None:
    server.behaviour = Behaviour(fail_times=99, fail_status=500, retry_after_ms=5)
    model = resolve_model("openai-compatible:m", ModelSettings(base_url=server.url, max_retries=1))
    with pytest.raises(openai.InternalServerError) as info:
        await model.ainvoke([HumanMessage("?")])
    assert f"openai-compatible:m at {server.url} failed with HTTP 500 (2 attempts)" in str(
        info.value)
    assert len(server.calls()) == 2


async def test_openai_that_never_answers_times_out(server: OpenAIStub) -> None:
    server.behaviour = Behaviour(hang=True)
    model = resolve_model("openai-compatible:m",
                          ModelSettings(base_url=server.url, timeout=0.3, max_retries=1))
    with pytest.raises(openai.APITimeoutError) as info:
        await model.ainvoke([HumanMessage("?")])
    assert "gave no answer within 0.3 s (2 attempts)" in str(info.value)
    assert len(server.calls()) == 2


async def test_openai_missing_model_is_a_settings_error(server: OpenAIStub) -> None:
    server.behaviour = Behaviour(fail_times=99, fail_status=404)
    model = resolve_model("openai-compatible:m", ModelSettings(base_url=server.url))
    with pytest.raises(UnknownModelError, match="does not exist.*ends in /v1"):
        await model.ainvoke([HumanMessage("?")])
    assert len(server.calls()) == 1


async def test_openai_refused_connection() -> None:
    url = refused_url("/v1")
    model = resolve_model("openai-compatible:m", ModelSettings(base_url=url, max_retries=0))
    with pytest.raises(openai.APIConnectionError) as info:
        await model.ainvoke([HumanMessage("?")])
    assert f"cannot reach openai-compatible:m at {url} (1 attempt)" in str(info.value)


# --- Through the DKA graph and the runner -----------------------------------------------

async def test_dka_turns_a_silent_server_into_an_na_verdict(ollama: OllamaStub) -> None:
    ollama.behaviour = Behaviour(hang=True)
    ctx = QuickRetryContext(model=OLLAMA, base_url=ollama.url, timeout=0.3, max_retries=1)
    out = await graph.ainvoke({"fact": FACTS[0].as_input()}, context=ctx,
                              config={"recursion_limit": RECURSION_LIMIT})
    verdict = out["verdict"]
    assert verdict["label"] == "NA"
    assert verdict["error"].startswith("ReadTimeout: ")
    assert "gave no answer within 0.3 s (2 attempts)" in verdict["error"]
    assert verdict["details"]["error_type"] == "ReadTimeout"
    assert len(ollama.calls()) == 2


async def test_dka_streamed_to_studio_retries_too(ollama: OllamaStub) -> None:
    # Studio streams messages: the model is then called through its streaming path.
    ollama.behaviour = Behaviour(answer="T", fail_times=2, fail_status=503)
    ctx = QuickRetryContext(model=OLLAMA, base_url=ollama.url)
    tokens, verdict = [], None
    async for mode, chunk in graph.astream({"fact": FACTS[0].as_input()}, context=ctx,
                                           stream_mode=["messages", "values"]):
        if mode == "messages" and isinstance(chunk[0], AIMessageChunk):
            tokens.append(chunk[0].content)
        elif "verdict" in chunk:
            verdict = chunk["verdict"]
    assert "".join(tokens) == "T"
    assert verdict is not None and verdict["label"] == "T" and verdict["tokens_out"] == 2
    assert len(ollama.calls()) == 3


def _invoke(ctx: DKAContext, after: Any = None) -> Any:
    compiled = graph

    async def invoke(fact: Fact) -> dict[str, Any]:
        out = await compiled.ainvoke({"fact": fact.as_input()}, context=ctx,
                                     config={"recursion_limit": RECURSION_LIMIT})
        if after is not None:
            after()
        return out

    return invoke


def _records(out_dir: Path) -> list[dict[str, Any]]:
    lines = (out_dir / VERDICTS).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


async def test_run_stops_when_ollama_goes_away_and_keeps_verdicts(
        ollama: OllamaStub, tmp_path: Path) -> None:
    ollama.behaviour = Behaviour(answer="T")
    ctx = QuickRetryContext(model=OLLAMA, base_url=ollama.url, timeout=0.5, max_retries=2)

    def crash_after_three() -> None:
        # The server dies after three answers: every later fact finds the port closed.
        if ollama.answered >= 3:
            ollama.stop()

    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=[OLLAMA])
    result = await check_facts(FACTS, _invoke(ctx, crash_after_three), info, tmp_path,
                             concurrency=1, show_progress=False)
    assert result.aborted
    assert "could not reach the model" in result.aborted
    assert f"cannot reach {OLLAMA} at " in result.aborted and "(3 attempts)" in result.aborted
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["aborted"] == result.aborted
    records = _records(tmp_path)
    answered = [r for r in records if not r["error"]]
    failed = [r for r in records if r["error"]]
    assert [r["fact_id"] for r in answered] == ["f0", "f1", "f2"]
    assert all(r["label"] == "T" and r["tokens_in"] == 26 for r in answered)
    assert len(failed) == 5  # the runner's limit at concurrency 1
    assert all(r["details"]["error_type"] == "ConnectError" for r in failed)
    assert len(records) < len(FACTS)


async def test_run_stops_at_once_on_a_missing_model(ollama: OllamaStub, tmp_path: Path) -> None:
    ollama.behaviour = Behaviour(fail_times=99, fail_status=404)
    ctx = QuickRetryContext(model=OLLAMA, base_url=ollama.url)
    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=[OLLAMA])
    result = await check_facts(FACTS, _invoke(ctx), info, tmp_path, concurrency=1,
                             show_progress=False)
    assert result.aborted and "UnknownModelError" in result.aborted
    assert "not found" in result.aborted
    assert len(_records(tmp_path)) == 1


async def test_run_stops_when_openai_server_is_unreachable(tmp_path: Path) -> None:
    ctx = QuickRetryContext(model="openai-compatible:m", base_url=refused_url("/v1"),
                            timeout=0.5, max_retries=0)
    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=["openai-compatible:m"])
    result = await check_facts(FACTS, _invoke(ctx), info, tmp_path, concurrency=1,
                             show_progress=False)
    assert result.aborted and "cannot reach openai-compatible:m" in result.aborted
    assert len(_records(tmp_path)) == 5


async def test_the_api_key_stays_out_of_files_and_logs(
        server: OpenAIStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    # Two failures (retried), then answers; one more fact meets an auth failure.
    server.behaviour = Behaviour(answer="T", fail_times=2, fail_status=503, retry_after_ms=5)
    caplog.set_level(logging.DEBUG)
    ctx = QuickRetryContext(model="openai:gpt-4o-mini", base_url=server.url, timeout=2.0,
                            max_retries=2)
    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=["openai:gpt-4o-mini"],
                   settings={"model": ctx.model, "base_url": ctx.base_url})
    result = await check_facts(FACTS[:4], _invoke(ctx), info, tmp_path, concurrency=2,
                             show_progress=False)
    server.behaviour = Behaviour(fail_times=99, fail_status=401)
    await check_facts(FACTS[4:5], _invoke(ctx), info, tmp_path / "denied", concurrency=1,
                    show_progress=False)
    assert not result.aborted
    assert [r["label"] for r in _records(tmp_path)] == ["T"] * 4
    denied = _records(tmp_path / "denied")
    assert denied[0]["error"] and denied[0]["label"] == "NA"
    # The key did reach the server, and nowhere else.
    assert server.calls()[0].headers["authorization"] == f"Bearer {KEY}"
    written = [p.read_text(encoding="utf-8") for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in tmp_path.rglob("*.json*")} >= {"verdicts.jsonl", "summary.json",
                                                          "run.json"}
    assert caplog.text, "debug logging should have recorded the HTTP exchanges"
    captured = capsys.readouterr()
    for text in [*written, caplog.text, captured.out, captured.err]:
        assert KEY not in text


# --- Whole-call time limits, cut-short and unreadable replies ----------------------------

async def test_truncated_ollama_stream_is_not_an_answer(ollama: OllamaStub) -> None:
    # The answer's chunks arrive, then the response ends without Ollama's ``done`` chunk.
    ollama.behaviour = Behaviour(answer="T", truncate=True)
    model = resolve_model(OLLAMA, fast(base_url=ollama.url, max_retries=0))
    for call in (model.ainvoke, model.invoke):
        with pytest.raises(ModelReplyError, match=rf'{OLLAMA} at {ollama.url} ended .*"done"'):
            result = call([HumanMessage("?")])
            if hasattr(result, "__await__"):
                await result
    with pytest.raises(ModelReplyError):
        async for _ in model.astream([HumanMessage("?")]):
            pass
    ctx = QuickRetryContext(model=OLLAMA, base_url=ollama.url, max_retries=0)
    verdict = (await graph.ainvoke({"fact": FACTS[0].as_input()}, context=ctx))["verdict"]
    assert verdict["label"] == "NA" and verdict["details"]["error_type"] == "ModelReplyError"


async def test_timeout_bounds_a_call_that_drips_empty_chunks(ollama: OllamaStub) -> None:
    # Each chunk restarts the HTTP read timeout; only a bound on the whole call ends this.
    ollama.behaviour = Behaviour(drip=0.2)
    model = resolve_model(OLLAMA, fast(base_url=ollama.url, timeout=1, max_retries=0))
    started = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        await model.ainvoke([HumanMessage("?")])
    assert f"{OLLAMA} at {ollama.url} gave no answer within 1 s (1 attempt)" in str(info.value)
    with pytest.raises(TimeoutError, match="within 1 s"):
        async for _ in model.astream([HumanMessage("?")]):
            pass
    with pytest.raises(TimeoutError, match="within 1 s"):
        model.invoke([HumanMessage("?")])
    # The stub drips for 30 s per call unless the client hangs up: the calls were cut.
    assert time.monotonic() - started < MAX_HANG_SECONDS


@pytest.mark.parametrize("kind", ["ollama", "openai"])
async def test_a_reply_that_is_not_json_names_the_model_and_url(kind: str) -> None:
    stub_class, spec = (OllamaStub, OLLAMA) if kind == "ollama" else (
        OpenAIStub, "openai-compatible:m")
    with stub_class(Behaviour(garbage=True)) as stub:
        model = resolve_model(spec, fast(base_url=stub.url, max_retries=0))
        with pytest.raises(ModelReplyError) as info:
            await model.ainvoke([HumanMessage("?")])
        assert f"{spec} at {stub.url} sent a reply that is not JSON" in str(info.value)


@pytest.mark.parametrize("behaviour", [Behaviour(fail_times=99, fail_status=503),
                                       Behaviour(fail_times=99, fail_status=500),
                                       Behaviour(garbage=True),
                                       Behaviour(truncate=True)],
                         ids=["503", "500", "garbage", "truncated"])
async def test_run_stops_after_a_run_of_server_failures(ollama: OllamaStub, tmp_path: Path,
                                                        behaviour: Behaviour) -> None:
    ollama.behaviour = behaviour
    ctx = QuickRetryContext(model=OLLAMA, base_url=ollama.url, max_retries=0)
    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=[OLLAMA])
    result = await check_facts(FACTS, _invoke(ctx), info, tmp_path, concurrency=1,
                             show_progress=False)
    assert result.aborted, "the run went through every fact"
    assert "5 facts in a row got no usable answer from the model server" in result.aborted
    assert f"{OLLAMA} at {ollama.url}" in result.aborted
    assert result.summary["aborted_because"] == "server"
    assert len(_records(tmp_path)) == 5


async def test_openai_429_stops_a_run(server: OpenAIStub, tmp_path: Path) -> None:
    server.behaviour = Behaviour(fail_times=99, fail_status=429, retry_after_ms=1)
    ctx = QuickRetryContext(model="openai-compatible:m", base_url=server.url, max_retries=0)
    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=[ctx.model])
    result = await check_facts(FACTS, _invoke(ctx), info, tmp_path, concurrency=1,
                             show_progress=False)
    assert result.aborted and "HTTP 429" in result.aborted
    assert "no usable answer from the model server" in result.aborted


def test_kgcheck_run_fails_a_dripping_fact_within_its_timeout(ollama: OllamaStub,
                                                                tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kgcheck.cli import app

    ollama.behaviour = Behaviour(drip=0.5)
    result = CliRunner().invoke(app, [
        "run", "--dataset", "yago", "--limit", "1", "--model", OLLAMA, "--base-url", ollama.url,
        "--set", "timeout=1", "--set", "max_retries=0", "--no-progress",
        "--out", str(tmp_path / "run")])
    assert result.exit_code == 1
    record = _records(tmp_path / "run")[0]
    assert record["label"] == "NA" and record["details"]["error_type"] == "TimeoutError"
    assert f"{OLLAMA} at {ollama.url} gave no answer within 1 s (1 attempt)" in record["error"]
    assert "every fact failed" in result.stderr and f"{OLLAMA} at {ollama.url}" in result.stderr
