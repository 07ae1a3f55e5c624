import hashlib
import threading
import time
import zipfile
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest
import uvicorn
from fastapi import FastAPI, Request

from kgcheck.retrievers.embeddings import EMBEDDERS, LangChainEmbedder, get_embedder


def fake_vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b - 128.0 for b in digest[:8]]


@pytest.fixture
def stub_server(free_port):
    """Ollama's /api/embed and OpenAI's /v1/embeddings, answering deterministic vectors."""
    app = FastAPI()
    seen: list[str] = []

    @app.post("/api/embed")
    async def ollama(request: Request) -> dict:
        body = await request.json()
        seen.append(f"ollama:{body['model']}")
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return {"model": body["model"], "embeddings": [fake_vector(t) for t in texts]}

    @app.post("/v1/embeddings")
    async def openai(request: Request) -> dict:
        body = await request.json()
        seen.append(f"openai:{body['model']}")
        return {"object": "list", "model": body["model"],
                "data": [{"object": "embedding", "index": i, "embedding": fake_vector(t)}
                         for i, t in enumerate(body["input"])],
                "usage": {"prompt_tokens": 1, "total_tokens": 1}}

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield f"http://127.0.0.1:{free_port}", seen
    server.should_exit = True
    thread.join(timeout=10)


def test_ollama_and_openai_embedders_by_name(stub_server, monkeypatch):
    url, seen = stub_server
    monkeypatch.setenv("OLLAMA_HOST", url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
    texts = ["first text", "second text"]
    want = np.array([fake_vector(t) for t in texts], dtype=np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    for spec in ("ollama:nomic-embed-text", "openai:text-embedding-3-small"):
        embedder = EMBEDDERS.create(spec)
        assert isinstance(embedder, LangChainEmbedder)
        got = embedder.embed(texts)
        assert np.allclose(got, want, atol=1e-5), spec
        assert embedder.dim == 8 and embedder.name.startswith(spec.split(":")[0])
    assert seen == ["ollama:nomic-embed-text", "openai:text-embedding-3-small"]


@pytest.mark.slow
def test_huggingface_embedder_agrees_with_the_offline_onnx_model(tmp_path):
    pytest.importorskip("sentence_transformers")
    spec = find_spec("all_minilm_l6_v2")
    archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(tmp_path / "minilm")
    texts = ["Arlene Alda is married to Alan Alda.", "Paris is the capital of France."]
    torch_vectors = EMBEDDERS.create(f"hf:{tmp_path / 'minilm'}").embed(texts)
    onnx_vectors = get_embedder("minilm").embed(texts)
    # int8 weights against the float model: the same embedding, up to quantisation noise.
    assert np.all(np.sum(torch_vectors * onnx_vectors, axis=1) > 0.99)
