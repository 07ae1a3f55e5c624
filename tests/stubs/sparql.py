"""A SPARQL 1.1 protocol endpoint on 127.0.0.1, answering from a pyoxigraph Store.

GET ``/sparql?query=...`` or POST (form ``query=...`` or ``application/sparql-query``)
answer SELECT and ASK queries as ``application/sparql-results+json``; a malformed query
gets 400 with the parser's message, as real endpoints do. Load data with ``load(turtle)``.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyoxigraph


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep test output quiet."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        """Answer a query passed in the URL."""
        query = parse_qs(urlsplit(self.path).query).get("query", [""])[0]
        self._answer(query)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        """Answer a query posted as a form or as the body."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        if self.headers.get("Content-Type", "").startswith("application/sparql-query"):
            query = raw
        else:
            query = parse_qs(raw).get("query", [""])[0]
        self._answer(query)

    def _answer(self, query: str) -> None:
        with self.server.lock:
            self.server.queries.append(query)
        try:
            results = self.server.store.query(query)
            body = results.serialize(format=pyoxigraph.QueryResultsFormat.JSON)
        except (SyntaxError, ValueError, OSError) as exc:
            self._send(400, str(exc).encode(), "text/plain")
            return
        self._send(200, bytes(body or b""), "application/sparql-results+json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, store: pyoxigraph.Store) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.store = store
        self.lock = threading.Lock()
        self.queries: list[str] = []


class SparqlStub:
    """A SPARQL endpoint over an in-memory store; use as a context manager."""

    def __init__(self, turtle: str = "") -> None:
        self.store = pyoxigraph.Store()
        if turtle:
            self.load(turtle)
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
    def queries(self) -> list[str]:
        """Queries answered so far."""
        assert self._server is not None
        with self._server.lock:
            return list(self._server.queries)

    def __enter__(self) -> SparqlStub:
        self._server = _Server(self.store)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
