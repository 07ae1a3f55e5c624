import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from kgcheck.data.datasets import load_facts
from kgcheck.graphs.registry import get_strategy
from kgcheck.retrievers.chunking import Chunk
from kgcheck.retrievers.evidence import get_retriever
from kgcheck.retrievers.index import ChromaIndex, VectorIndexError, collection_name, open_index

FIXTURE = Path(__file__).resolve().parents[2] / "vendored" / "sample-corpus"
ROOT = Path(__file__).resolve().parents[2]


def kgcheck(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KGCHECK_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "kgcheck.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=180)


def unit_vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, 8)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def chunks(n: int, fact: str = "f1") -> list[Chunk]:
    return [Chunk(f"demo/{fact}/{i % 2}", fact, "demo", i, f"sentence {i}") for i in range(n)]


def test_chroma_index_stores_queries_and_filters(tmp_path):
    index = ChromaIndex("demo", "unit-test", path=str(tmp_path / "chroma"))
    vectors = unit_vectors(6)
    index.add(chunks(6), vectors)
    index.add(chunks(2, "f2"), unit_vectors(2, seed=1))
    assert index.missing(["demo/f1/0#0", "demo/f1/0#99"]) == ["demo/f1/0#99"]
    got = index.vectors(["demo/f1/1#3"])
    assert np.allclose(got["demo/f1/1#3"], vectors[3], atol=1e-6)
    hits = index.query(vectors[2], fact_id="f1", doc_ids=["demo/f1/0"], k=3)
    assert hits[0].chunk_id == "demo/f1/0#2" and hits[0].similarity == pytest.approx(1, abs=1e-4)
    assert {h.doc_id for h in hits} == {"demo/f1/0"}
    assert index.indexed_facts(["f1", "f2", "f3"]) == {"f1", "f2"}
    assert collection_name("YAGO", "all-minilm-l6-v2-int8") == "kgcheck-yago-all-minilm-l6-v2-int8"
    with pytest.raises(VectorIndexError, match="unknown index"):
        open_index("faiss", "demo", "x")


@pytest.mark.slow
async def test_index_persists_across_processes_and_runs_reuse_it(tmp_path):
    chroma = tmp_path / "chroma"
    first = kgcheck("index", "--dataset", "yago", "--corpus", str(FIXTURE), "--chroma-path",
                    str(chroma), "--no-progress", home=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "indexed 5 facts (0 already done), 14 documents" in " ".join(first.stdout.split())
    again = kgcheck("index", "--dataset", "yago", "--corpus", str(FIXTURE), "--chroma-path",
                    str(chroma), "--no-progress", home=tmp_path)
    assert "indexed 0 facts (5 already done)" in " ".join(again.stdout.split())
    # This process opens what the other one wrote.
    retriever = get_retriever(str(FIXTURE), dataset="yago", chroma_path=str(chroma))
    index = retriever.index("yago")
    assert isinstance(index, ChromaIndex)
    assert index.indexed_facts(["10019", "10053", "10143", "10185", "11726", "5"]) == {
        "10019", "10053", "10143", "10185", "11726"}
    # A replay run finds every vector it needs: nothing is embedded again.
    strategy = get_strategy("rag")
    ctx = strategy.make_context(model="replay:gemma2:9b", corpus=str(FIXTURE),
                                chroma_path=str(chroma))
    facts = {f.id: f for f in load_facts("yago")}
    verdict = (await strategy.compile().ainvoke({"fact": facts["10143"].as_input()},
                                                context=ctx))["verdict"]
    assert verdict["label"] == "T" and verdict["details"]["evidence"]
    assert retriever.vectors("yago").embedded == 0


@pytest.fixture
def chroma_server(tmp_path, free_port):
    chroma_bin = Path(sys.executable).with_name("chroma")
    proc = subprocess.Popen([str(chroma_bin), "run", "--host", "127.0.0.1", "--port",
                             str(free_port), "--path", str(tmp_path / "server")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{free_port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/api/v2/heartbeat", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert proc.poll() is None, "chroma run exited"
        assert time.monotonic() < deadline, "chroma run did not start"
        time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.mark.slow
async def test_chroma_server_by_url(chroma_server, tmp_path):
    done = kgcheck("index", "--dataset", "yago", "--corpus", str(FIXTURE), "--chroma-url",
                   chroma_server, "--limit", "3", "--no-progress", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "indexed 3 facts" in done.stdout
    index = ChromaIndex("yago", "all-minilm-l6-v2-int8", url=chroma_server)
    assert index.indexed_facts(["10019", "10053", "10143", "10185"]) == {"10019", "10053",
                                                                          "10143"}
    strategy = get_strategy("rag")
    ctx = strategy.make_context(model="replay:qwen2.5:7b", corpus=str(FIXTURE),
                                chroma_url=chroma_server)
    facts = {f.id: f for f in load_facts("yago")}
    out = await strategy.compile().ainvoke({"fact": facts["10053"].as_input()}, context=ctx)
    assert out["verdict"]["label"] == "F"
    assert out["verdict"]["details"]["evidence"][0]["doc_id"].startswith("yago/10053/")
    # The run's new vectors went to the server too.
    assert index.indexed_facts(["10053"]) == {"10053"}
