import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from kgcheck.retrievers.embeddings import get_embedder
from kgcheck.retrievers.evidence import Retriever
from kgcheck.retrievers.search.client import RemoteSource, SearchAPIError, SearchClient
from kgcheck.retrievers.search.server import create_app
from kgcheck.retrievers.search.tool import EvidenceSearchTool
from kgcheck.retrievers.store import FolderSource

FIXTURE = Path(__file__).resolve().parents[2] / "vendored" / "sample-corpus"
KEY = "test-key-123"


@pytest.fixture(scope="module")
def local():
    return Retriever(FolderSource(FIXTURE), get_embedder("minilm"), index="memory")


@pytest.fixture(scope="module")
def server(local):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = create_app(local.source, local.engine, api_key=KEY)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


def test_auth_by_header_or_query_and_401_json(server):
    assert httpx.get(f"{server}/api/datasets/").status_code == 401
    bad = httpx.get(f"{server}/api/datasets/", headers={"X-API-Key": "wrong"})
    assert bad.status_code == 401 and bad.json() == {"error": "Invalid API key"}
    by_header = httpx.get(f"{server}/api/datasets/", headers={"X-API-Key": KEY}).json()
    by_query = httpx.get(f"{server}/api/datasets/", params={"api_key": KEY}).json()
    assert by_header == by_query
    assert [d["name"] for d in by_header["datasets"]] == ["factbench", "yago"]
    assert by_header["count"] == 2 and "created_at" in by_header["datasets"][0]


def test_404s_are_json(server):
    h = {"X-API-Key": KEY}
    for path in ("/api/datasets/nope/facts/", "/api/datasets/yago/facts/999999/questions/",
                 "/api/datasets/yago/facts/10143/questions/9/", "/api/unknown"):
        r = httpx.get(f"{server}{path}", headers=h)
        assert r.status_code == 404 and "error" in r.json(), path
    r = httpx.get(f"{server}/api/serp-content/", params={"url": "https://nowhere.example/x"},
                  headers=h)
    assert r.status_code == 404 and r.json() == {"error": "URL not found",
                                                 "url": "https://nowhere.example/x"}


def test_pagination_and_question_shapes(server):
    h = {"X-API-Key": KEY}
    first = httpx.get(f"{server}/api/datasets/yago/facts/", params={"page_size": 2},
                      headers=h).json()
    assert first["count"] == 5 and first["total_pages"] == 3 and len(first["facts"]) == 2
    seen = [f["fact_id"] for f in first["facts"]]
    nxt = first["next"]
    while nxt:
        page = httpx.get(f"{server}{nxt}", headers=h).json()
        seen += [f["fact_id"] for f in page["facts"]]
        nxt = page["next"]
    assert seen == ["10019", "10053", "10143", "10185", "11726"]
    assert httpx.get(f"{server}/api/datasets/yago/facts/", params={"page": 0},
                     headers=h).status_code == 400
    qs = httpx.get(f"{server}/api/datasets/yago/facts/10143/questions/", headers=h).json()
    assert qs["success"] and qs["count"] == 4
    assert qs["questions"][0]["score"] == 1.0
    assert qs["questions"][0]["text"] == "Arlene Alda is married to Alan Alda."
    scores = [q["score"] for q in qs["questions"]]
    assert scores == sorted(scores, reverse=True)
    q0 = httpx.get(f"{server}/api/datasets/yago/facts/10143/questions/0/",
                   params={"page_size": 2}, headers=h).json()
    assert q0["total_urls"] == 3 and len(q0["available_urls"]) == 2 and q0["next"]
    assert q0["available_urls"][0]["url"] == "https://example.org/people/arlene-alda"
    assert q0["available_urls"][0]["domain"] == "example.org"
    content = httpx.get(f"{server}/api/serp-content/",
                        params={"url": "corpus://yago/10143/5", "fields": "title,text"},
                        headers=h).json()
    assert content["success"] and content["data"]["text"].startswith("Alan Alda")
    assert set(content["data"]) == {"title", "text"}


def test_client_and_remote_source_match_the_local_corpus(server, local):
    client = SearchClient(server, KEY)
    assert client.facts("factbench") == ["correct_award_00092", "correct_birth_00126",
                                         "wrong_mix_range_birth_00026"]
    with pytest.raises(SearchAPIError, match="401"):
        SearchClient(server, "wrong").datasets()
    remote = RemoteSource(server, KEY)
    for dataset, fact_id in (("yago", "10143"), ("factbench", "correct_birth_00126")):
        got = remote.documents(dataset, fact_id)
        want = local.source.documents(dataset, fact_id)
        assert [(d.doc_id, d.url, d.title, d.text) for d in got] == [
            (d.doc_id, d.url, d.title, d.text) for d in want]
    assert remote.documents("yago", "404404") == []
    # The same mock search ranking, over HTTP.
    over_http = Retriever(remote, get_embedder("minilm"), index="memory")
    query = "Arlene Alda is married to Alan Alda."
    assert [h.doc_id for h in over_http.search(query, "yago", "10143")] == [
        h.doc_id for h in local.search(query, "yago", "10143")]


async def test_tool_over_local_and_remote_backends(server, local):
    remote = Retriever(RemoteSource(server, KEY), get_embedder("minilm"), index="memory")
    args = {"query": "Where was William McKinley born?", "dataset": "factbench",
            "fact_id": "correct_birth_00126", "k": 2}
    for retriever in (local, remote):
        tool = EvidenceSearchTool(retriever=retriever)
        assert tool.name == "evidence_search" and "fact_id" in tool.args
        hits = json.loads(tool.invoke(args))
        assert len(hits) == 2 and hits[0]["doc_id"].startswith("factbench/correct_birth_00126/")
        assert json.loads(await tool.ainvoke(args)) == hits


def test_search_api_command_serves_on_loopback(tmp_path, free_port):
    env = {**os.environ, "KGCHECK_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgcheck.cli", "search-api", "--port", str(free_port),
         "--api-key", KEY, "--corpus", str(FIXTURE), "--index", "memory"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{free_port}/api/datasets/"
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.get(url, headers={"X-API-Key": KEY})
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "search-api did not start"
                time.sleep(0.2)
        assert r.status_code == 200 and r.json()["count"] == 2
    finally:
        proc.terminate()
        proc.wait(timeout=20)
