"""A SPARQL 1.1 protocol endpoint on 127.0.0.1, answering from a pyoxigraph Store.

GET ``/sparql?query=...`` or POST (form ``query=...`` or ``application/sparql-query``)
answer SELECT and ASK queries as ``application/sparql-results+json``; a malformed query
gets 400 with the parser's message, as real endpoints do. Load data with ``load(turtle)``.
Answers are chunked and gzip-compressed when the request accepts gzip (``gzipped`` counts
them). ``redirects`` maps a path to ``(status, location)`` (``{base}`` is the stub's own
URL): 307/308 ask the client to repeat its POST there, 301-303 to GET it. ``answers`` maps
a text to a raw body sent, as it is, for any query containing that text (a broken endpoint).
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyoxigraph

from tests.support.stubs.bodies import send_body


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep test output quiet."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        """Answer a query passed in the URL."""
        if self._redirected():
            return
        query = parse_qs(urlsplit(self.path).query).get("query", [""])[0]
        self._answer(query)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        """Answer a query posted as a form or as the body."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        if self._redirected():
            return
        if self.headers.get("Content-Type", "").startswith("application/sparql-query"):
            query = raw
        else:
            query = parse_qs(raw).get("query", [""])[0]
        self._answer(query)

    def _redirected(self) -> bool:
        path = urlsplit(self.path).path
        if path not in self.server.redirects:
            return False
        status, location = self.server.redirects[path]
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._send(status, b"", "text/html", {"Location": location.replace("{base}", base)})
        return True

    def _answer(self, query: str) -> None:
        with self.server.lock:
            self.server.queries.append(query)
        raw = next((body for text, body in self.server.answers.items() if text in query), None)
        if raw is not None:
            self._send(200, raw, "application/sparql-results+json")
            return
        try:
            results = self.server.store.query(query)
            body = results.serialize(format=pyoxigraph.QueryResultsFormat.JSON)
        except (SyntaxError, ValueError, OSError) as exc:
            self._send(400, str(exc).encode(), "text/plain")
            return
        self._send(200, bytes(body or b""), "application/sparql-results+json")

    def _send(self, status: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        send_body(self, status, body, content_type, headers, on_gzip=self._count_gzip)

    def _count_gzip(self) -> None:
        with self.server.lock:
            self.server.gzipped += 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up (it stopped at a cap); report anything else."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def __init__(self, store: pyoxigraph.Store, redirects: dict[str, tuple[int, str]],
                 answers: dict[str, bytes]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.store = store
        self.redirects = redirects
        self.answers = answers
        self.lock = threading.Lock()
        self.queries: list[str] = []
        self.gzipped = 0


class SparqlStub:
    """A SPARQL endpoint over an in-memory store; use as a context manager."""

    def __init__(self, turtle: str = "", *, redirects: dict[str, tuple[int, str]] | None = None,
                 answers: dict[str, bytes] | None = None) -> None:
        self.store = pyoxigraph.Store()
        if turtle:
            self.load(turtle)
        self.redirects = dict(redirects or {})
        self.answers = dict(answers or {})
        self._server: _Server | None = None

    def load(self, turtle: str) -> None:
        """Add Turtle data to the store."""
        self.store.load(turtle.encode(), format=pyoxigraph.RdfFormat.TURTLE)

    @property
    def url(self) -> str:
        """The endpoint URL."""
        assert self._server is not None, "the endpoint is not running"
        return f"http://127.0.0.1:{self._server.server_address[1]}/sparql"

    @property
    def base(self) -> str:
        """The stub's base URL (its other paths: redirects)."""
        return self.url.removesuffix("/sparql")

    @property
    def queries(self) -> list[str]:
        """Queries answered so far."""
        assert self._server is not None
        with self._server.lock:
            return list(self._server.queries)

    @property
    def gzipped(self) -> int:
        """How many answers were sent gzip-compressed."""
        assert self._server is not None
        with self._server.lock:
            return self._server.gzipped

    def __enter__(self) -> SparqlStub:
        self._server = _Server(self.store, self.redirects, self.answers)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
