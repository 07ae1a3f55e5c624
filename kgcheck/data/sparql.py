"""Read facts from a SPARQL 1.1 endpoint: the one client, paged triples, names of terms.

``SparqlClient.select`` sends a SELECT query with the SPARQL 1.1 protocol (URL-encoded POST,
JSON results), retries on timeouts, refused connections, transient statuses (429, 5xx) and
HTML pages with exponential backoff, and then fails with one line naming the URL. What it
reads is bounded and checked: the body is decoded (gzip, deflate, zstd) and read up to
``max_bytes`` (``$KGCHECK_SPARQL_MAX_BYTES``, 64 MiB by default) and no further; redirects
are followed only on the endpoint's own host; proxy settings in the environment are ignored
unless ``trust_env`` (``$KGCHECK_SPARQL_TRUST_ENV=1``) asks for them; every row must bind
each variable to a ``{"type": ..., "value": ...}`` object, or the page fails with a line
naming the endpoint and the row. ``iter_sparql`` pages through ``?s ?p ?o`` with
ORDER BY/LIMIT/OFFSET so the same query reads the same facts in the same order (which
sampling with a seed relies on). The evidence source ``sparql`` uses this client too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pyoxigraph as ox
from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from kgcheck.arguments import truthy
from kgcheck.data import safe_json
from kgcheck.data.facts import Fact
from kgcheck.data.httpbody import (
    ACCEPT_ENCODING,
    BodyDecodeError,
    CappedBody,
    aread_capped,
    read_capped,
)
from kgcheck.data.input_limits import Cap
from kgcheck.data.rdf import NAME_PREDICATES, TERMS, Names, is_name_triple, rdf_fact
from kgcheck.data.sources import TriplesError
from kgcheck.failures import TRANSIENT_STATUS, Failure, classify

Row = dict[str, dict[str, str]]
RESULTS_JSON = "application/sparql-results+json"
MAX_BYTES_ENV = "KGCHECK_SPARQL_MAX_BYTES"
TRUST_ENV_ENV = "KGCHECK_SPARQL_TRUST_ENV"
# One page of 10,000 rows is a few MB; an answer far past that is a mistake or an attack.
DEFAULT_MAX_BYTES = 64 * 2**20
MAX_REDIRECTS = 5
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})


class SparqlError(TriplesError):
    """An endpoint that refuses, fails or answers something other than SPARQL results."""


class _Retryable(Exception):
    """A failure worth another try (the message says what happened)."""


def redact_endpoint(url: str) -> str:
    """Return an endpoint URL without user info and query string, for messages and run.json."""
    # An endpoint URL may carry a key (?key=...); the messages name the endpoint only.
    parsed = httpx.URL(url)
    return str(parsed.copy_with(query=None, userinfo=b"")) if parsed.query or parsed.userinfo \
        else url


def _max_bytes_default() -> int:
    return Cap(MAX_BYTES_ENV, DEFAULT_MAX_BYTES, "bytes").value(SparqlError)


def _trust_env_default() -> bool:
    return truthy(os.environ.get(TRUST_ENV_ENV))


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def check_rows(bindings: Any, where: str) -> list[Row]:
    """Return a page's bindings once each row is checked: variables bound to term objects.

    Raises SparqlError naming the endpoint and the first row that is not, so that a
    malformed answer is one line, never a traceback deep in the reader.
    """
    if not isinstance(bindings, list):
        raise SparqlError(f"SPARQL endpoint {where} answered results whose bindings are not a "
                          f"list: {_shown(bindings)}")
    for number, row in enumerate(bindings, 1):
        bad = not isinstance(row, dict) or any(
            not isinstance(term, dict) or not isinstance(term.get("value"), str)
            or not isinstance(term.get("type"), str) for term in row.values())
        if bad:
            raise SparqlError(f"SPARQL endpoint {where} answered a malformed row {number}: "
                              f"{_shown(row)} (each variable must be bound to "
                              '{"type": ..., "value": "..."})')
    return bindings


@dataclass
class SparqlClient:
    """A SPARQL 1.1 protocol client: ``select(query)`` returns the result rows.

    Each row maps a variable to its SPARQL JSON binding (``{"type": "uri", "value": ...}``).
    ``retries`` more tries follow a failure, waiting ``backoff`` seconds, doubled each time.
    ``max_bytes`` caps one answer's decoded size; ``trust_env`` lets httpx read proxy
    settings from the environment; ``on_request`` is called before each request is sent.
    """

    url: str
    timeout: float = 30.0
    retries: int = 3
    backoff: float = 0.5
    headers: dict[str, str] = field(default_factory=dict)
    max_bytes: int = field(default_factory=_max_bytes_default)
    trust_env: bool = field(default_factory=_trust_env_default)
    on_request: Callable[[], None] | None = None

    def _client_args(self) -> dict[str, Any]:
        # Redirects are followed by hand (``_redirect``): only on the endpoint's own host.
        return {"timeout": self.timeout, "follow_redirects": False, "trust_env": self.trust_env}

    def _request(self, client: httpx.Client | httpx.AsyncClient, url: httpx.URL | str,
                 query: str, method: str = "POST") -> httpx.Request:
        headers = {"Accept": RESULTS_JSON, "Accept-Encoding": ACCEPT_ENCODING, **self.headers}
        if method == "GET":
            return client.build_request("GET", url, params={"query": query}, headers=headers)
        return client.build_request("POST", url, data={"query": query}, headers=headers)

    def _redirect(self, client: httpx.Client | httpx.AsyncClient, response: httpx.Response,
                  query: str) -> httpx.Request | None:
        """Return the request a redirect asks for, if it is one (same host only)."""
        location = response.headers.get("location")
        if response.status_code not in REDIRECT_STATUS or not location:
            return None
        source = response.request.url
        target = source.join(location)
        where = redact_endpoint(self.url)
        if target.scheme not in ("http", "https") or target.host != source.host or (
                source.scheme == "https" and target.scheme != "https"):
            raise SparqlError(f"SPARQL endpoint {where} redirects to "
                              f"{redact_endpoint(str(target))}, another host or a plain-http "
                              "URL: not followed (use that URL as the endpoint if you trust it)")
        # 307/308 repeat the POST; the others ask for a GET, which carries the query itself.
        method = "POST" if response.status_code in (307, 308) else "GET"
        return self._request(client, target, query, method)

    def _rows(self, response: httpx.Response, body: CappedBody) -> list[Row]:
        where = redact_endpoint(self.url)
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        text = body.body().decode("utf-8", "replace")
        first = text.strip().splitlines()[:1]
        said = f"HTTP {response.status_code} {first[0][:200] if first else ''}".strip()
        if response.status_code in TRANSIENT_STATUS:
            raise _Retryable(said)
        if response.status_code >= 400:
            raise SparqlError(f"SPARQL endpoint {where} refused the query: {said}")
        if body.over:
            raise SparqlError(f"SPARQL endpoint {where} answered more than {self.max_bytes:,} "
                              f"bytes for one query; ask for fewer rows (a smaller page size "
                              f"or --where) or raise ${MAX_BYTES_ENV}")
        if "html" in kind:
            raise _Retryable("an HTML page instead of SPARQL results (is this the endpoint "
                             "URL, e.g. .../sparql?)")
        try:
            payload = safe_json.parse(body.body())
            bindings = payload["results"]["bindings"]
        except (ValueError, KeyError, TypeError):
            raise SparqlError(f"SPARQL endpoint {where} answered {kind or 'something'} that is "
                              "not SPARQL JSON results") from None
        return check_rows(bindings, where)

    def _retrying(self) -> dict[str, Any]:
        """Return the retry policy of ``select`` and ``aselect``: the same tries, pauses."""
        return {"stop": stop_after_attempt(self.retries + 1),
                "wait": wait_exponential(multiplier=self.backoff),
                "retry": retry_if_exception_type((_Retryable, httpx.TransportError)),
                "reraise": True}

    def _failed(self, exc: Exception) -> SparqlError:
        if classify(exc) is Failure.TIMEOUT:
            last = f"no answer within {self.timeout:g} s"
        elif isinstance(exc, _Retryable):
            last = str(exc)
        else:
            last = f"{type(exc).__name__}: {exc}"
        return SparqlError(f"SPARQL endpoint {redact_endpoint(self.url)} did not answer after "
                           f"{self.retries + 1} tries: {last}")

    def _undecodable(self, exc: BodyDecodeError) -> SparqlError:
        return SparqlError(f"SPARQL endpoint {redact_endpoint(self.url)}: {exc}")

    def _too_many_redirects(self) -> SparqlError:
        return SparqlError(f"SPARQL endpoint {redact_endpoint(self.url)} redirected more than "
                           f"{MAX_REDIRECTS} times")

    def _select_once(self, client: httpx.Client, query: str) -> list[Row]:
        request: httpx.Request | None = self._request(client, self.url, query)
        for _ in range(MAX_REDIRECTS + 1):
            assert request is not None
            if self.on_request is not None:
                self.on_request()
            response = client.send(request, stream=True)
            try:
                request = self._redirect(client, response, query)
                if request is None:
                    return self._rows(response, read_capped(response, self.max_bytes))
            finally:
                response.close()
        raise self._too_many_redirects()

    async def _aselect_once(self, client: httpx.AsyncClient, query: str) -> list[Row]:
        request: httpx.Request | None = self._request(client, self.url, query)
        for _ in range(MAX_REDIRECTS + 1):
            assert request is not None
            if self.on_request is not None:
                self.on_request()
            response = await client.send(request, stream=True)
            try:
                request = self._redirect(client, response, query)
                if request is None:
                    return self._rows(response, await aread_capped(response, self.max_bytes))
            finally:
                await response.aclose()
        raise self._too_many_redirects()

    def select(self, query: str) -> list[Row]:
        """Run a SELECT query and return its rows (bindings), retrying transient failures."""
        try:
            with httpx.Client(**self._client_args()) as client:
                for attempt in Retrying(**self._retrying()):
                    with attempt:
                        return self._select_once(client, query)
        except (_Retryable, httpx.TransportError) as exc:
            raise self._failed(exc) from None
        except BodyDecodeError as exc:
            raise self._undecodable(exc) from None
        raise AssertionError("unreachable: the retries return or raise")

    async def aselect(self, query: str) -> list[Row]:
        """Run a SELECT query without blocking the event loop (same retries as ``select``)."""
        try:
            async with httpx.AsyncClient(**self._client_args()) as client:
                async for attempt in AsyncRetrying(**self._retrying()):
                    with attempt:
                        return await self._aselect_once(client, query)
        except (_Retryable, httpx.TransportError) as exc:
            raise self._failed(exc) from None
        except BodyDecodeError as exc:
            raise self._undecodable(exc) from None
        raise AssertionError("unreachable: the retries return or raise")


def binding_term(binding: dict[str, str]) -> Any:
    """Turn a SPARQL JSON binding into a pyoxigraph term."""
    kind, value = binding.get("type"), binding.get("value", "")
    if kind == "uri":
        return ox.NamedNode(value)
    if kind == "bnode":
        return ox.BlankNode(value.replace("nodeID://", "").replace(":", "_") or "b")
    language, datatype = binding.get("xml:lang"), binding.get("datatype")
    if language:
        return ox.Literal(value, language=language)
    if datatype:
        return ox.Literal(value, datatype=ox.NamedNode(datatype))
    return ox.Literal(value)


def triples_query(*, graph: str | None = None, where: str | None = None, limit: int,
                  offset: int) -> str:
    """Build the paged query for ``?s ?p ?o`` (``where`` is a pattern binding them).

    The ordered query is a subquery and the page is cut outside it: Virtuoso refuses an
    ORDER BY whose LIMIT + OFFSET passes 10,000 rows, but pages through this form.
    """
    pattern = where.strip() if where else "?s ?p ?o"
    source = f"FROM <{graph}> " if graph else ""
    return (f"SELECT ?s ?p ?o {source}WHERE {{ {{ SELECT ?s ?p ?o WHERE {{ {pattern} }} "
            f"ORDER BY ?s ?p ?o }} }} LIMIT {limit} OFFSET {offset}")


class SparqlReader:
    """Iterate the facts of an endpoint, page by page, collecting names it meets on the way.

    ``dataset`` names the facts (default: the endpoint's host). Triples with a naming
    predicate (``rdfs:label``, ...) are names, not facts, as in RDF files.
    """

    def __init__(self, client: SparqlClient | str, *, graph: str | None = None,
                 where: str | None = None, page_size: int = 10_000, dataset: str = "") -> None:
        self.client = client if isinstance(client, SparqlClient) else SparqlClient(client)
        self.graph, self.where, self.page_size = graph, where, page_size
        if page_size < 1:
            raise SparqlError(f"page size must be at least 1, got {page_size}")
        if where is not None and not all(v in where for v in ("?s", "?p", "?o")):
            raise SparqlError(f"--where {where!r} must bind ?s, ?p and ?o")
        self.dataset = dataset or httpx.URL(self.client.url).host or "sparql"
        self.names = Names()
        self.exhausted = False

    def __iter__(self) -> Iterator[Fact]:
        self.exhausted = False
        offset = 0
        while True:
            query = triples_query(graph=self.graph, where=self.where, limit=self.page_size,
                                  offset=offset)
            rows = self.client.select(query)
            for number, row in enumerate(rows, 1):
                subject, predicate, obj = self._terms(row, number)
                if is_name_triple(predicate):
                    self.names.offer(str(subject), predicate.value, obj)
                    continue
                yield rdf_fact(subject, predicate, obj, self.dataset)
            if len(rows) < self.page_size:
                break
            offset += self.page_size
        self.exhausted = True

    def named(self, facts: Iterable[Fact], batch: int = 200) -> list[Fact]:
        """Return facts with names from the endpoint (one query per ``batch`` terms)."""
        facts = list(facts)
        wanted = sorted({f.rdf[k] for f in facts if f.rdf for k in TERMS
                         if f.rdf[k].startswith("<") and self.names.get(f.rdf[k]) is None})
        predicates = " ".join(f"<{p}>" for p in NAME_PREDICATES)
        source = f"FROM <{self.graph}> " if self.graph else ""
        for start in range(0, len(wanted), batch):
            values = " ".join(wanted[start:start + batch])
            rows = self.client.select(
                f"SELECT ?s ?p ?o {source}WHERE {{ VALUES ?s {{ {values} }} "
                f"VALUES ?p {{ {predicates} }} ?s ?p ?o }}")
            for number, row in enumerate(rows, 1):
                if {"s", "p", "o"} <= row.keys():
                    subject, predicate, obj = self._terms(row, number)
                    self.names.offer(str(subject), predicate.value, obj, bounded=False)
        return self.names.apply(facts)

    def _terms(self, row: Row, number: int) -> tuple[Any, Any, Any]:
        """Return a row's ?s ?p ?o as terms; SparqlError naming the row when it cannot."""
        try:
            return binding_term(row["s"]), binding_term(row["p"]), binding_term(row["o"])
        except (KeyError, ValueError, TypeError) as exc:
            raise SparqlError(f"SPARQL endpoint {redact_endpoint(self.client.url)}: row "
                              f"{number} {_shown(row)} lacks or mangles ?s ?p ?o "
                              f"({type(exc).__name__}: {exc})") from None
