"""Tracing: OpenLIT spans for workflow, nodes, model calls and Chroma, with run and fact ids.

OpenLIT instruments LangChain and LangGraph for the whole process, so every traced run
happens in a subprocess; the spans come back as JSON (in-memory exporter) or over OTLP/HTTP
to a receiver this test runs on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stubs.otlp import OTLPReceiver, otlp_receiver

ROOT = Path(__file__).resolve().parents[2]

# Records every socket connection the child process makes, to prove none leaves loopback.
CONNECTION_RECORDER = """
import atexit, json, socket, sys
CONNECTIONS = []
_connect = socket.socket.connect
def _recording_connect(self, address):
    CONNECTIONS.append(list(address) if isinstance(address, tuple) else [str(address)])
    return _connect(self, address)
socket.socket.connect = _recording_connect
_CONNECTIONS_FILE = sys.argv[2]
# Registered first, so it runs last: after the tracer provider has flushed at exit.
atexit.register(lambda: open(_CONNECTIONS_FILE, "w").write(json.dumps(CONNECTIONS)))
"""

IN_MEMORY_RUN = CONNECTION_RECORDER + """
import asyncio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from kgcheck.tracing import setup_tracing

setup = setup_tracing(force=True)
assert setup is not None and not setup.own_provider
assert setup_tracing(force=True) is setup  # once only

import chromadb
from chromadb.config import Settings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from tests.support.scripted import register_scripted
from kgcheck.graphs.registry import get_strategy

usage = {"input_tokens": 31, "output_tokens": 1, "total_tokens": 32}
register_scripted("counted", lambda: GenericFakeChatModel(
    messages=iter([AIMessage(content="T", usage_metadata=usage)])))
dka = get_strategy("dka")
graph = dka.compile()
fact = {"id": "5", "dataset": "YAGO", "subject": "Alexander_III_of_Russia",
        "predicate": "isMarriedTo", "object": "Maria_Feodorovna__Dagmar_of_Denmark_"}
out = asyncio.run(graph.ainvoke({"fact": fact}, context=dka.make_context(model="scripted:counted"),
                                config={"metadata": {"kgcheck_run_id": "run-42"}}))
assert out["verdict"]["label"] == "T", out["verdict"]

# A node that queries Chroma off the event loop, as the RAG graph does.
client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
collection = client.get_or_create_collection("evidence", embedding_function=None)
collection.add(ids=["d1", "d2"], embeddings=[[1.0, 0.0], [0.0, 1.0]],
               documents=["married in 1866", "a painter"])

class State(TypedDict):
    fact: dict
    hits: list

async def retrieve(state: State) -> dict:
    found = await asyncio.to_thread(collection.query, query_embeddings=[[1.0, 0.1]], n_results=1)
    return {"hits": found["ids"][0]}

builder = StateGraph(State)
builder.add_node("retrieve", retrieve)
builder.add_edge(START, "retrieve")
builder.add_edge("retrieve", END)
found = asyncio.run(builder.compile(name="lookup").ainvoke(
    {"fact": {**fact, "id": "6"}}, config={"metadata": {"kgcheck_run_id": "run-42"}}))
assert found["hits"] == ["d1"]

spans = [{
    "name": s.name,
    "id": s.context.span_id,
    "parent": s.parent.span_id if s.parent else None,
    "attributes": {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.attributes.items()},
} for s in exporter.get_finished_spans()]
open(sys.argv[1], "w").write(json.dumps(spans))
"""

CLI_RUN = CONNECTION_RECORDER + """
from kgcheck.cli import app

app(args=sys.argv[3:], prog_name="kgcheck")
"""


def _run(script: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None,
         name: str = "child") -> tuple[subprocess.CompletedProcess, list, Path]:
    code = tmp_path / f"{name}.py"
    code.write_text(textwrap.dedent(script))
    out = tmp_path / f"{name}.json"
    connections = tmp_path / f"{name}-connections.json"
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENLIT_"))}
    # The project root on the path, for the scripted test provider (tests/support/scripted.py).
    child_env.update({"ANONYMIZED_TELEMETRY": "False", "PYTHONPATH": str(ROOT), **(env or {})})
    proc = subprocess.run([sys.executable, str(code), str(out), str(connections), *args],
                          cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc, json.loads(connections.read_text()), out


def _by_name(spans: list[dict], name: str) -> dict:
    matches = [s for s in spans if s["name"] == name]
    assert matches, f"no span {name!r} among {sorted({s['name'] for s in spans})}"
    return matches[0]


@pytest.mark.slow
def test_in_memory_spans_cover_workflow_nodes_model_and_chroma(tmp_path: Path) -> None:
    proc, connections, out = _run(IN_MEMORY_RUN, tmp_path)
    spans = json.loads(out.read_text())

    workflow = _by_name(spans, "invoke_workflow dka")
    nodes = {n: _by_name(spans, f"invoke_agent {n}") for n in ("build_prompt", "ask_model",
                                                               "decide")}
    chat = next(s for s in spans if s["name"].startswith("chat "))
    for span in [workflow, chat, *nodes.values()]:
        assert span["attributes"]["kgcheck.run_id"] == "run-42"
        assert span["attributes"]["kgcheck.fact_id"] == "5"
        assert span["attributes"]["kgcheck.dataset"] == "YAGO"
    assert all(node["parent"] == workflow["id"] for node in nodes.values())

    # The model call: under its node, with model, tokens in/out, latency and the call's step.
    assert chat["parent"] == nodes["ask_model"]["id"]
    attrs = chat["attributes"]
    assert attrs["gen_ai.request.model"] == "GenericFakeChatModel"
    assert attrs["gen_ai.usage.input_tokens"] == 31
    assert attrs["gen_ai.usage.output_tokens"] == 1
    assert attrs["gen_ai.client.operation.duration"] > 0
    assert attrs["kgcheck.method"] == "DKA" and attrs["kgcheck.step"] == "verdict"
    assert attrs["gen_ai.usage.cost"] == 0

    # Chroma calls made inside a node carry the fact of that run.
    query = _by_name(spans, "GET evidence")
    assert query["attributes"]["db.system.name"] == "chroma"
    assert query["attributes"]["kgcheck.fact_id"] == "6"
    assert query["parent"] == _by_name(spans, "invoke_agent retrieve")["id"]

    # Content capture is off: no prompt, answer or document text on any span.
    for span in spans:
        text = json.dumps(span["attributes"])
        assert "Maria Feodorovna" not in text and "married in 1866" not in text, span["name"]
    assert '"trace_id"' not in proc.stdout  # no console dump
    assert connections == []  # the pricing comes from the shipped file: no network at init


@pytest.mark.slow
def test_message_content_is_captured_only_when_asked(tmp_path: Path) -> None:
    _, _, out = _run(IN_MEMORY_RUN, tmp_path,
                     env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
    chat = next(s for s in json.loads(out.read_text()) if s["name"].startswith("chat "))
    assert "Maria Feodorovna" in chat["attributes"]["gen_ai.input.messages"]


@pytest.fixture
def receiver(free_port: int) -> Iterator[OTLPReceiver]:
    with otlp_receiver(free_port) as server:
        yield server


@pytest.mark.slow
def test_kgcheck_run_trace_sends_spans_to_an_otlp_receiver(tmp_path: Path, receiver) -> None:
    port = receiver.server_address[1]
    out_dir = tmp_path / "run"
    proc, connections, _ = _run(
        CLI_RUN, tmp_path, "run", "--dataset", "yago", "--method", "dka", "--model",
        "replay:gemma2:9b", "--limit", "2", "--concurrency", "2", "--out", str(out_dir),
        "--no-progress", "--trace",
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}, name="cli",
    )
    records = [json.loads(line) for line in (out_dir / "verdicts.jsonl").read_text().splitlines()]
    run_id = records[0]["run_id"]
    fact_ids = {r["fact_id"] for r in records}
    spans = receiver.spans
    assert "/v1/traces" in receiver.paths
    assert set(receiver.content_types) == {"application/x-protobuf"}

    workflows = [s for s in spans if s["name"] == "invoke_workflow dka"]
    chats = [s for s in spans if s["name"] == "chat gemma2:9b"]
    nodes = [s for s in spans if s["name"].startswith("invoke_agent ")]
    assert len(workflows) == 2 and len(chats) == 2 and len(nodes) == 6
    assert {s["service"] for s in spans} == {"kgcheck"}
    for span in workflows + chats + nodes:
        assert span["attributes"]["kgcheck.run_id"] == run_id
    assert {s["attributes"]["kgcheck.fact_id"] for s in chats} == fact_ids
    assert all(s["attributes"]["gen_ai.request.model"] == "gemma2:9b" for s in chats)
    assert all(s["attributes"]["gen_ai.usage.output_tokens"] >= 1 for s in chats)

    # Every connection the run made went to the receiver on loopback.
    assert connections, "the exporter never connected"
    assert all(c[0] == "127.0.0.1" and c[1] == port for c in connections), connections
    assert '"trace_id"' not in proc.stdout


def test_tracing_stays_off_without_endpoint_or_flag(monkeypatch) -> None:
    from kgcheck import tracing

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert tracing.tracing_requested() is False
    if tracing.current_setup() is None:
        assert tracing.setup_tracing() is None
        assert tracing.current_setup() is None


def test_shipped_pricing_file_prices_models_per_thousand_tokens() -> None:
    from kgcheck.tracing import PRICING_FILE

    prices = json.loads(PRICING_FILE.read_text())
    assert prices["chat"]["gpt-4o-mini"] == {"promptPrice": 0.00015, "completionPrice": 0.0006}
    assert prices["chat"]["gemma2:9b"]["promptPrice"] == 0
    assert "embeddings" in prices


def test_bad_endpoint_is_rejected_with_its_value(monkeypatch) -> None:
    from kgcheck import tracing

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    with pytest.raises(tracing.TracingError, match=r"'127\.0\.0\.1:4318': expected an http"):
        tracing.traces_endpoint()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")
    assert tracing.traces_endpoint() == "http://127.0.0.1:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/x")
    assert tracing.traces_endpoint() == "http://127.0.0.1:9/x"


def test_a_collector_that_does_not_answer_stops_trace_early(monkeypatch, free_port,
                                                           caplog) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from kgcheck import tracing

    if tracing.current_setup() is not None or isinstance(trace.get_tracer_provider(),
                                                          TracerProvider):
        pytest.skip("tracing was started in this process")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port}")
    with pytest.raises(tracing.TracingError,
                       match=rf"--trace: no OTLP collector answers at http://127.0.0.1:"
                             rf"{free_port}/v1/traces"):
        tracing.setup_tracing(force=True)
    # Asked for by the environment alone, the run goes on untraced, with a warning.
    assert tracing.setup_tracing() is None
    assert "tracing is off" in caplog.text
    assert tracing.current_setup() is None


@pytest.mark.slow
def test_the_endpoint_alone_turns_tracing_on_for_kgcheck_run(tmp_path: Path, receiver) -> None:
    port = receiver.server_address[1]
    out_dir = tmp_path / "run"
    # No --trace: the standard environment variable is enough.
    _run(CLI_RUN, tmp_path, "run", "--dataset", "yago", "--method", "dka", "--model",
         "replay:gemma2:9b", "--limit", "2", "--out", str(out_dir), "--no-progress",
         env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}, name="env")
    assert "/v1/traces" in receiver.paths
    assert len([s for s in receiver.spans if s["name"] == "invoke_workflow dka"]) == 2
    assert len([s for s in receiver.spans if s["name"] == "chat gemma2:9b"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize("failure", [{"status": 503}, {"hang": True}], ids=["503", "hang"])
def test_a_failing_collector_costs_one_bounded_export_and_one_line(
        tmp_path: Path, free_port: int, failure: dict) -> None:
    out_dir = tmp_path / "run"
    with otlp_receiver(free_port, **failure) as collector:
        # Small batches: without a bound, every one of them would wait and retry in turn.
        proc, _, _ = _run(
            CLI_RUN, tmp_path, "run", "--dataset", "yago", "--method", "dka", "--model",
            "replay:gemma2:9b", "--limit", "6", "--out", str(out_dir), "--no-progress",
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port}",
                 "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4"}, name="failing")
        exports = [p for p in collector.paths if p == "/v1/traces"]
    assert len((out_dir / "verdicts.jsonl").read_text().splitlines()) == 6
    # One export was tried (the client retries a 503 within its few seconds); every later
    # batch was dropped without a request.
    assert 1 <= len(exports) <= 3, collector.paths
    lines = [line for line in proc.stderr.splitlines() if "could not be sent" in line]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert f"spans could not be sent to http://127.0.0.1:{free_port}/v1/traces" in lines[0]
    assert "Failed to export" not in proc.stderr
