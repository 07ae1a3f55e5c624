"""A web on 127.0.0.1: a SearxNG JSON API, pages written by the tests, a MediaWiki API.

``WebStub`` serves, from one threaded server:

- ``/search?q=...&format=json``: SearxNG's JSON answer. Results come from ``results``
  (query -> list of ``{"url", "title", "content"}``; ``"*"`` answers any query) and may
  name ``{base}``, replaced by the stub's own URL. ``searx_mode`` = ``garbage`` answers an
  HTML page instead, ``fail`` answers 500, ``empty`` an empty results list.
- ``/robots.txt``: ``robots`` (404 when None).
- any other path in ``pages``: ``Page(body, content_type, ...)``; a page may drip its body
  slowly, stream a huge body, or redirect.
- ``/w/api.php``: a MediaWiki API answering ``generator=search`` with ``prop=extracts|info``
  from ``wiki`` (title -> extract), matching titles that share a word with the search.
- ``moved``: path prefixes that moved (old -> new): a request under one is redirected
  (301, query kept), as a server that moved an instance or an API does.

Every answer is chunked and gzip-compressed when the request accepts gzip (``gzipped``
lists the paths sent so), as real servers do. Every request is logged (``requests``);
``latency`` delays every answer (a slow network).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.stubs.bodies import send_body


@dataclass
class Page:
    """A page the stub serves."""

    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    location: str = ""
    drip_seconds: float = 0.0
    huge_bytes: int = 0
    encoded: str = ""
    """The Content-Encoding ``body`` already has (sent as it is: a test's gzip bomb)."""


@dataclass
class _State:
    results: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    pages: dict[str, Page] = field(default_factory=dict)
    wiki: dict[str, str] = field(default_factory=dict)
    robots: str | None = "User-agent: *\nDisallow: /private/\n"
    searx_mode: str = "ok"
    latency: float = 0.0
    moved: dict[str, str] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    gzipped: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep test output quiet."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        """Serve a GET request."""
        state = self.server.state
        with state.lock:
            state.requests.append(self.path)
        if state.latency:
            time.sleep(state.latency)
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        old = next((p for p in state.moved if parts.path.startswith(p + "/")), None)
        if old is not None:
            moved = state.moved[old] + parts.path[len(old):]
            self._send(301, b"", "text/html",
                       {"Location": moved + (f"?{parts.query}" if parts.query else "")})
            return
        if parts.path == "/search":
            self._search(query)
        elif parts.path == "/robots.txt":
            if state.robots is None:
                self._send(404, b"not found", "text/plain")
            else:
                self._send(200, state.robots.encode(), "text/plain")
        elif parts.path == "/w/api.php":
            self._wiki(query)
        elif parts.path in state.pages:
            self._page(state.pages[parts.path])
        else:
            self._send(404, b"<html><body>not found</body></html>", "text/html")

    def _send(self, status: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None, encoded: str = "") -> None:
        send_body(self, status, body, content_type, headers, encoded=encoded,
                  on_gzip=self._count_gzip)

    def _count_gzip(self) -> None:
        state = self.server.state
        with state.lock:
            state.gzipped.append(self.path)

    def _search(self, query: dict[str, str]) -> None:
        state = self.server.state
        if state.searx_mode == "garbage":
            self._send(200, b"<html><body>Too many requests</body></html>", "text/html")
            return
        if state.searx_mode == "fail":
            self._send(500, b"internal error", "text/plain")
            return
        q = query.get("q", "")
        found = [] if state.searx_mode == "empty" else state.results.get(
            q, state.results.get("*", []))
        base = self.server.base_url
        results = [{k: v.replace("{base}", base) for k, v in r.items()} | {"engine": "stub"}
                   for r in found]
        payload = {"query": q, "number_of_results": len(results), "results": results,
                   "answers": [], "suggestions": []}
        self._send(200, json.dumps(payload).encode(), "application/json")

    def _wiki(self, query: dict[str, str]) -> None:
        words = set(query.get("gsrsearch", "").lower().split())
        pages = []
        for n, (title, extract) in enumerate(sorted(self.server.state.wiki.items())):
            if words & set(title.lower().split()):
                slug = title.replace(" ", "_")
                pages.append({"pageid": n + 1, "ns": 0, "title": title, "index": len(pages) + 1,
                              "extract": extract,
                              "fullurl": f"{self.server.base_url}/wiki/{slug}"})
        payload: dict[str, Any] = {"batchcomplete": True}
        if pages:
            payload["query"] = {"pages": pages}
        self._send(200, json.dumps(payload).encode(), "application/json")

    def _page(self, page: Page) -> None:
        state = self.server.state
        if page.location:
            self._send(page.status or 302, b"", "text/html",
                       {"Location": page.location.replace("{base}", self.server.base_url)})
            return
        if page.drip_seconds or page.huge_bytes:
            self.send_response(page.status)
            self.send_header("Content-Type", page.content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b"<p>" + b"x" * 65_000 + b"</p>" if page.huge_bytes else b"<p>.</p>"
            sent = 0
            try:
                while not state.stopping.is_set() and (not page.huge_bytes
                                                       or sent < page.huge_bytes):
                    self.wfile.write(f"{len(piece):X}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                    sent += len(piece)
                    if page.drip_seconds:
                        state.stopping.wait(page.drip_seconds)
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass  # the client hung up: what a size or time cap does
            self.close_connection = True
            return
        self._send(page.status, page.body, page.content_type, encoded=page.encoded)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up (it stopped at a cap); report anything else."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def __init__(self, state: _State) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}"


class WebStub:
    """The stub web in a background thread; use as a context manager."""

    def __init__(self, **values: Any) -> None:
        self.state = _State(**values)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The stub's base URL."""
        assert self._server is not None, "the stub is not running"
        return self._server.base_url

    @property
    def requests(self) -> list[str]:
        """Paths (with query) requested so far."""
        with self.state.lock:
            return list(self.state.requests)

    @property
    def gzipped(self) -> list[str]:
        """Paths (with query) answered with a gzip-compressed body."""
        with self.state.lock:
            return list(self.state.gzipped)

    def __enter__(self) -> WebStub:
        self._server = _Server(self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.state.stopping.set()
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
