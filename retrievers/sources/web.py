"""``web``: fetch the pages that earlier sources listed and keep their main text.

Pages are untrusted: URLs come from search results, so every fetch passes the address
guard (after redirects and DNS resolution), robots.txt, the size and time caps and the
per-host pacing of ``Net``; the text is extracted with trafilatura and cleaned of markup.
A page that cannot be fetched or has no text is skipped (a note, not a failure): the
fact still has the other pages and the search snippets.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Hashable, Sequence

from kgcheck.retrievers.sources.base import EvidenceRequest, SourceSettings, now
from kgcheck.retrievers.sources.net import BlockedURL, Net, NetError
from kgcheck.retrievers.sources.text import ExtractError, page_text
from kgcheck.retrievers.store import Fetched


class PageSkipped(Exception):
    """A page that was refused or held no text; the reason goes into the run's notes.

    ``permanent`` skips (refused by the guard or robots.txt, not HTML, empty, 4xx) are
    cached like an empty answer; a page that timed out is tried again by the next run.
    """

    def __init__(self, reason: str, *, permanent: bool = True) -> None:
        super().__init__(reason)
        self.permanent = permanent


class WebSource:
    """The main text of each result page (or of the fact's own http(s) terms)."""

    name = "web"
    trusted = False
    location = "web pages"

    def __init__(self, pages: int = 5) -> None:
        self.pages = pages

    def keys(self, request: EvidenceRequest, found: Sequence[Fetched]) -> list[str]:
        """Fetch the URLs found so far; with none, the fact's terms that are web URLs."""
        urls = [f.url for f in found if f.url.startswith(("http://", "https://"))]
        if not urls:
            urls = [t.strip("<>") for t in (request.subject, request.object)
                    if t.strip("<>").startswith(("http://", "https://"))]
        return list(dict.fromkeys(urls))[:self.pages]

    async def fetch(self, key: str, net: Net) -> list[Fetched]:
        """Fetch one page; PageSkipped when it is refused, unreadable or empty."""
        try:
            response = await net.get(key, robots=True,
                                     headers={"Accept": "text/html,text/plain;q=0.9"})
        except BlockedURL as exc:
            raise PageSkipped(str(exc)) from None
        except NetError as exc:
            raise PageSkipped(str(exc), permanent=False) from None
        if response.status != 200:
            raise PageSkipped(f"{key}: HTTP {response.status}",
                              permanent=response.status < 500)
        try:
            # Extraction is CPU work: off the event loop, so other fetches go on meanwhile.
            title, text = await asyncio.to_thread(page_text, response.body,
                                                  response.content_type, response.charset)
        except ExtractError as exc:
            cut = (f" (read up to the max_bytes cap, {len(response.body):,} bytes decoded)"
                   if response.truncated else "")
            raise PageSkipped(f"{key}: {exc}{cut}") from None
        return [Fetched(self.name, response.url, title, text, now())]


def build(argument: str = "", *, settings: SourceSettings, **_: Hashable) -> WebSource:
    """Build the source; it fetches as many pages as ``source_results`` per fact."""
    if importlib.util.find_spec("trafilatura") is None:
        raise ValueError("the web source extracts page text with trafilatura, which is not "
                         "installed: pip install 'kgcheck[web]'")
    return WebSource(settings.results)
