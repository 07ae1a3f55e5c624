"""Compressed, chunked and redirected answers on every evidence path, and bombs kept small.

The stubs compress (gzip) whenever a request accepts it and send every body chunked, as
real servers do; a gzip bomb (300 MB of zeros in about 300 KB) is served as it is. Each
source must read the real answers, and the bomb must cost no more than the cap.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

import pytest
import zstandard

from kgcheck.data.httpbody import ACCEPT_ENCODING, BodyDecodeError, CappedBody
from kgcheck.data.sparql import SparqlClient, SparqlError, SparqlReader
from kgcheck.retrievers.search.client import SearchAPIError, SearchClient
from kgcheck.retrievers.sources.base import SourceError
from kgcheck.retrievers.sources.net import Net, NetPolicy, forget_robots
from kgcheck.retrievers.sources.searxng import SearxngSource
from kgcheck.retrievers.sources.sparql import SparqlSource, http_select
from kgcheck.retrievers.sources.web import PageSkipped, WebSource
from kgcheck.retrievers.sources.wikipedia import WikipediaSource
from tests.support.stubs.bodies import gzip_bomb, send_body
from tests.support.stubs.sparql import SparqlStub
from tests.support.stubs.web import Page, WebStub

BOMB_BYTES = 300 * 2**20
ARTICLE = (b"<html><head><title>Alan Alda</title></head><body><article><h1>Alan Alda</h1>"
           b"<p>Alan Alda is an American actor. He married Arlene Alda in 1957.</p>"
           b"<p>They met at a dinner party in New York and have three daughters.</p>"
           b"</article></body></html>")
KG = """
@prefix ex: <http://kg.example/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Alan_Alda rdfs:label "Alan Alda"@en ; ex:spouse ex:Arlene_Alda .
ex:Arlene_Alda rdfs:label "Arlene Alda"@en ; ex:occupation "photographer" .
"""


def policy(**values: Any) -> NetPolicy:
    return NetPolicy(**{"allow_private": "127.0.0.0/8", "timeout": 10.0, "host_interval": 0.0,
                        "retries": 0, "backoff": 0.01, **values})


@pytest.fixture(scope="session")
def bomb() -> bytes:
    """Return 300 MB of zeros, gzip-compressed."""
    return gzip_bomb(BOMB_BYTES // 2**20)


@pytest.fixture(autouse=True)
def _fresh_robots() -> Any:
    forget_robots()
    yield
    forget_robots()


def peak_bytes(work: Callable[[], Any]) -> tuple[Any, int]:
    """Run ``work`` and return what it returned and the peak of Python allocations."""
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- the decoder ----------------------------------------------------------------------

@pytest.mark.parametrize(("encoding", "encode"), [
    ("gzip", lambda data: gzip.compress(data)),
    ("deflate", zlib.compress),
    ("deflate", lambda data: zlib.compress(data, wbits=-zlib.MAX_WBITS)),  # raw, as IIS sends
    ("zstd", lambda data: zstandard.ZstdCompressor().compress(data)),
    ("gzip, zstd", lambda data: zstandard.ZstdCompressor().compress(gzip.compress(data))),
    ("identity", lambda data: data),
], ids=["gzip", "deflate", "raw-deflate", "zstd", "gzip-then-zstd", "identity"])
def test_each_encoding_decodes_piece_by_piece(encoding: str, encode: Any) -> None:
    text = b"".join(b"row %d of a SPARQL answer\n" % i for i in range(20_000))
    packed = encode(text)
    body = CappedBody(encoding, limit=len(text))
    for start in range(0, len(packed), 1000):
        assert body.feed(packed[start:start + 1000])
    assert body.body() == text and not body.over
    small = CappedBody(encoding, limit=1000)
    small.feed(packed)
    assert small.over and small.body() == text[:1000]


def test_encodings_asked_for_are_those_decoded() -> None:
    assert ACCEPT_ENCODING == "gzip, deflate, zstd"
    with pytest.raises(BodyDecodeError, match="content encoding 'br'"):
        CappedBody("br", 100)
    with pytest.raises(BodyDecodeError, match="gzip body does not decode"):
        CappedBody("gzip", 100).feed(b"plain text, not gzip")


def test_a_bomb_fed_whole_costs_the_cap(bomb: bytes) -> None:
    body, peak = peak_bytes(lambda: CappedBody("gzip", 1_000_000).feed(bomb))
    assert body is False
    assert peak < 8 * 2**20, f"peak {peak:,} bytes"
    zstd_bomb = zstandard.ZstdCompressor().compress(bytes(64 * 2**20))
    capped = CappedBody("zstd", 1_000_000)
    fed, peak = peak_bytes(lambda: capped.feed(zstd_bomb))
    assert fed is False and capped.over and peak < 8 * 2**20, f"peak {peak:,} bytes"


# --- sources against compressing, chunking, redirecting stubs -------------------------

@pytest.fixture
def web() -> Any:
    results = {"*": [{"url": "{base}/alda.html", "title": "Alan Alda",
                      "content": "Alan Alda married Arlene in 1957."}]}
    wiki = {"Alan Alda": "Alan Alda is an American actor. He married Arlene Weiss in 1957."}
    # /old/... moved to /...: the redirect a moved instance or API answers.
    with WebStub(results=results, wiki=wiki, pages={"/alda.html": Page(ARTICLE)},
                 moved={"/old": ""}) as stub:
        yield stub


async def test_searxng_reads_a_gzipped_chunked_answer_after_a_redirect(web: WebStub) -> None:
    async with Net(policy(), guard=False) as net:
        found = await SearxngSource(f"{web.url}/old").fetch("Alan Alda", net)
    assert [f.url for f in found] == [f"{web.url}/alda.html"]
    assert web.requests[0].startswith("/old/search?") and web.requests[1].startswith("/search?")
    assert any(path.startswith("/search?") for path in web.gzipped)


async def test_wikipedia_reads_a_gzipped_chunked_answer_after_a_redirect(web: WebStub) -> None:
    async with Net(policy(), guard=False) as net:
        found = await WikipediaSource(f"{web.url}/old/w/api.php").fetch("Alan Alda", net)
    assert [f.title for f in found] == ["Alan Alda"] and "1957" in found[0].text
    assert any(path.startswith("/w/api.php?") for path in web.gzipped)


async def test_a_web_page_is_read_gzipped_chunked_after_a_redirect(web: WebStub) -> None:
    async with Net(policy()) as net:
        [page] = await WebSource().fetch(f"{web.url}/old/alda.html", net)
    assert page.url == f"{web.url}/alda.html" and "married Arlene Alda in 1957" in page.text
    assert "/alda.html" in web.gzipped and "/robots.txt" in web.gzipped


def test_a_gzip_bomb_page_costs_the_cap_and_says_so(web: WebStub, bomb: bytes) -> None:
    web.state.pages["/bomb.html"] = Page(bomb, encoded="gzip")

    async def fetch() -> str:
        async with Net(policy(max_bytes=1_000_000)) as net:
            with pytest.raises(PageSkipped) as skipped:
                await WebSource().fetch(f"{web.url}/bomb.html", net)
        return str(skipped.value)

    message, peak = peak_bytes(lambda: asyncio.run(fetch()))
    assert "read up to the max_bytes cap, 1,000,000 bytes decoded" in message
    assert peak < 16 * 2**20, f"peak {peak:,} bytes"


async def test_a_gzip_bomb_from_an_api_is_a_clear_source_error(web: WebStub,
                                                                bomb: bytes) -> None:
    web.state.pages["/bomb/search"] = Page(bomb, encoded="gzip", content_type="application/json")
    async with Net(policy(max_bytes=1_000_000), guard=False) as net:
        with pytest.raises(SourceError, match=r"answered more than 1,000,000 bytes"):
            await SearxngSource(f"{web.url}/bomb").fetch("Alan Alda", net)


def test_the_search_api_client_decodes_and_caps(web: WebStub, bomb: bytes) -> None:
    web.state.pages["/api/datasets/"] = Page(json.dumps({"datasets": [{"name": "YAGO"}]})
                                             .encode(), content_type="application/json")
    web.state.pages["/api/bomb/"] = Page(bomb, encoded="gzip", content_type="application/json")
    client = SearchClient(web.url, max_bytes=1_000_000)
    try:
        assert client.datasets() == [{"name": "YAGO"}]
        assert "/api/datasets/" in web.gzipped
        with pytest.raises(SearchAPIError, match="larger than 1,000,000 bytes"):
            client.get("/api/bomb/")
    finally:
        client.close()


# --- SPARQL ---------------------------------------------------------------------------

def test_the_sparql_reader_reads_gzipped_chunked_answers_after_a_redirect() -> None:
    # 308 repeats the POST; 301 turns it into a GET that carries the query.
    with SparqlStub(KG, redirects={"/moved": (308, "{base}/sparql"),
                                   "/old": (301, "/sparql")}) as endpoint:
        for path in ("/moved", "/old"):
            reader = SparqlReader(SparqlClient(endpoint.base + path, retries=0))
            facts = reader.named(list(reader))
            assert {f.readable_terms() for f in facts} == {
                ("Alan Alda", "spouse", "Arlene Alda"),
                ("Arlene Alda", "occupation", "photographer")}
        assert endpoint.gzipped >= 4


async def test_the_sparql_evidence_source_reads_gzipped_answers() -> None:
    with SparqlStub(KG) as endpoint:
        source = SparqlSource(http_select(endpoint.url, policy()), endpoint.url)
        [doc] = await source.fetch("http://kg.example/Alan_Alda")
        assert doc.text == "Alan Alda spouse Arlene Alda." and endpoint.gzipped == 1


def test_a_sparql_redirect_to_another_host_is_not_followed() -> None:
    with SparqlStub(KG) as elsewhere, SparqlStub(KG) as endpoint:
        other = elsewhere.url.replace("127.0.0.1", "localhost")
        endpoint.redirects["/sparql"] = (307, other)
        with pytest.raises(SparqlError, match=r"redirects to http://localhost:\d+/sparql, "
                                              "another host"):
            SparqlClient(endpoint.url, retries=0).select("SELECT * { ?s ?p ?o }")
        assert elsewhere.queries == []


def test_a_sparql_answer_past_the_cap_is_refused(bomb: bytes,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with SparqlStub(KG) as endpoint:
        with pytest.raises(SparqlError, match=r"answered more than 2,000 bytes for one query"):
            SparqlClient(endpoint.url, retries=0, max_bytes=2000).select(
                "SELECT * { ?s ?p ?o . ?a ?b ?c }")
        monkeypatch.setenv("KGCHECK_SPARQL_MAX_BYTES", "100")
        with pytest.raises(SparqlError, match=r"answered more than 100 bytes"):
            list(SparqlReader(endpoint.url))
        monkeypatch.setenv("KGCHECK_SPARQL_MAX_BYTES", "lots")
        with pytest.raises(SparqlError, match=r"\$KGCHECK_SPARQL_MAX_BYTES='lots': expected"):
            SparqlClient(endpoint.url)


def test_a_sparql_gzip_bomb_costs_the_cap(bomb: bytes) -> None:
    import http.server
    import threading

    class Bomb(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            send_body(self, 200, bomb, "application/sparql-results+json", encoded="gzip")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Bomb)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/sparql"
    try:
        def select() -> str:
            with pytest.raises(SparqlError) as failed:
                SparqlClient(url, retries=0, max_bytes=4_000_000).select("SELECT * {}")
            return str(failed.value)

        message, peak = peak_bytes(select)
    finally:
        server.shutdown()
        server.server_close()
    assert "answered more than 4,000,000 bytes for one query" in message
    assert peak < 24 * 2**20, f"peak {peak:,} bytes"


def test_proxy_settings_in_the_environment_are_read_only_when_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    proxied = json.dumps({"head": {"vars": ["s"]}, "results": {"bindings": [
        {"s": {"type": "literal", "value": "through the proxy"}}]}}).encode()
    # A "proxy" that answers every request itself: what a hostile proxy setting would do.
    with SparqlStub(answers={"": proxied}) as proxy, SparqlStub(KG) as endpoint:
        monkeypatch.setenv("HTTP_PROXY", proxy.base)
        monkeypatch.setenv("http_proxy", proxy.base)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        query = "SELECT ?s { ?s ?p ?o } LIMIT 1"
        assert SparqlClient(endpoint.url, retries=0).select(query)[0]["s"]["value"] != (
            "through the proxy")
        assert proxy.queries == []
        monkeypatch.setenv("KGCHECK_SPARQL_TRUST_ENV", "1")
        rows = SparqlClient(endpoint.url, retries=0).select(query)
        assert rows[0]["s"]["value"] == "through the proxy" and len(proxy.queries) == 1


def test_checking_a_source_before_a_run_reads_no_body(web: WebStub, bomb: bytes) -> None:
    from kgcheck.retrievers.evidence import reach_source

    web.state.pages["/api"] = Page(bomb, encoded="gzip", content_type="application/json")
    source = SearxngSource(f"{web.url}/api")
    _, peak = peak_bytes(lambda: reach_source(source))
    assert "/api" in web.requests and peak < 4 * 2**20, f"peak {peak:,} bytes"
