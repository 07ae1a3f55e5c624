"""What an evidence source is: requests it makes for a fact, and what each returns.

A source turns a fact (its terms and the RAG queries) into request keys (a search query,
a page URL, an entity IRI) and fetches one key at a time. The gathering step caches each
key's answer in the corpus store, so a source never sees a key twice across runs, and
sources run in order, each seeing what the earlier ones found (``web`` fetches the pages
that ``searxng`` listed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from kgcheck.data import safe_json
from kgcheck.registry import Registry, UnknownNameError
from kgcheck.retrievers.sources.net import Net, NetPolicy, Response
from kgcheck.retrievers.sources.text import decode
from kgcheck.retrievers.store import Fetched

SEARXNG_ENV = "SEARXNG_URL"
SPARQL_ENV = "KGCHECK_SPARQL_URL"


class SourceError(Exception):
    """A source that failed for a whole request: unreachable, or answering garbage."""


class UnknownEvidenceSourceError(UnknownNameError):
    """No evidence source is registered under that name."""


@dataclass(frozen=True)
class EvidenceRequest:
    """A fact as the sources see it: raw and readable terms, and what to search for."""

    dataset: str
    fact_id: str
    subject: str
    predicate: str
    object: str
    readable: tuple[str, str, str]
    queries: tuple[str, ...]


@dataclass(frozen=True)
class SourceSettings:
    """Everything a source may be configured with (hashable: a source is built once)."""

    searxng_url: str = ""
    wikipedia_url: str = ""
    sparql_url: str = ""
    results: int = 5
    policy: NetPolicy = field(default_factory=NetPolicy)


class EvidenceSource(Protocol):
    """One kind of evidence: a search API, page fetching, an encyclopedia, a reference KG."""

    name: str
    location: str
    #: Whether the source's requests go to user-configured endpoints (no address guard).
    trusted: bool

    def keys(self, request: EvidenceRequest, found: Sequence[Fetched]) -> list[str]:
        """Return the request keys for a fact (queries, URLs, IRIs), given what was found."""
        ...

    async def fetch(self, key: str, net: Net) -> list[Fetched]:
        """Fetch one key: results or pages, each with its provenance; SourceError on failure."""
        ...


def json_answer(response: Response, where: str, not_json: str = "") -> Any:
    """Return a JSON API's answer, or raise SourceError: cut at the size cap, or not JSON.

    ``where`` names the source and its URL; ``not_json`` is said after "not JSON".
    """
    if response.truncated:
        raise SourceError(f"{where} answered more than {len(response.body):,} bytes "
                          "(decoded), the max_bytes cap")
    try:
        return safe_json.parse(decode(response.body, response.charset))
    except ValueError:
        raise SourceError(f"{where} answered something that is not JSON{not_json}") from None


def now() -> str:
    """Return the current UTC time as an ISO 8601 string (the fetch time of a result)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _discover() -> None:
    for name in ("searxng", "web", "wikipedia", "sparql"):
        EVIDENCE_SOURCES.register(name, f"kgcheck.retrievers.sources.{name}:build")


EVIDENCE_SOURCES: Registry[Callable[..., EvidenceSource]] = Registry(
    "evidence source", group="kgcheck.evidence_sources", discover=_discover,
    unknown=UnknownEvidenceSourceError)
CORPUS = "corpus"


def parse_sources(setting: str) -> list[str]:
    """Split ``sources`` into names, checking each against the registry (and ``corpus``)."""
    names = [n.strip().lower() for n in (setting or CORPUS).split(",") if n.strip()]
    for name in names:
        if name != CORPUS and name not in EVIDENCE_SOURCES:
            known = ", ".join([CORPUS, *EVIDENCE_SOURCES.names()])
            raise UnknownEvidenceSourceError(
                f"sources={setting!r}: unknown evidence source {name!r}; known: {known}")
    return list(dict.fromkeys(names)) or [CORPUS]
