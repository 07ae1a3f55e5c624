"""Studio tracing: ``langgraph dev`` runs send OpenLIT spans when an OTLP endpoint is set.

The server starts as in tests/e2e/test_studio_langgraph_dev.py, with
``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at an OTLP/HTTP receiver on 127.0.0.1 that decodes
the protobuf exports; a ``dka`` run of one vendored fact through the SDK must come back as
one trace of workflow, node and model spans that carry the fact id. With no collector
answering, the server serves untraced and says so once in its log. The server pulls each
item of a run's stream from a task of its own; a unit test checks that the streams still
run in one context.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_studio_langgraph_dev import Studio, _client, _fact, serve_studio
from tests.support.stubs.otlp import OTLPReceiver, otlp_receiver

# Export finished spans every 100 ms instead of every 5 s, so the test need not wait long.
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
SPAN_WAIT_SECONDS = 15
NODES = ("build_prompt", "ask_model", "decide")


@pytest.fixture
def receiver(free_port: int) -> Iterator[OTLPReceiver]:
    with otlp_receiver(free_port) as server:
        yield server


def _wait_for_spans(receiver: OTLPReceiver) -> list[dict[str, Any]]:
    """Return the spans received once the workflow, its nodes and a model call are in."""
    wanted = {"invoke_workflow dka", *(f"invoke_agent {n}" for n in NODES)}
    spans = receiver.spans
    deadline = time.monotonic() + SPAN_WAIT_SECONDS
    while time.monotonic() < deadline:
        names = {s["name"] for s in spans}
        if wanted <= names and any(n.startswith("chat ") for n in names):
            break
        time.sleep(0.1)
    return list(spans)


def _run_dka(studio: Studio, metadata: dict[str, str] | None = None) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        client = _client(studio)
        return await asyncio.wait_for(
            client.runs.wait(None, "dka", input={"fact": _fact("5")}, metadata=metadata), 60)

    out = asyncio.run(run())
    assert "__error__" not in out, out.get("__error__")
    assert out["verdict"]["label"] == "T" and out["verdict"]["model"] == "replay:gemma2:9b"
    return out


@pytest.mark.slow
def test_a_studio_run_is_one_trace_of_workflow_node_and_model_spans(tmp_path, receiver) -> None:
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    with serve_studio(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, **FAST_EXPORT}) as studio:
        _run_dka(studio, metadata={"kgcheck_run_id": "studio-run-1"})
        spans = _wait_for_spans(receiver)
        log = studio.log.read_text(errors="replace")
        assert not studio.blocking_errors(), studio.blocking_errors()
    names = sorted(s["name"] for s in spans)
    by_id = {s["id"]: s for s in spans}

    # OpenLIT wraps astream twice; the outer span is the run's root.
    workflow = next((s for s in spans if s["name"].startswith("invoke_workflow dka")
                     and s["parent"] is None), None)
    assert workflow is not None, names
    nodes = {n: [s for s in spans if s["name"] == f"invoke_agent {n}"] for n in NODES}
    assert all(len(found) == 1 for found in nodes.values()), names
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert [c["name"] for c in chats] == ["chat gemma2:9b"], names
    run_spans = [workflow, chats[0], *(found[0] for found in nodes.values())]

    # One trace: every node and the model call hang under the workflow, though the server
    # pulls each step of the run from a task of its own.
    for span in run_spans:
        assert span["trace"] == workflow["trace"], (span["name"], names)
        ancestor = span
        while ancestor["parent"] is not None:
            ancestor = by_id[ancestor["parent"]]
        assert ancestor is workflow, span["name"]
    for span in run_spans:
        assert span["service"] == "kgcheck"
        assert span["attributes"]["kgcheck.fact_id"] == "5", span
        assert span["attributes"]["kgcheck.dataset"] == "YAGO", span
        # The run's metadata reaches the spans as it does for kgcheck run.
        assert span["attributes"]["kgcheck.run_id"] == "studio-run-1", span
    chat = chats[0]["attributes"]
    assert chat["gen_ai.request.model"] == "gemma2:9b"
    assert chat["kgcheck.method"] == "DKA" and chat["kgcheck.step"] == "verdict"
    assert chat["gen_ai.usage.output_tokens"] >= 1

    assert f"tracing Studio runs: spans go to {endpoint}/v1/traces" in log
    assert "tracing is off" not in log
    assert "started after" not in log  # no graph was built before tracing started
    assert "Failed to detach context" not in log  # each span ended where it began


@pytest.mark.slow
def test_without_a_collector_the_server_serves_untraced(tmp_path, free_port) -> None:
    # Nothing listens on free_port: the endpoint is set, but no collector answers.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port}", **FAST_EXPORT}
    with serve_studio(tmp_path, env) as studio:
        _run_dka(studio)
        log = studio.log.read_text(errors="replace")
    off = [line for line in log.splitlines() if "tracing is off" in line]
    assert len(off) == 1, log[-4000:]
    assert f"no OTLP collector answers at http://127.0.0.1:{free_port}/v1/traces" in off[0]
    assert "tracing Studio runs" not in log
    # Untraced: no exporter keeps retrying the dead endpoint.
    assert "Failed to export" not in log and "Transient error" not in log, log[-4000:]


async def test_each_step_of_a_stream_runs_in_the_context_it_started_in() -> None:
    from kgcheck.tracing import _stream_in_one_context

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[str] = []
    gate = asyncio.Event()

    async def stream() -> Any:
        var.set("started")
        try:
            for i in range(3):
                await asyncio.sleep(0)
                seen.append(var.get())
                yield i
            await gate.wait()
        except asyncio.CancelledError:
            seen.append("cancelled in " + var.get())
            raise
        finally:
            seen.append("closed in " + var.get())

    async def pull(items: Any) -> Any:
        return await anext(items)

    # As the server does: every item from a new task, a copy of the caller's context.
    plain = stream()
    assert [await asyncio.create_task(pull(plain)) for _ in range(2)] == [0, 1]
    await plain.aclose()
    assert seen == ["started", "unset", "closed in unset"]

    seen.clear()
    whole = _stream_in_one_context(stream())
    assert [await asyncio.create_task(pull(whole)) for _ in range(3)] == [0, 1, 2]
    waiting = asyncio.create_task(pull(whole))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert seen == ["started"] * 3 + ["cancelled in started", "closed in started"]
    assert var.get() == "unset"  # the caller's own context is untouched
    await whole.aclose()


def test_langgraph_is_patched_in_one_module_only() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    patching = sorted(
        str(path.relative_to(root))
        for folder in ("kgcheck", "graphs", "retrievers", "evals")
        for path in (root / folder).rglob("*.py")
        if "Pregel" in path.read_text(encoding="utf-8"))
    assert patching == ["kgcheck/tracing.py"]


def test_pregel_is_wrapped_once_per_purpose() -> None:
    import subprocess
    import sys

    # In a process of its own: the wrappers stay on the class for the process's life.
    script = """
import asyncio
from langgraph.graph import StateGraph, START, END
from langgraph.pregel import Pregel
from typing_extensions import TypedDict
from kgcheck.tracing import trace_streams_whole

class S(TypedDict):
    n: int

builder = StateGraph(S)
builder.add_node("inc", lambda s: {"n": s["n"] + 1})
builder.add_edge(START, "inc")
builder.add_edge("inc", END)
graph = builder.compile()
bare = Pregel.__dict__["astream"]
trace_streams_whole()
once = Pregel.__dict__["astream"]
trace_streams_whole()
assert Pregel.__dict__["astream"] is once and once is not bare and once.__wrapped__ is bare

async def main():
    return [chunk async for chunk in graph.astream({"n": 1})]

print(asyncio.run(main()))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[{'inc': {'n': 2}}]"
