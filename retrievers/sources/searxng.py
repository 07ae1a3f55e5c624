"""``searxng``: web search through a SearxNG instance's JSON API.

langchain-community's ``SearxSearchWrapper`` was the other candidate; this source talks to
the API directly because the wrapper's sync path is ``requests`` without a timeout (it
would block the event loop a graph node runs on) and its async path opens an aiohttp
session with no deadline, no retries and no size cap. The API is one GET, so an httpx
client with the shared policy (deadline, retries, caps, pacing) is the sounder choice.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence

from kgcheck.retrievers.sources.base import (
    SEARXNG_ENV,
    EvidenceRequest,
    SourceError,
    SourceSettings,
    json_answer,
    now,
)
from kgcheck.retrievers.sources.net import Net, NetError
from kgcheck.retrievers.sources.text import clean_text
from kgcheck.retrievers.store import Fetched


class SearxngSource:
    """Search results (URL, title, snippet) for each of a fact's queries."""

    name = "searxng"
    trusted = True

    def __init__(self, base_url: str, results: int = 5) -> None:
        self.base_url = base_url.rstrip("/")
        self.location = self.base_url
        self.results = results

    def keys(self, request: EvidenceRequest, found: Sequence[Fetched]) -> list[str]:
        """Search once per query."""
        return list(dict.fromkeys(q.strip() for q in request.queries if q.strip()))

    async def fetch(self, key: str, net: Net) -> list[Fetched]:
        """Ask ``/search?q=...&format=json``; keep the first results with a web URL."""
        try:
            response = await net.get(f"{self.base_url}/search",
                                     params={"q": key, "format": "json"},
                                     headers={"Accept": "application/json"})
        except NetError as exc:
            raise SourceError(f"searxng at {self.base_url}: {exc}") from None
        if response.status != 200:
            hint = (" (is format=json enabled in its settings.yml?)"
                    if response.status == 403 else "")
            raise SourceError(f"searxng at {self.base_url} answered HTTP "
                              f"{response.status}{hint}")
        payload = json_answer(response, f"searxng at {self.base_url}",
                              f" ({response.content_type or 'no content type'})")
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise SourceError(f"searxng at {self.base_url} answered JSON without a results "
                              "list; is it a SearxNG instance?")
        fetched_at = now()
        out: list[Fetched] = []
        for item in results:
            if not isinstance(item, dict):
                continue
            url = str(item.get("url") or "")
            if not url.startswith(("http://", "https://")) or any(f.url == url for f in out):
                continue
            title = clean_text(str(item.get("title") or ""))
            snippet = clean_text(str(item.get("content") or ""))
            out.append(Fetched(self.name, url, title, snippet, fetched_at))
            if len(out) >= self.results:
                break
        return out


def build(argument: str = "", *, settings: SourceSettings, **_: Hashable) -> SearxngSource:
    """Build the source from ``searxng_url`` (or ``$SEARXNG_URL``)."""
    url = argument or settings.searxng_url or os.environ.get(SEARXNG_ENV, "")
    if not url.startswith(("http://", "https://")):
        raise ValueError("the searxng source needs a SearxNG base URL: --set "
                         f"searxng_url=URL or ${SEARXNG_ENV} (got {url!r})")
    return SearxngSource(url, settings.results)
