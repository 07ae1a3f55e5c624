"""A threaded HTTP server on 127.0.0.1 with scripted behaviour, the base of the model stubs.

A stub records every request it gets (method, path, headers, JSON body) and answers
according to its ``Behaviour``: answer a scripted text, fail the first N requests with a
5xx status and then answer, or never answer (hold the connection until the stub stops).
``refused_url()`` gives an address where nothing listens, for a refused connection.

As real servers and the proxies in front of them do, a stub compresses its replies with
gzip when the request accepts it (streams too, flushed chunk by chunk), sends JSON replies
as chunked bodies, and, when the behaviour says so, answers each request first with a 307
redirect to the same request under ``/moved`` (method and body kept, as 307 requires).
"""

from __future__ import annotations

import gzip
import json
import socket
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A hung request is released after this long at the latest, so a stub never outlives a test.
MAX_HANG_SECONDS = 30.0


@dataclass
class Behaviour:
    """What a stub does with the requests it gets.

    Attributes:
        answer: The text a successful reply carries.
        fail_times: How many requests fail before the stub answers.
        fail_status: The status of those failures (500 or 503 usually).
        hang: Never answer: hold each request until the stub stops.
        tokens_in: The prompt token count the reply reports.
        tokens_out: The completion token count the reply reports.
        chunk_chars: Characters per streamed chunk.
        retry_after_ms: Sent as ``retry-after-ms`` on failures when set (OpenAI does so).
        drip: When above 0, stream an empty chunk every ``drip`` seconds and never finish
            (a server that is alive but stuck): only a bound on the whole call ends it.
        garbage: Answer 200 with a body that is not the protocol's JSON (a proxy's page).
        truncate: Stream the answer's chunks, then end the response without the final
            chunk (Ollama's ``done``; OpenAI's ``finish_reason`` and ``[DONE]``).
        logprobs: The answer's tokens as ``(token, logprob, [(alternative, logprob),
            ...])``, sent as OpenAI's ``logprobs.content`` when a request asks for them
            (``"logprobs": true``, alternatives cut to its ``top_logprobs``).
        gzip: Compress replies with gzip when the request's ``Accept-Encoding`` allows it.
        chunked: Send JSON replies as chunked bodies (no ``Content-Length``).
        redirect: Answer every request with a 307 to the same path under ``/moved``
            first; the request that follows it is served.
        delay: Seconds each model call waits before it is answered (a server's latency).
        answer_by: Chooses the answer from the request's JSON body instead of ``answer``
            (answers that differ by fact, the same from every stub given the same function).
    """

    answer: str = "T"
    fail_times: int = 0
    fail_status: int = 503
    hang: bool = False
    tokens_in: int = 26
    tokens_out: int = 2
    chunk_chars: int = 4
    retry_after_ms: int | None = None
    drip: float = 0.0
    garbage: bool = False
    truncate: bool = False
    logprobs: list[tuple[str, float, list[tuple[str, float]]]] | None = None
    gzip: bool = True
    chunked: bool = True
    redirect: bool = False
    delay: float = 0.0
    answer_by: Callable[[Any], str] | None = None

    def answer_to(self, body: Any) -> str:
        """Return the text a successful reply to this request carries."""
        return self.answer_by(body) if self.answer_by is not None else self.answer


# Where a redirected request is sent again.
MOVED = "/moved"
# Pieces a chunked JSON reply is cut into.
JSON_CHUNKS = 3


@dataclass
class Seen:
    """One request as the stub received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any = None
    query: str = ""


@dataclass
class _Shared:
    behaviour: Behaviour
    requests: list[Seen] = field(default_factory=list)
    # False in a stub process of a benchmark: nobody reads its log, which would only grow.
    keep_log: bool = True
    # Model calls (POST requests) received: counted, not found again in the log each time.
    posts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    answered: int = 0
    # Replies sent gzip-compressed, sent chunked, and requests redirected.
    gzipped: int = 0
    chunked: int = 0
    redirected: int = 0


class StubHandler(BaseHTTPRequestHandler):
    """Request handler base: records the request, then routes it by method and path."""

    protocol_version = "HTTP/1.1"
    server: _StubHTTPServer

    # Routes: (method, path) -> handler method name; subclasses fill this in.
    routes: dict[tuple[str, str], str] = {}

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep test output quiet."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        """Serve a GET request."""
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        """Serve a POST request."""
        self._dispatch("POST")

    @property
    def shared(self) -> _Shared:
        """The stub's behaviour and request log."""
        return self.server.shared

    def _dispatch(self, method: str) -> None:
        self._gzip: Any = None
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.shared.behaviour.redirect and not self.path.startswith(MOVED + "/"):
            with self.shared.lock:
                self.shared.redirected += 1
            self.send_response(307)
            self.send_header("Location", MOVED + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith(MOVED + "/"):
            self.path = self.path[len(MOVED):]
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        path = self.path.split("?", 1)[0]
        with self.shared.lock:
            self.shared.posts += method == "POST"
            if self.shared.keep_log:
                self.shared.requests.append(
                    Seen(method, path, {k.lower(): v for k, v in self.headers.items()}, body,
                         self.path.partition("?")[2])
                )
        name = self.route(method, path)
        if name is None:
            self.send_json(404, {"error": f"404 page not found: {method} {path}"})
            return
        getattr(self, name)(body)

    def route(self, method: str, path: str) -> str | None:
        """Name the handler method for a request (None: not found); subclasses may match more."""
        return self.routes.get((method, path))

    def model_call(self) -> bool:
        """Apply the behaviour to a model call; return True when the caller should answer."""
        behaviour = self.shared.behaviour
        if behaviour.hang:
            # Say nothing: the client's read timeout is what is under test.
            self.shared.stopping.wait(MAX_HANG_SECONDS)
            self.close_connection = True
            return False
        with self.shared.lock:
            calls = self.shared.posts
        if calls <= behaviour.fail_times:
            self.send_failure(behaviour.fail_status)
            return False
        if behaviour.delay:
            self.shared.stopping.wait(behaviour.delay)
        with self.shared.lock:
            self.shared.answered += 1
        return True

    def send_garbage(self) -> bool:
        """Answer with a page that is not JSON when the behaviour says so; tell if it did."""
        if not self.shared.behaviour.garbage:
            return False
        data = b"<html><body>502 Bad Gateway (proxy)</body></html>\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return True

    def drip_until_stopped(self, chunk: bytes) -> bool:
        """Send ``chunk`` every ``drip`` seconds until the stub stops; tell if it did so."""
        drip = self.shared.behaviour.drip
        if drip <= 0:
            return False
        deadline = time.monotonic() + MAX_HANG_SECONDS
        try:
            while time.monotonic() < deadline and not self.shared.stopping.wait(drip):
                self.write_chunk(chunk)
        except OSError:
            pass  # the client gave up and closed the connection
        self.close_connection = True
        return True

    def send_failure(self, status: int) -> None:
        """Send the provider's error body for ``status``; subclasses shape it."""
        self.send_json(status, {"error": f"stub failure {status}"})

    def accepts_gzip(self) -> bool:
        """Tell whether this reply is to be gzip-compressed (the client accepts it)."""
        accepted = self.headers.get("Accept-Encoding", "").lower()
        return self.shared.behaviour.gzip and "gzip" in accepted

    def _count(self, gzipped: bool, chunked: bool) -> None:
        with self.shared.lock:
            self.shared.gzipped += gzipped
            self.shared.chunked += chunked

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        """Send one JSON document: gzip-compressed when accepted, chunked when configured."""
        data = json.dumps(payload).encode()
        gzipped, chunked = self.accepts_gzip(), self.shared.behaviour.chunked
        if gzipped:
            data = gzip.compress(data)
        self._count(gzipped, chunked)
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not chunked:
            self.wfile.write(data)
            return
        size = max(1, -(-len(data) // JSON_CHUNKS))
        for start in range(0, len(data), size):
            self._raw_chunk(data[start:start + size])
        self._raw_chunk(b"")

    def start_chunked(self, content_type: str) -> None:
        """Start a chunked response, as a streaming server does (gzip when accepted)."""
        gzipped = self.accepts_gzip()
        self._count(gzipped, True)
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
            # One gzip stream over the whole body, flushed at each chunk so that it streams.
            self._gzip = zlib.compressobj(wbits=31)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _raw_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def write_chunk(self, data: bytes) -> None:
        """Send one chunk of a chunked response."""
        if getattr(self, "_gzip", None) is not None:
            data = self._gzip.compress(data) + self._gzip.flush(zlib.Z_SYNC_FLUSH)
        self._raw_chunk(data)

    def end_chunked(self) -> None:
        """Close a chunked response (and its gzip stream)."""
        if getattr(self, "_gzip", None) is not None:
            self._raw_chunk(self._gzip.flush())
            self._gzip = None
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _StubHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # A real server's backlog: socketserver's 5 resets a client opening 16 connections at once.
    request_queue_size = 128
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up (a probe reads only the status); report the rest."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def __init__(self, handler: type[StubHandler], shared: _Shared) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.shared = shared
        self.open_connections: set[socket.socket] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.shared.lock:
            self.open_connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.shared.lock:
            self.open_connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Cut every open connection, as a server that dies does (kept-alive ones too)."""
        with self.shared.lock:
            connections = list(self.open_connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class StubServer:
    """A stub model server running in a background thread; use as a context manager."""

    handler: type[StubHandler] = StubHandler
    # Path prefix clients put after host:port (``/v1`` for OpenAI-style servers).
    prefix = ""

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self._shared = _Shared(behaviour or Behaviour())
        self._server: _StubHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def behaviour(self) -> Behaviour:
        """The behaviour in force; replace fields to change what the stub does next."""
        return self._shared.behaviour

    @behaviour.setter
    def behaviour(self, value: Behaviour) -> None:
        self._shared.behaviour = value

    @property
    def requests(self) -> list[Seen]:
        """Every request received so far, in order."""
        with self._shared.lock:
            return list(self._shared.requests)

    def calls(self) -> list[Seen]:
        """The model calls (POST requests) received so far."""
        return [r for r in self.requests if r.method == "POST"]

    @property
    def answered(self) -> int:
        """How many model calls got a successful answer."""
        return self._shared.answered

    @property
    def gzipped(self) -> int:
        """How many replies went out gzip-compressed."""
        return self._shared.gzipped

    @property
    def chunked(self) -> int:
        """How many replies went out as chunked bodies."""
        return self._shared.chunked

    @property
    def redirected(self) -> int:
        """How many requests were answered with a redirect."""
        return self._shared.redirected

    @property
    def url(self) -> str:
        """The base URL a client is given (with the provider's path prefix)."""
        if self._server is None:
            raise RuntimeError("the stub server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.prefix}"

    def start(self) -> StubServer:
        """Bind a free loopback port and serve in a daemon thread."""
        self._server = _StubHTTPServer(self.handler, self._shared)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hung requests, stop serving and close the port."""
        self._shared.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.drop_connections()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def refused_url(prefix: str = "") -> str:
    """An address on 127.0.0.1 where nothing listens, so connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{prefix}"


def now_iso() -> str:
    """The current UTC time as Ollama writes it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())


def pieces(text: str, size: int) -> list[str]:
    """Split ``text`` into streamed pieces of ``size`` characters (at least one piece)."""
    size = max(1, size)
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def serve_in_foreground(stub: StubServer) -> None:
    """Run ``stub``, print its URL (for the process that started this one), until Ctrl-C.

    Its requests are counted but not kept: no one reads them from another process, and a
    benchmark's tens of thousands would only grow its memory.
    """
    stub._shared.keep_log = False
    with stub:
        print(stub.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
