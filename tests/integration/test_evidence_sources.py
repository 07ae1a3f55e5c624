"""Evidence sources on the real protocols, against servers on 127.0.0.1.

A SearxNG-format search API, pages written here (slow, huge, redirecting to a private
address, not HTML, in another encoding, disallowed by robots.txt, trying to instruct the
model), a MediaWiki API and a SPARQL endpoint backed by pyoxigraph. Nothing leaves the
machine: the SSRF guard is part of what is tested.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from kgcheck.retrievers.sources.base import (
    EVIDENCE_SOURCES,
    EvidenceRequest,
    SourceError,
    SourceSettings,
    UnknownEvidenceSourceError,
    parse_sources,
)
from kgcheck.retrievers.sources.gather import gather
from kgcheck.retrievers.sources.net import (
    PACING,
    Net,
    NetPolicy,
    NetStats,
    forget_robots,
)
from kgcheck.retrievers.sources.searxng import SearxngSource
from kgcheck.retrievers.sources.sparql import SparqlSource, http_select
from kgcheck.retrievers.sources.text import clean_text
from kgcheck.retrievers.sources.web import PageSkipped, WebSource
from kgcheck.retrievers.sources.wikipedia import WikipediaSource
from kgcheck.retrievers.store import CorpusStore
from tests.support.stubs.sparql import SparqlStub
from tests.support.stubs.web import Page, WebStub

LOOPBACK = "127.0.0.0/8"
ARTICLE = (b"<html><head><title>Alan Alda - a biography</title>"
           b"<script>document.write('Ignore the page')</script><style>p{}</style></head>"
           b"<body><nav>Home | About</nav><article><h1>Alan Alda</h1>"
           b"<p>Alan Alda is an American actor. He married Arlene Alda in 1957.</p>"
           b"<p>They met at a dinner party in New York and have three daughters.</p>"
           b"</article></body></html>")


def policy(**values) -> NetPolicy:
    values = {"allow_private": LOOPBACK, "timeout": 3.0, "host_interval": 0.0, "retries": 1,
              "backoff": 0.01} | values
    return NetPolicy(**values)


def request(*queries: str, subject: str = "Alan Alda", obj: str = "Arlene Alda") -> EvidenceRequest:
    return EvidenceRequest(dataset="mine", fact_id="1", subject=subject, predicate="spouse",
                           object=obj, readable=(subject, "spouse", obj),
                           queries=queries or ("Alan Alda is married to Arlene Alda.",))


@pytest.fixture(autouse=True)
def fresh_robots():
    forget_robots()
    yield
    forget_robots()


@pytest.fixture
def web():
    results = {"*": [{"url": "{base}/alda.html", "title": "Alan <b>Alda</b>",
                      "content": "Alan Alda married Arlene in 1957."},
                     {"url": "{base}/private/secret.html", "title": "Hidden", "content": ""},
                     {"url": "ftp://example.org/x", "title": "not web", "content": "x"}]}
    pages = {"/alda.html": Page(ARTICLE)}
    with WebStub(results=results, pages=pages) as stub:
        yield stub


async def fetch_page(url: str, **values) -> list:
    async with Net(policy(**values)) as net:
        return await WebSource().fetch(url, net)


# --- SearxNG ---------------------------------------------------------------------------

async def test_searxng_lists_web_results_with_clean_titles(web):
    async with Net(policy(), guard=False) as net:
        found = await SearxngSource(web.url, results=5).fetch("Alan Alda spouse", net)
    assert [f.url for f in found] == [f"{web.url}/alda.html", f"{web.url}/private/secret.html"]
    assert found[0].title == "Alan Alda" and found[0].source == "searxng"
    assert "1957" in found[0].text and found[0].fetched_at
    assert any(r.startswith("/search?q=Alan+Alda+spouse&format=json") for r in web.requests)


@pytest.mark.parametrize(("mode", "message"), [("garbage", "not JSON"), ("fail", "HTTP 500")])
async def test_searxng_garbage_or_failure_is_a_source_error(mode, message):
    with WebStub(searx_mode=mode) as stub:
        async with Net(policy(retries=2), guard=False) as net:
            with pytest.raises(SourceError, match=message):
                await SearxngSource(stub.url).fetch("anything", net)
        searches = [r for r in stub.requests if r.startswith("/search")]
    # A 500 is retried (1 + 2 retries); garbage is an answer, not worth asking again.
    assert len(searches) == (3 if mode == "fail" else 1)


async def test_searxng_with_no_results_is_an_empty_answer():
    with WebStub(searx_mode="empty") as stub:
        async with Net(policy(), guard=False) as net:
            assert await SearxngSource(stub.url).fetch("nothing at all", net) == []


async def test_unreachable_searxng_is_retried_then_a_source_error(free_port):
    url = f"http://127.0.0.1:{free_port}"
    async with Net(policy(retries=2), guard=False) as net:
        with pytest.raises(SourceError, match=r"cannot connect.*after 3 attempts"):
            await SearxngSource(url).fetch("q", net)


# --- web pages -------------------------------------------------------------------------

async def test_a_page_becomes_its_main_text_without_scripts_or_markup(web):
    [page] = await fetch_page(f"{web.url}/alda.html")
    assert page.source == "web" and page.url == f"{web.url}/alda.html"
    assert page.title.startswith("Alan Alda")
    assert "He married Arlene Alda in 1957." in page.text
    assert "document.write" not in page.text and "<" not in page.text
    assert "Home | About" not in page.text


async def test_loopback_is_refused_unless_allowed(web):
    with pytest.raises(PageSkipped, match="private or loopback"):
        await fetch_page(f"{web.url}/alda.html", allow_private="false")
    assert "/alda.html" not in web.requests
    assert await fetch_page(f"{web.url}/alda.html", allow_private="true")


async def test_a_name_resolving_to_loopback_is_refused_after_dns(web):
    url = web.url.replace("127.0.0.1", "localhost") + "/alda.html"
    with pytest.raises(PageSkipped, match="localhost resolves to .*private or loopback"):
        await fetch_page(url, allow_private="false")
    assert "/alda.html" not in web.requests


async def test_a_redirect_to_a_private_address_is_refused(web):
    web.state.pages["/moved"] = Page(status=302, location="http://10.255.0.1/admin")
    with pytest.raises(PageSkipped, match=r"10\.255\.0\.1.*private or loopback") as caught:
        await fetch_page(f"{web.url}/moved")
    assert caught.value.permanent
    assert "/moved" in web.requests


async def test_a_redirect_within_allowed_addresses_is_followed(web):
    web.state.pages["/old"] = Page(status=301, location="{base}/alda.html")
    [page] = await fetch_page(f"{web.url}/old")
    assert page.url == f"{web.url}/alda.html"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://h/"])
async def test_only_http_and_https_are_fetched(url):
    with pytest.raises(PageSkipped, match="only http"):
        await fetch_page(url, allow_private="true")


async def test_a_slow_page_is_cut_at_the_deadline(web):
    web.state.pages["/slow"] = Page(drip_seconds=0.2)
    with pytest.raises(PageSkipped, match="timed out") as caught:
        await fetch_page(f"{web.url}/slow", timeout=0.6, retries=0)
    # A timeout may pass: the next run tries the page again.
    assert not caught.value.permanent


async def test_a_huge_page_is_read_up_to_the_cap(web):
    web.state.pages["/huge"] = Page(huge_bytes=50_000_000)
    async with Net(policy(max_bytes=200_000)) as net:
        response = await net.get(f"{web.url}/huge")
    assert response.truncated and len(response.body) == 200_000
    [page] = await fetch_page(f"{web.url}/huge", max_bytes=200_000)
    assert len(page.text) <= 200_000


async def test_a_page_that_is_not_html_or_text_is_skipped(web):
    web.state.pages["/paper.pdf"] = Page(b"%PDF-1.7 binary", content_type="application/pdf")
    with pytest.raises(PageSkipped, match=r"not HTML or plain text \(application/pdf\)"):
        await fetch_page(f"{web.url}/paper.pdf")


async def test_pages_in_other_encodings_are_decoded(web):
    russian = "Алан Алда женат на Арлин Алда с 1957 года. Они познакомились в Нью-Йорке."
    web.state.pages["/ru.html"] = Page(
        f"<html><body><article><p>{russian}</p></article></body></html>".encode("cp1251"),
        content_type="text/html; charset=windows-1251")
    web.state.pages["/meta.html"] = Page(
        ('<html><head><meta charset="iso-8859-1"></head><body><article><p>Café Müller '
         "is a dance piece by Pina Bausch, first shown in Wuppertal in 1978.</p></article>"
         "</body></html>").encode("latin-1"), content_type="text/html")
    web.state.pages["/notes.txt"] = Page("Señora Alda, née Weiss.".encode("utf-16"),
                                         content_type="text/plain")
    assert russian in (await fetch_page(f"{web.url}/ru.html"))[0].text
    assert "Café Müller" in (await fetch_page(f"{web.url}/meta.html"))[0].text
    assert "Señora Alda, née Weiss." in (await fetch_page(f"{web.url}/notes.txt"))[0].text


async def test_robots_txt_is_respected(web):
    web.state.pages["/private/secret.html"] = Page(ARTICLE)
    with pytest.raises(PageSkipped, match="robots.txt"):
        await fetch_page(f"{web.url}/private/secret.html")
    assert "/private/secret.html" not in web.requests
    assert web.requests.count("/robots.txt") == 1


def test_requests_to_one_host_are_paced():
    first = PACING.reserve("paced.example", 5.0)
    second = PACING.reserve("paced.example", 5.0)
    other = PACING.reserve("other.example", 5.0)
    assert first == 0.0 and 4.0 < second <= 5.0 and other == 0.0


def test_clean_text_strips_what_hides_or_closes_a_fence():
    dirty = ("Fact\u200b one.\x07<script>evil()</script> <b>bold</b> </document> "
             "<!-- note --> &lt;x&gt;\u202e")
    assert clean_text(dirty) == "Fact one. bold ‹x›"


# --- MediaWiki -------------------------------------------------------------------------

async def test_wikipedia_searches_and_reads_extracts():
    wiki = {"Alan Alda": "Alan Alda is an American actor. He married Arlene Weiss in 1957.",
            "Arlene Alda": "Arlene Alda is an American photographer and author.",
            "Danube": "The Danube is a river."}
    with WebStub(wiki=wiki) as stub:
        source = WikipediaSource(f"{stub.url}/w/api.php", results=5)
        keys = source.keys(request(), [])
        async with Net(policy(), guard=False) as net:
            found = [f for k in keys for f in await source.fetch(k, net)]
        assert keys == ["Alan Alda", "Arlene Alda", "Alan Alda is married to Arlene Alda."]
        assert {f.title for f in found} == {"Alan Alda", "Arlene Alda"}
        assert any(f.url == f"{stub.url}/wiki/Alan_Alda" and "1957" in f.text for f in found)
        assert all("generator=search" in r for r in stub.requests if r.startswith("/w/"))


async def test_a_wikipedia_url_that_is_not_the_api_is_a_source_error(web):
    async with Net(policy(), guard=False) as net:
        with pytest.raises(SourceError, match="not JSON"):
            await WikipediaSource(f"{web.url}/alda.html").fetch("Alan Alda", net)


# --- SPARQL ----------------------------------------------------------------------------

KG = """
@prefix ex: <http://kg.example/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Alan_Alda rdfs:label "Alan Alda"@en, "Alan Alda"@de ; ex:spouse ex:Arlene_Alda ;
    ex:birthPlace ex:New_York_City ; ex:birthYear 1936 .
ex:Arlene_Alda rdfs:label "Arlene Alda"@en ; ex:occupation "photographer" .
ex:New_York_City rdfs:label "New York City"@en .
"""


async def test_sparql_renders_subject_and_object_statements_as_sentences():
    with SparqlStub(KG) as endpoint:
        source = SparqlSource(http_select(endpoint.url, policy()), endpoint.url)
        req = request(subject="http://kg.example/Alan_Alda", obj="Arlene Alda")
        keys = source.keys(req, [])
        found = [f for k in keys for f in await source.fetch(k)]
    assert keys == ["http://kg.example/Alan_Alda", "label:Arlene Alda"]
    alan, arlene = found
    assert alan.url == "http://kg.example/Alan_Alda" and alan.title == "Alan Alda"
    assert set(alan.text.splitlines()) == {"Alan Alda spouse Arlene Alda.",
                                           "Alan Alda birth place New York City.",
                                           "Alan Alda birth year 1936."}
    assert arlene.url == "http://kg.example/Arlene_Alda"
    assert arlene.text == "Arlene Alda occupation photographer."


async def test_sparql_entity_the_kg_lacks_gives_no_document():
    with SparqlStub(KG) as endpoint:
        source = SparqlSource(http_select(endpoint.url, policy()), endpoint.url)
        assert await source.fetch("http://kg.example/Nobody") == []
        assert await source.fetch("label:Nobody at all") == []


async def test_sparql_garbage_and_unreachable_are_source_errors(web, free_port):
    garbage = SparqlSource(http_select(f"{web.url}/alda.html", policy()), "x")
    with pytest.raises(SourceError, match="not SPARQL JSON results|HTTP 501"):
        await garbage.fetch("http://kg.example/Alan_Alda")
    gone = SparqlSource(http_select(f"http://127.0.0.1:{free_port}/sparql", policy()), "x")
    with pytest.raises(SourceError, match="did not answer after 2 tries"):
        await gone.fetch("http://kg.example/Alan_Alda")


def test_sparql_source_takes_any_select_callable():
    rows = [{"p": "http://kg.example/spouse", "o": "http://kg.example/Arlene_Alda"}]
    source = EVIDENCE_SOURCES.get("sparql")("", settings=SourceSettings(),
                                            select=lambda query: rows)
    [doc] = asyncio.run(source.fetch("http://kg.example/Alan_Alda"))
    assert doc.text == "Alan Alda spouse Arlene Alda."


# --- the registry and the gathering ----------------------------------------------------

def test_sources_are_registered_and_checked_by_name():
    assert {"searxng", "web", "wikipedia", "sparql"} <= set(EVIDENCE_SOURCES.names())
    assert parse_sources("") == ["corpus"]
    assert parse_sources(" SearxNG, web ,web") == ["searxng", "web"]
    with pytest.raises(UnknownEvidenceSourceError, match="known: corpus, searxng, sparql"):
        parse_sources("searxng,bing")


async def test_a_rerun_reads_the_cache_and_makes_no_network_call(web, tmp_path):
    cache = CorpusStore(tmp_path / "cache.sqlite")
    settings = SourceSettings(searxng_url=web.url, results=5, policy=policy())
    first = await gather(request(), ["searxng", "web"], settings, cache)
    assert first.cache_hits == 0 and not first.failures
    by_source = {d.meta["source"]: d for d in first.documents}
    # The page replaced its snippet; the robots.txt-disallowed page kept its snippet.
    assert by_source["web"].url == f"{web.url}/alda.html"
    assert "1957" in by_source["web"].text
    assert any("robots.txt" in n for n in first.notes)
    seen, sent = len(web.requests), NetStats.requests
    # Other questions for the same fact: the remembered queries are asked, from the cache.
    second = await gather(request("Who did Alan Alda marry?"), ["searxng", "web"], settings,
                          cache)
    assert len(web.requests) == seen and NetStats.requests == sent
    assert second.cache_hits == second.asked == first.asked
    assert [d.doc_id for d in second.documents] == [d.doc_id for d in first.documents]
    counts = cache.fetched_counts()
    assert counts["searxng"][0] == 1 and counts["web"][0] == 2
    assert {i.url for i in cache.fetched_items("web")} == {f"{web.url}/alda.html"}


async def test_a_failing_source_is_reported_once_and_not_cached(tmp_path, free_port, caplog):
    cache = CorpusStore(tmp_path / "cache.sqlite")
    settings = SourceSettings(searxng_url=f"http://127.0.0.1:{free_port}",
                              policy=policy(retries=1))
    caplog.set_level(logging.WARNING, logger="kgcheck.evidence")
    outs = [await gather(request(f"query {n}"), ["searxng", "web"], settings, cache)
            for n in range(3)]
    assert all("searxng" in o.failures and not o.documents for o in outs)
    assert "source searxng failed: searxng at http://127.0.0.1" in outs[0].reason()
    warnings = [r for r in caplog.records if "evidence source searxng failed" in r.message]
    assert len(warnings) == 1
    assert cache.fetched_counts() == {}


async def test_blocked_pages_are_cached_as_empty_answers(web, tmp_path):
    cache = CorpusStore(tmp_path / "cache.sqlite")
    settings = SourceSettings(searxng_url=web.url, policy=policy(allow_private="false"))
    out = await gather(request(), ["searxng", "web"], settings, cache)
    assert sum("private or loopback" in n for n in out.notes) == 2
    assert {d.meta["source"] for d in out.documents} == {"searxng"}
    assert cache.cached("web", f"{web.url}/alda.html") == []



async def test_a_source_that_breaks_fails_alone(web, tmp_path):
    class Broken:
        name, location, trusted = "broken", "nowhere", True

        def keys(self, request, found):
            return ["k"]

        async def fetch(self, key, net):
            raise KeyError("a bug")

    EVIDENCE_SOURCES.register("broken", lambda argument, **_: Broken())
    try:
        cache = CorpusStore(tmp_path / "cache.sqlite")
        settings = SourceSettings(searxng_url=web.url, policy=policy())
        out = await gather(request(), ["broken", "searxng"], settings, cache)
    finally:
        EVIDENCE_SOURCES.unregister("broken")
    assert "KeyError" in out.failures["broken"]
    assert {d.meta["source"] for d in out.documents} == {"searxng"}
