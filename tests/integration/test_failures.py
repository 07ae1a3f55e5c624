"""The one failure taxonomy: how exceptions are classified, and what a run does with them."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from ollama import ResponseError

from kgcheck.data.facts import Fact
from kgcheck.failures import (
    Failure,
    classify,
    classify_name,
    classify_status,
    is_overload,
    is_transient,
    run_stop,
)
from kgcheck.graphs.strategies.dka import DKAContext, graph
from kgcheck.providers.pressure import Overloaded
from kgcheck.providers.resolve import UnknownProviderError
from kgcheck.providers.transports import ModelReplyError, UnknownModelError
from kgcheck.runs.runner import RECURSION_LIMIT, RunInfo, check_facts

REQUEST = httpx.Request("POST", "http://127.0.0.1:1/api/chat")


def _status(code: int) -> httpx.HTTPStatusError:
    response = httpx.Response(code, request=REQUEST)
    return httpx.HTTPStatusError(f"HTTP {code}", request=REQUEST, response=response)


def _openai(cls: type[openai.APIStatusError], code: int) -> openai.APIStatusError:
    return cls("failed", response=httpx.Response(code, request=REQUEST), body=None)


@pytest.mark.parametrize(("exc", "kind"), [
    (httpx.ConnectError("refused"), Failure.UNREACHABLE),
    (httpx.RemoteProtocolError("Server disconnected"), Failure.UNREACHABLE),
    (httpx.ReadError("reset"), Failure.UNREACHABLE),
    (ConnectionResetError(), Failure.UNREACHABLE),
    (httpx.ReadTimeout("slow"), Failure.TIMEOUT),
    (httpx.ConnectTimeout("slow"), Failure.TIMEOUT),
    (TimeoutError(), Failure.TIMEOUT),
    (_status(429), Failure.RATE_LIMITED),
    (_status(503), Failure.OVERLOADED),
    (_status(500), Failure.SERVER_ERROR),
    (_status(501), Failure.BAD_REQUEST),
    (_status(401), Failure.AUTH),
    (_status(400), Failure.BAD_REQUEST),
    (_status(408), Failure.TIMEOUT),
    (ResponseError("busy", 503), Failure.OVERLOADED),
    (ResponseError("no model", 404), Failure.BAD_REQUEST),
    (ResponseError("streamed error", -1), Failure.OTHER),
    (_openai(openai.RateLimitError, 429), Failure.RATE_LIMITED),
    (_openai(openai.AuthenticationError, 401), Failure.AUTH),
    (_openai(openai.PermissionDeniedError, 403), Failure.AUTH),
    (_openai(openai.InternalServerError, 502), Failure.OVERLOADED),
    (_openai(openai.BadRequestError, 400), Failure.BAD_REQUEST),
    (openai.APIConnectionError(request=REQUEST), Failure.UNREACHABLE),
    (openai.APITimeoutError(request=REQUEST), Failure.TIMEOUT),
    (Overloaded(429, "127.0.0.1"), Failure.RATE_LIMITED),
    (json.JSONDecodeError("Expecting value", "<html>", 0), Failure.BAD_REPLY),
    (ModelReplyError("cut short"), Failure.BAD_REPLY),
    (UnknownModelError("no such model"), Failure.CONFIG),
    (UnknownProviderError("no such provider"), Failure.CONFIG),
    (ValueError("this fact"), Failure.OTHER),
], ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value))
def test_exceptions_are_classified_by_status_then_type(exc: BaseException,
                                                       kind: Failure) -> None:
    assert classify(exc) is kind


def test_recorded_names_and_live_exceptions_agree() -> None:
    for exc in (httpx.ConnectError("x"), httpx.ReadTimeout("x"), TimeoutError(),
                ModelReplyError("x"), UnknownModelError("x"),
                openai.APITimeoutError(request=REQUEST)):
        assert classify_name(type(exc).__name__) is classify(exc)
    assert classify_name(None) is classify_name("NoVerdict") is Failure.OTHER


def test_retry_overload_and_stop_rules_follow_the_kind() -> None:
    assert is_transient(_status(500)) and is_transient(_status(429))
    assert is_transient(httpx.RemoteProtocolError("x")) and is_transient(TimeoutError())
    # A request the server says it cannot serve is not worth sending again.
    assert not is_transient(_status(501)) and not is_transient(_status(404))
    assert not is_transient(ModelReplyError("x")) and not is_transient(_status(401))
    assert is_overload(_status(429)) and is_overload(_status(504))
    assert is_overload(httpx.ConnectTimeout("x")) and is_overload(Failure.TIMEOUT)
    assert not is_overload(_status(500)) and not is_overload(_status(400))
    assert [classify_status(s) for s in (200, 404, 505)] == [
        Failure.OTHER, Failure.BAD_REQUEST, Failure.BAD_REQUEST]
    assert run_stop(Failure.CONFIG) == "config"
    assert run_stop(Failure.AUTH) == run_stop(Failure.TIMEOUT) == "unreachable"
    assert run_stop(Failure.BAD_REPLY) == run_stop(Failure.RATE_LIMITED) == "server"
    assert run_stop(Failure.BAD_REQUEST) is run_stop(Failure.OTHER) is None


@pytest.fixture
def hangs_up() -> Iterator[str]:
    """Serve a port that accepts each connection and closes it without a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


async def test_a_server_that_hangs_up_on_every_call_stops_the_run(hangs_up: str,
                                                                  tmp_path: Path) -> None:
    # httpx raises RemoteProtocolError here: a server that is there but drops every call.
    model = "ollama:gemma2:9b"
    ctx = DKAContext(model=model, base_url=hangs_up, max_retries=0, timeout=5.0)
    facts = [Fact(id=f"f{i}", dataset="YAGO", subject=f"S{i}", predicate="p", object="o",
                  label=True) for i in range(12)]

    async def invoke(fact: Fact) -> dict[str, Any]:
        return await graph.ainvoke({"fact": fact.as_input()}, context=ctx,
                                   config={"recursion_limit": RECURSION_LIMIT})

    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=[model])
    result = await check_facts(facts, invoke, info, tmp_path, concurrency=1,
                               show_progress=False)
    assert result.aborted and "could not reach the model" in result.aborted
    assert result.summary["aborted_because"] == "unreachable"
    lines = (tmp_path / "verdicts.jsonl").read_text().splitlines()
    assert len(lines) == 5
    # Dropped before or after the request was read: either way nothing can reach the model.
    assert {json.loads(line)["details"]["error_type"] for line in lines} <= {
        "RemoteProtocolError", "ReadError"}
