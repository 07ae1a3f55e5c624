"""Studio: ``langgraph dev`` on 127.0.0.1 serves every graph of langgraph.json.

The server runs as ``make studio`` starts it (quiet flags, no browser), with the project's
langgraph.json, from a temporary folder; the SDK lists the graphs, reads consensus's
graph with xray, runs each graph on one fact with replay, and runs with overridden Context
(another prompt file per run; another model and attempts cap per assistant). The
langgraph.json in the repository is the one the registry gives.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from kgcheck.data.datasets import load_facts
from tests.support.stubs import Behaviour, OllamaStub

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "langgraph.json"
GRAPHS = ("dka", "dka-sc", "giv-z", "giv-f", "rag", "consensus")
# Served too: the rules strategy needs an ontology rather than a model, and the review
# graph pauses for a person rather than checking a fact.
SERVED = (*GRAPHS, "schema", "review")
QUIET = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true",
         "LANGSMITH_TRACING": "false"}
STARTUP_SECONDS = 90


def _config() -> dict:
    return json.loads(CONFIG.read_text())


def _graph_spec(name: str) -> str:
    spec = _config()["graphs"][name]
    return spec["path"] if isinstance(spec, dict) else spec


@dataclass
class Studio:
    url: str
    served: list[str]
    log: Path
    startup_seconds: float = 0.0

    def blocking_errors(self) -> list[str]:
        return [line for line in self.log.read_text(errors="replace").splitlines()
                if "BlockingError" in line or "Blocking call" in line]


@contextmanager
def serve_studio(tmp: Path, env: dict[str, str] | None = None) -> Iterator[Studio]:
    """Run ``langgraph dev`` as ``make studio`` does, from ``tmp``, on a free loopback port.

    The environment is this process's without OTel and LangSmith settings, plus the quiet
    flags and ``env``; the server stops (with the workers it started) on exit.
    """
    config = _config()
    # The project's langgraph.json. The server runs in a temporary folder, where it keeps
    # its state (.langgraph_api) and reads no .env, so a developer's Studio state and
    # settings stay untouched; the project is its dependency by absolute path, not ".".
    served_config = {**config, "disable_persistence": True,
                     "dependencies": [str(ROOT) if d == "." else d
                                      for d in config["dependencies"]]}
    config_path = tmp / "langgraph.json"
    config_path.write_text(json.dumps(served_config))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server_env = {k: v for k, v in os.environ.items()
                  if not k.startswith(("OTEL_", "LANGSMITH_"))}
    server_env.update(QUIET)
    server_env.update(env or {})
    log = tmp / "server.log"
    # The CLI installed next to the interpreter running the tests (the project's venv).
    langgraph = Path(sys.executable).parent / "langgraph"
    if not langgraph.exists():
        pytest.fail(f"langgraph CLI not found at {langgraph}: install the test extras")
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(langgraph), "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser",
             "--no-reload", "--config", str(config_path)],
            cwd=tmp, env=server_env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = started + STARTUP_SECONDS
        while True:
            if proc.poll() is not None:
                pytest.fail(f"langgraph dev exited with {proc.returncode}:\n"
                            + log.read_text()[-4000:])
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("langgraph dev did not answer /ok:\n" + log.read_text()[-4000:])
            time.sleep(0.3)
        yield Studio(url=url, served=sorted(served_config["graphs"]), log=log,
                     startup_seconds=time.monotonic() - started)
    finally:
        # The server runs in its own session: stop it and the workers it started.
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def studio(tmp_path_factory) -> Iterator[Studio]:
    with serve_studio(tmp_path_factory.mktemp("studio")) as served:
        yield served


def _client(studio: Studio):
    from langgraph_sdk import get_client

    return get_client(url=studio.url, api_key=None)


def _fact(fact_id: str = "5") -> dict:
    fact = next(f for f in load_facts("yago") if f.id == fact_id)
    # What a person fills in Studio: the triple, its KG and its id.
    return {"subject": fact.subject, "predicate": fact.predicate, "object": fact.object,
            "dataset": "YAGO", "id": fact_id}


def test_config_is_the_one_the_registry_gives(monkeypatch) -> None:
    from kgcheck.graphs.served import langgraph_config

    # Rewrite it with `kgcheck studio --write-config langgraph.json` after adding a strategy.
    assert _config() == langgraph_config()
    assert set(_config()["graphs"]) == set(SERVED)
    for name in SERVED:
        # Served through kgcheck.studio, which starts tracing before the graphs are built.
        assert _graph_spec(name) == f"kgcheck.studio:{name.replace('-', '_')}"
    assert _config()["dependencies"] == ["."]
    assert _config()["env"] == ".env"
    # Imported here without an endpoint (untraced): the registry's graphs, compiled.
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    studio = importlib.import_module("kgcheck.studio")
    for name in SERVED:
        graph = getattr(studio, name.replace("-", "_"))
        assert graph.name == name
    with pytest.raises(AttributeError, match="serves no graph 'nope'"):
        studio.nope  # noqa: B018


async def test_assistants_list_every_graph(studio: Studio) -> None:
    client = _client(studio)
    assistants = await client.assistants.search(limit=100)
    system = {a["graph_id"] for a in assistants if a["metadata"].get("created_by") == "system"}
    assert system == set(studio.served) == set(SERVED)


async def test_the_review_graph_pauses_for_a_person_and_resumes(studio: Studio) -> None:
    client = _client(studio)
    fact = _fact("5")
    verdict = {"fact_id": "5", "label": "F", "method": "DKA", "model": "replay:gemma2:9b",
               "raw": "F", "raws": ["F"], "attempts": 1, "seconds": 0.1, "error": None,
               "details": {"evidence": [{"doc_id": "d1", "chunk_id": 0, "similarity": 0.8,
                                         "text": "Alexander III married Dagmar in 1866."}],
                           "documents": [{"doc_id": "d1", "url": "https://example.org/a"}]}}
    thread = await client.threads.create()
    paused = await asyncio.wait_for(client.runs.wait(
        thread["thread_id"], "review", input={"fact": fact, "verdict": verdict}), 60)
    assert "__error__" not in paused, paused.get("__error__")
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["ask_person"]
    question = state["tasks"][0]["interrupts"][0]["value"]
    assert question["fact"]["readable"]["text"] == (
        "Alexander III of Russia is married to Maria Feodorovna (Dagmar of Denmark)")
    assert question["model"]["label"] == "F"
    assert question["evidence"][0]["source"] == "https://example.org/a"

    # A malformed answer: the graph asks again, saying what was wrong.
    await asyncio.wait_for(client.runs.wait(thread["thread_id"], "review",
                                            command={"resume": {"label": "perhaps"}}), 60)
    state = await client.threads.get_state(thread["thread_id"])
    assert "label 'perhaps' is not one of T, F, skip" in (
        state["tasks"][0]["interrupts"][0]["value"]["problem"])

    done = await asyncio.wait_for(client.runs.wait(
        thread["thread_id"], "review", command={"resume": {"label": "T", "note": "married"}},
        context={"reviewer": "curator"}), 60)
    assert done["verdict"]["review"]["label"] == "T"
    assert done["verdict"]["review"]["note"] == "married"
    assert done["verdict"]["review"]["reviewer"] == "curator"
    assert done["verdict"]["label"] == "F"  # the model's label stays; the review says T
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == [] and not state["tasks"]


async def test_consensus_graph_with_xray_shows_the_member_subgraph(studio: Studio) -> None:
    client = _client(studio)
    flat = await client.assistants.get_graph("consensus")
    deep = await client.assistants.get_graph("consensus", xray=True)
    flat_ids = {n["id"] for n in flat["nodes"]}
    deep_ids = {n["id"] for n in deep["nodes"]}
    inner = {i for i in deep_ids if ":" in i}
    assert not any(":" in i for i in flat_ids)
    assert inner, deep_ids
    # The member subgraph is a strategy graph: its nodes show up by name.
    assert any(i.endswith(":ask_model") for i in inner), sorted(inner)


@pytest.mark.parametrize("name", GRAPHS)
async def test_each_graph_checks_one_fact_with_replay(studio: Studio, name: str,
                                                      tmp_path: Path) -> None:
    client = _client(studio)
    # RAG's default evidence is the sample corpus, which holds YAGO fact 10019; its Chroma
    # index goes to a temporary folder rather than the work tree.
    fact_id, context = ("10019", {"chroma_path": str(tmp_path / "chroma")}) if name == "rag" \
        else ("5", None)
    out = await asyncio.wait_for(
        client.runs.wait(None, name, input={"fact": _fact(fact_id)}, context=context), 180)
    assert "__error__" not in out, out.get("__error__")
    verdict = out["verdict"]
    assert verdict["fact_id"] == fact_id
    assert verdict["error"] is None
    assert verdict["label"] in ("T", "F")
    if name in ("dka", "giv-z", "giv-f", "dka-sc"):
        # The recorded gemma2:9b answers to this fact are T.
        assert verdict["label"] == "T" and verdict["model"] == "replay:gemma2:9b"
    if name == "rag":
        assert verdict["details"]["evidence"], verdict["details"]
    if name == "consensus":
        assert len(verdict["details"]["votes"]) == 4
    assert not studio.blocking_errors(), studio.blocking_errors()


async def test_a_run_with_another_prompt_file_uses_it(studio: Studio, tmp_path: Path) -> None:
    prompt = tmp_path / "terse.txt"
    prompt.write_text("TERSE CHECK ({dataset}): {subject} -- {predicate} -- {object}? T or F.")
    client = _client(studio)
    thread = await client.threads.create()
    out = await client.runs.wait(thread["thread_id"], "dka", input={"fact": _fact()},
                                 context={"prompt": str(prompt)})
    assert "__error__" not in out, out.get("__error__")
    # The output is the verdict; the conversation is in the thread's state.
    assert set(out) == {"verdict"}
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["messages"][0]["content"] == (
        'TERSE CHECK (YAGO): "Alexander III of Russia" -- "is married to" -- '
        '"Maria Feodorovna (Dagmar of Denmark)"? T or F.'
    )
    assert out["verdict"]["label"] == "T"


async def test_an_assistant_with_another_model_and_attempts_cap(studio: Studio) -> None:
    client = _client(studio)
    # A live model (an Ollama stub on loopback) that never answers within the guidelines.
    with OllamaStub(Behaviour(answer="It is hard to say without a source.")) as stub:
        assistant = await client.assistants.create(
            "giv-z", name="giv-two-attempts",
            context={"model": "ollama:stub-model", "base_url": stub.url, "max_attempts": 2,
                     "max_retries": 0},
        )
        out = await client.runs.wait(None, assistant["assistant_id"], input={"fact": _fact()})
        calls = stub.calls()
    assert "__error__" not in out, out.get("__error__")
    verdict = out["verdict"]
    assert verdict["model"] == "ollama:stub-model"
    assert verdict["label"] == "NA"
    assert verdict["attempts"] == 2 and len(calls) == 2
    # The second call carried the follow-up turn of the same conversation: the guidelines
    # (system), the fact, the first answer, the follow-up.
    assert [m["role"] for m in calls[1].body["messages"]] == ["system", "user", "assistant",
                                                              "user"]
    assert not studio.blocking_errors(), studio.blocking_errors()


async def test_a_flat_fact_gets_an_error_that_shows_the_expected_shape(studio: Studio) -> None:
    client = _client(studio)
    with pytest.raises(Exception, match="InvalidGraphInput") as raised:
        await client.runs.wait(None, "dka", input=_fact())  # not under "fact"
    assert 'takes {"fact": {"subject": "...", "predicate": "...", "object": "..."' in str(
        raised.value)
