"""The search API under bad input and slow clients, and what serving it writes to disk."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.testclient import TestClient

from kgcheck.api import search_index_choice as index_choice
from kgcheck.retrievers.embeddings import get_embedder
from kgcheck.retrievers.evidence import Retriever, get_retriever
from kgcheck.retrievers.search.server import create_app, server_config
from kgcheck.retrievers.store import FolderSource

SAMPLE = Path(__file__).resolve().parents[2] / "vendored" / "sample-corpus"
KEY = "k-123"
HEADERS = {"X-API-Key": KEY}


@pytest.fixture(scope="module")
def api():
    local = Retriever(FolderSource(SAMPLE), get_embedder("minilm"), index="memory")
    return create_app(local.source, local.engine, api_key=KEY)


@pytest.mark.parametrize("query", ["page=abc", "page_size=1.5", "page=", "page=1e9x"])
def test_bad_query_values_answer_the_error_shape(api, query: str) -> None:
    answer = TestClient(api).get(f"/api/datasets/yago/facts/?{query}", headers=HEADERS)
    assert answer.status_code == 400
    body = answer.json()
    assert "detail" not in body and body["error"].startswith("page")


def test_a_bad_path_value_answers_the_error_shape(api) -> None:
    client = TestClient(api)
    fact = client.get("/api/datasets/yago/facts/", headers=HEADERS).json()["facts"][0]["fact_id"]
    answer = client.get(f"/api/datasets/yago/facts/{fact}/questions/first/", headers=HEADERS)
    assert answer.status_code == 400 and answer.json()["error"].startswith("rank:")


@pytest.fixture
def slow_server(api) -> Iterator[tuple[str, int]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(server_config(api, "127.0.0.1", port, header_timeout=1.0))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield "127.0.0.1", port
    server.should_exit = True
    thread.join(timeout=10)


def test_half_sent_requests_are_closed_and_the_server_still_answers(slow_server) -> None:
    host, port = slow_server
    clients = []
    for _ in range(8):
        sock = socket.create_connection((host, port), timeout=10)
        sock.sendall(b"GET /api/datasets/ HTTP/1.1\r\nHost: x\r\nX-API-Key: " + KEY.encode())
        clients.append(sock)
    try:
        for sock in clients:
            # The server closes the connection (b"") instead of waiting for the rest for ever.
            assert sock.recv(1024) == b""
    finally:
        for sock in clients:
            sock.close()
    # A keep-alive connection that starts a second request and stalls is closed too.
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"GET /api/datasets/ HTTP/1.1\r\nHost: x\r\nX-API-Key: "
                     + KEY.encode() + b"\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /api/datasets/ HTTP/1.1\r\n")
        while sock.recv(65536):
            pass
    answer = httpx.get(f"http://{host}:{port}/api/datasets/", headers=HEADERS, timeout=10)
    assert answer.status_code == 200 and answer.json()["count"] == 2


def test_serving_writes_no_chroma_folder_unless_one_is_configured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KGCHECK_HOME", raising=False)
    assert index_choice("auto", "") == "memory"
    retriever = get_retriever(str(SAMPLE), embedding="minilm", index=index_choice("auto", ""),
                              chroma_path="")
    client = TestClient(create_app(retriever.source, retriever.engine, api_key=KEY))
    fact = client.get("/api/datasets/yago/facts/", headers=HEADERS).json()["facts"][0]["fact_id"]
    ranked = client.get(f"/api/datasets/yago/facts/{fact}/questions/0/", headers=HEADERS)
    assert ranked.status_code == 200 and ranked.json()["available_urls"]
    assert list(tmp_path.iterdir()) == []
    assert index_choice("auto", str(tmp_path / "vectors")) == "chroma"
    monkeypatch.setenv("KGCHECK_HOME", str(tmp_path / "home"))
    assert index_choice("auto", "") == "chroma"
    assert index_choice("memory", "") == "memory"
