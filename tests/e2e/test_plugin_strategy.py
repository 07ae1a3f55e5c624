"""A strategy added from a plugin, without editing kgcheck: CLI, Python API and Studio.

The plugin is a folder on PYTHONPATH holding a module and its distribution's metadata,
whose entry point (group ``kgcheck.strategies``) names the strategy: ``dka-cot``, DKA with a
chain-of-thought prompt whose verdict stands on the last line. Its model is a stub Ollama
server on 127.0.0.1 that reasons before answering, mentioning both letters on the way.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from tests.support.stubs import Behaviour, OllamaStub

BIN = Path(sys.executable).parent
# Reasoning that names both labels, then the verdict on its last line.
ANSWER = ("Jurandot and Grodzienska were both Polish writers.\nT\nat first sight, but the "
          "record shows another spouse.\nVerdict: F")
MODULE = '''
"""dka-cot: DKA with a chain-of-thought prompt; the verdict is on the last line."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from kgcheck.graphs.registry import Strategy
from kgcheck.graphs.strategies import dka

PROMPT = Path(__file__).with_name("dka-cot.txt")


@dataclass(kw_only=True)
class DKACoTContext(dka.DKAContext):
    """Settings of a chain-of-thought DKA run."""

    METHOD: ClassVar[str] = "DKA-COT"
    REPLAYS: ClassVar[str | None] = None  # the study recorded no such answers

    prompt: str = field(default=str(PROMPT), metadata={"description": "The CoT prompt."})
    parser: str = field(default="last-line", metadata={"description": "Verdict on the last line."})


strategy = Strategy("dka-cot", DKACoTContext, dka.build,
                    description="DKA with chain-of-thought: reasons, then a last-line verdict.")
'''
PROMPT = ("Think step by step: is it true that {subject} {predicate} {object}? Reason first, "
          "then end with one last line, 'Verdict: T' or 'Verdict: F'.")


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    """A folder with the plugin module, its prompt and its distribution's metadata."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "dka_cot_plugin.py").write_text(textwrap.dedent(MODULE))
    (root / "dka-cot.txt").write_text(PROMPT)
    info = root / "dka_cot_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dka-cot-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[kgcheck.strategies]\ndka-cot = dka_cot_plugin:strategy\n")
    return root


@pytest.fixture
def thinker():
    with OllamaStub(Behaviour(answer=ANSWER), models=("thinker:latest",)) as stub:
        yield stub


def _env(plugin: Path, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    env.update(PYTHONPATH=str(plugin), KGCHECK_HOME=str(tmp_path / "home"),
               LANGGRAPH_CLI_NO_ANALYTICS="1", LANGGRAPH_NO_VERSION_CHECK="true",
               LANGSMITH_TRACING="false")
    return env


def test_the_cli_runs_the_plugin_strategy(plugin: Path, thinker, tmp_path: Path) -> None:
    triples = tmp_path / "mine.csv"
    triples.write_text("subject,predicate,object,label\n"
                       "Jerzy_Jurandot,isMarriedTo,Stefania_Grodzienska,1\n"
                       "Paris,isCapitalOf,Spain,0\n")
    out = tmp_path / "run"
    done = subprocess.run(
        [str(BIN / "kgcheck"), "run", "--triples", str(triples), "--method", "dka-cot",
         "--model", "ollama:thinker", "--base-url", thinker.url, "--out", str(out),
         "--no-progress"], env=_env(plugin, tmp_path), cwd=tmp_path, capture_output=True,
        text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert [(r["label"], r["method"]) for r in records] == [("F", "DKA-COT")] * 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["strategy"] == "dka-cot" and summary["method"] == "DKA-COT"
    # The model got the plugin's prompt.
    assert thinker.calls()[0].body["messages"][-1]["content"].startswith("Think step by step")
    listed = subprocess.run([str(BIN / "kgcheck"), "graph", "list"], env=_env(plugin, tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert "dka-cot" in listed.stdout


def test_the_python_api_runs_the_plugin_strategy(plugin: Path, thinker,
                                                 tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import kgcheck
        assert "dka-cot" in kgcheck.strategies()
        fact = {{"subject": "Jerzy_Jurandot", "predicate": "isMarriedTo",
                 "object": "Stefania_Grodzienska"}}
        (verdict,) = kgcheck.check([fact], strategy="dka-cot", model="ollama:thinker",
                                   base_url={thinker.url!r})
        # The strict parser would read T and F here: the plugin's last-line parser reads F.
        print(verdict.label, verdict.method, verdict.raw.splitlines()[-1])
    """)
    done = subprocess.run([sys.executable, "-c", script], env=_env(plugin, tmp_path),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "F DKA-COT Verdict: F"


@pytest.mark.slow
def test_kgcheck_studio_serves_the_plugin_strategy(plugin: Path, thinker,
                                                   tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / "studio.log"
    with log.open("w") as sink:
        server = subprocess.Popen(
            [str(BIN / "kgcheck"), "studio", "--port", str(port), "--no-reload"],
            env=_env(plugin, tmp_path), cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, log.read_text()[-4000:]
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            time.sleep(0.3)
        config = json.loads((tmp_path / "home" / "langgraph.json").read_text())
        assert config["graphs"]["dka-cot"]["path"] == "kgcheck.studio:dka_cot"

        async def runs() -> tuple[set[str], dict, dict]:
            from langgraph_sdk import get_client

            client = get_client(url=url, api_key=None)
            assistants = await client.assistants.search(limit=100)
            fact = {"subject": "Jerzy_Jurandot", "predicate": "isMarriedTo",
                    "object": "Stefania_Grodzienska"}
            live = await client.runs.wait(None, "dka-cot", input={"fact": fact},
                                          context={"model": "ollama:thinker",
                                                   "base_url": thinker.url})
            # No context: the strategy's own defaults (replay, which has no recordings).
            bare = await client.runs.wait(None, "dka-cot", input={"fact": fact})
            return {a["graph_id"] for a in assistants}, live, bare

        graphs, live, bare = asyncio.run(runs())
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
    assert "dka-cot" in graphs and "dka" in graphs
    assert (live["verdict"]["label"], live["verdict"]["method"]) == ("F", "DKA-COT")
    assert bare["verdict"]["method"] == "DKA-COT"
    assert "no recorded answers for the DKA-COT strategy" in bare["verdict"]["error"]
