"""Read facts from a SPARQL 1.1 endpoint: a small client, paged triples, names of terms.

``SparqlClient.select`` sends a SELECT query with the SPARQL 1.1 protocol (URL-encoded POST,
JSON results), retries on timeouts, refused connections, 5xx/429 answers and HTML pages
with exponential backoff, and then fails with one line naming the URL. ``iter_sparql``
pages through ``?s ?p ?o`` with ORDER BY/LIMIT/OFFSET so the same query reads the same facts
in the same order (which sampling with a seed relies on).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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

from kgcheck.data.facts import Fact
from kgcheck.data.rdf import NAME_PREDICATES, TERMS, Names, is_name_triple, rdf_fact
from kgcheck.data.sources import TriplesError

Row = dict[str, dict[str, str]]
RESULTS_JSON = "application/sparql-results+json"
RETRY_STATUS = {429, 500, 502, 503, 504}


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


@dataclass
class SparqlClient:
    """A SPARQL 1.1 protocol client: ``select(query)`` returns the result rows.

    Each row maps a variable to its SPARQL JSON binding (``{"type": "uri", "value": ...}``).
    ``retries`` more tries follow a failure, waiting ``backoff`` seconds, doubled each time.
    """

    url: str
    timeout: float = 30.0
    retries: int = 3
    backoff: float = 0.5
    headers: dict[str, str] = field(default_factory=dict)

    def _request_args(self, query: str) -> dict[str, Any]:
        return {"data": {"query": query},
                "headers": {"Accept": RESULTS_JSON, **self.headers}}

    def _rows(self, response: httpx.Response) -> list[Row]:
        where = redact_endpoint(self.url)
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if response.status_code in RETRY_STATUS:
            first = response.text.strip().splitlines()[:1]
            raise _Retryable(f"HTTP {response.status_code} {first[0][:200] if first else ''}"
                             .strip())
        if response.status_code >= 400:
            first = response.text.strip().splitlines()[:1]
            raise SparqlError(f"SPARQL endpoint {where} refused the query: HTTP "
                              f"{response.status_code} {first[0][:200] if first else ''}".strip())
        if "html" in kind:
            raise _Retryable("an HTML page instead of SPARQL results (is this the endpoint "
                             "URL, e.g. .../sparql?)")
        try:
            payload = response.json()
            return list(payload["results"]["bindings"])
        except (ValueError, KeyError, TypeError):
            raise SparqlError(f"SPARQL endpoint {where} answered {kind or 'something'} that is "
                              "not SPARQL JSON results") from None

    def _retrying(self) -> dict[str, Any]:
        """Return the retry policy of ``select`` and ``aselect``: the same tries, pauses."""
        return {"stop": stop_after_attempt(self.retries + 1),
                "wait": wait_exponential(multiplier=self.backoff),
                "retry": retry_if_exception_type((_Retryable, httpx.TransportError)),
                "reraise": True}

    def _failed(self, exc: Exception) -> SparqlError:
        if isinstance(exc, httpx.TimeoutException):
            last = f"no answer within {self.timeout:g} s"
        elif isinstance(exc, _Retryable):
            last = str(exc)
        else:
            last = f"{type(exc).__name__}: {exc}"
        return SparqlError(f"SPARQL endpoint {redact_endpoint(self.url)} did not answer after "
                           f"{self.retries + 1} tries: {last}")

    def select(self, query: str) -> list[Row]:
        """Run a SELECT query and return its rows (bindings), retrying transient failures."""
        try:
            with httpx.Client(timeout=self.timeout, follow_redirects=True) as client:
                for attempt in Retrying(**self._retrying()):
                    with attempt:
                        return self._rows(client.post(self.url, **self._request_args(query)))
        except (_Retryable, httpx.TransportError) as exc:
            raise self._failed(exc) from None
        raise AssertionError("unreachable: the retries return or raise")

    async def aselect(self, query: str) -> list[Row]:
        """Run a SELECT query without blocking the event loop (same retries as ``select``)."""
        try:
            async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=True) as client:
                async for attempt in AsyncRetrying(**self._retrying()):
                    with attempt:
                        response = await client.post(self.url, **self._request_args(query))
                        return self._rows(response)
        except (_Retryable, httpx.TransportError) as exc:
            raise self._failed(exc) from None
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
            for row in rows:
                try:
                    subject, predicate, obj = (binding_term(row[v]) for v in ("s", "p", "o"))
                except (KeyError, ValueError, TypeError) as exc:
                    raise SparqlError(f"SPARQL endpoint {redact_endpoint(self.client.url)}: a row "
                                      f"lacks or mangles ?s ?p ?o ({exc})") from None
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
            for row in rows:
                if {"s", "p", "o"} <= row.keys():
                    self.names.offer(str(binding_term(row["s"])), row["p"]["value"],
                                     binding_term(row["o"]), bounded=False)
        return self.names.apply(facts)
