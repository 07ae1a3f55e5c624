"""``wikipedia``: the MediaWiki API, search plus the intro extracts of the pages found.

One request per query: ``generator=search`` feeds ``prop=extracts`` (the TextExtracts
extension, plain text, intro sections; whole-article extracts come one page per request)
and ``prop=info`` gives each page's URL. Any MediaWiki with TextExtracts works: the base
URL is the ``wikipedia_url`` setting.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from kgcheck.retrievers.sources.base import (
    EvidenceRequest,
    SourceError,
    SourceSettings,
    json_answer,
    now,
)
from kgcheck.retrievers.sources.net import Net, NetError
from kgcheck.retrievers.sources.text import clean_text
from kgcheck.retrievers.store import Fetched


class WikipediaSource:
    """Encyclopedia pages about the fact's subject and object."""

    name = "wikipedia"
    trusted = True

    def __init__(self, api_url: str, results: int = 5) -> None:
        self.api_url = api_url
        self.location = api_url
        self.results = results

    def keys(self, request: EvidenceRequest, found: Sequence[Fetched]) -> list[str]:
        """Search for the subject, the object and the fact's sentence."""
        subject, _, obj = request.readable
        candidates = [subject, obj, *request.queries[:1]]
        return list(dict.fromkeys(c.strip() for c in candidates if c.strip()))

    async def fetch(self, key: str, net: Net) -> list[Fetched]:
        """Search and read the intro extracts of the best pages."""
        params = {"action": "query", "format": "json", "formatversion": "2",
                  "generator": "search", "gsrsearch": key, "gsrlimit": str(self.results),
                  "prop": "extracts|info", "inprop": "url", "explaintext": "1",
                  "exintro": "1", "exlimit": "max", "redirects": "1"}
        try:
            response = await net.get(self.api_url, params=params)
        except NetError as exc:
            raise SourceError(f"wikipedia at {self.api_url}: {exc}") from None
        if response.status != 200:
            raise SourceError(f"wikipedia at {self.api_url} answered HTTP {response.status}")
        payload = json_answer(response, f"wikipedia at {self.api_url}",
                              "; is it a MediaWiki api.php URL?")
        if not isinstance(payload, dict):
            raise SourceError(f"wikipedia at {self.api_url} answered JSON that is not an "
                              "API response")
        if "error" in payload:
            error = payload["error"]
            info = error.get("info", error) if isinstance(error, dict) else error
            raise SourceError(f"wikipedia at {self.api_url}: API error: {info}")
        pages = (payload.get("query") or {}).get("pages") or []
        if isinstance(pages, dict):  # formatversion=1 servers
            pages = list(pages.values())
        fetched_at = now()
        out = []
        for page in sorted((p for p in pages if isinstance(p, dict)),
                           key=lambda p: p.get("index", 0)):
            text = clean_text(str(page.get("extract") or ""))
            if not text:
                continue
            url = str(page.get("fullurl") or page.get("canonicalurl") or "")
            out.append(Fetched(self.name, url, clean_text(str(page.get("title") or "")), text,
                               fetched_at))
        return out


def build(argument: str = "", *, settings: SourceSettings, **_: Hashable) -> WikipediaSource:
    """Build the source from ``wikipedia_url``."""
    url = argument or settings.wikipedia_url
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"the wikipedia source needs a MediaWiki API URL (wikipedia_url="
                         f"{url!r})")
    return WikipediaSource(url, settings.results)
