"""``sparql``: a reference KG over SPARQL, the subject's and object's statements as sentences.

As in KGValidator's reference-KG mode, the statements a trusted KG holds about the fact's
subject and object become evidence: each ``<s> <p> <o>`` is rendered as the sentence
"label(s) readable(p) label(o)." (labels from ``rdfs:label``, English or untagged), and each
entity's sentences form one document whose URL is the entity's IRI. A term that is not an
IRI is looked up by its exact label.

The source needs only ``select(query) -> rows``, each row ``{variable: value}`` or a SPARQL
JSON binding ``{variable: {"type": ..., "value": ...}}``: any SPARQL client with that call
can be passed in. By default it is kgcheck's one SPARQL client,
``kgcheck.data.sparql.SparqlClient``, run with the evidence policy's timeout, retries and
byte cap (``http_select``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import httpx

from kgcheck.data.facts import readable_term
from kgcheck.data.sparql import SparqlClient
from kgcheck.retrievers.sources.base import (
    SPARQL_ENV,
    EvidenceRequest,
    SourceError,
    SourceSettings,
    now,
)
from kgcheck.retrievers.sources.net import USER_AGENT, NetPolicy, NetStats
from kgcheck.retrievers.sources.text import clean_text
from kgcheck.retrievers.store import Fetched

Select = Callable[[str], list[dict[str, Any]]]
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
MAX_STATEMENTS = 200


def http_select(url: str, policy: NetPolicy | None = None) -> Select:
    """Return ``select`` on the endpoint with the evidence policy's limits, counting requests."""
    policy = policy or NetPolicy()
    client = SparqlClient(url, timeout=policy.timeout, retries=policy.retries,
                          backoff=policy.backoff, max_bytes=policy.max_bytes,
                          headers={"User-Agent": USER_AGENT}, on_request=NetStats.count)
    return client.select


def iri_of(term: str) -> str | None:
    """Return the IRI a fact term names (``<...>`` or a bare http(s) IRI), else None."""
    term = term.strip()
    if term.startswith("<") and term.endswith(">"):
        term = term[1:-1]
    unsafe = any(c in term for c in ' <>"{}|\\^`')
    ok = term.startswith(("http://", "https://", "urn:")) and not unsafe
    return term if ok else None


def _literal(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid SPARQL string literal


def _statements_query(iri: str) -> str:
    return (f"SELECT ?p ?o ?label WHERE {{ <{iri}> ?p ?o . OPTIONAL {{ ?o <{RDFS_LABEL}> "
            f"?label FILTER(LANG(?label) = '' || LANGMATCHES(LANG(?label), 'en')) }} }} "
            f"LIMIT {MAX_STATEMENTS}")


class SparqlSource:
    """Sentences from a reference KG about the fact's subject and object."""

    name = "sparql"
    trusted = True

    def __init__(self, select: Select, location: str) -> None:
        self.select = select
        self.location = location

    def keys(self, request: EvidenceRequest, found: Sequence[Fetched]) -> list[str]:
        """One key per entity: its IRI, or ``label:<text>`` for a plain term."""
        keys = []
        for raw, readable in ((request.subject, request.readable[0]),
                              (request.object, request.readable[2])):
            iri = iri_of(raw)
            keys.append(iri if iri else f"label:{readable}")
        return list(dict.fromkeys(k for k in keys if k != "label:"))

    async def fetch(self, key: str, net: object = None) -> list[Fetched]:
        """Render the entity's statements as one document (none when the KG lacks it)."""
        return await asyncio.to_thread(self._fetch, key)

    def _select(self, query: str) -> list[dict[str, str]]:
        try:
            rows = self.select(query)
        except SourceError:
            raise
        except (ValueError, OSError, httpx.HTTPError) as exc:
            # Another client's own failure (e.g. SparqlError) is this source's failure.
            raise SourceError(f"sparql at {self.location}: {exc}") from None
        # Plain values or SPARQL JSON bindings, whichever the client gives.
        return [{k: str(v.get("value", "")) if isinstance(v, dict) else str(v)
                 for k, v in row.items()} for row in rows]

    def _fetch(self, key: str) -> list[Fetched]:
        if key.startswith("label:"):
            label = key[len("label:"):]
            rows = self._select(f"SELECT DISTINCT ?s WHERE {{ {{ ?s <{RDFS_LABEL}> "
                               f"{_literal(label)}@en }} UNION {{ ?s <{RDFS_LABEL}> "
                               f"{_literal(label)} }} }} LIMIT 2")
            iris = [r["s"] for r in rows if r.get("s")]
        else:
            iris = [key]
        out = []
        for iri in iris:
            rows = self._select(_statements_query(iri))
            document = self._render(iri, rows)
            if document is not None:
                out.append(document)
        return out

    def _render(self, iri: str, rows: list[dict[str, str]]) -> Fetched | None:
        labels = [r["o"] for r in rows if r.get("p") == RDFS_LABEL and r.get("o")]
        name = clean_text(labels[0]) if labels else readable_term(iri)
        sentences = []
        for row in rows:
            predicate, value = row.get("p", ""), row.get("o", "")
            if not predicate or not value or predicate == RDFS_LABEL:
                continue
            shown = row.get("label") or (readable_term(value) if iri_of(value) else value)
            sentence = f"{name} {readable_term(predicate)} {clean_text(shown)}."
            if sentence not in sentences:
                sentences.append(sentence)
        if not sentences:
            return None
        return Fetched(self.name, iri, name, "\n".join(sentences), now())


def build(argument: str = "", *, settings: SourceSettings, select: Select | None = None,
          **_: Hashable) -> SparqlSource:
    """Build the source on ``sparql_url`` (or ``$KGCHECK_SPARQL_URL``)."""
    url = argument or settings.sparql_url or os.environ.get(SPARQL_ENV, "")
    if select is None:
        if not url.startswith(("http://", "https://")):
            raise ValueError("the sparql source needs an endpoint: --set sparql_url=URL or "
                             f"${SPARQL_ENV} (got {url!r})")
        select = http_select(url, settings.policy)
    return SparqlSource(select, url or "a SPARQL client")
