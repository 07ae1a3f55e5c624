"""A forward HTTP proxy on 127.0.0.1 for plain ``http://`` URLs, as a corporate proxy is.

It reads a request in absolute form (``POST http://host:port/path HTTP/1.1``), sends it on
to that host, and relays the answer as it came: status, headers and the raw body, still
compressed. It keeps the URLs it forwarded and the ``Proxy-Authorization`` it was sent.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

# Hop-by-hop headers (RFC 9110, 7.6.1): for one connection, never sent on by a proxy.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authorization", "proxy-connection", "te",
              "trailer", "transfer-encoding", "upgrade"}


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ForwardProxy

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self._forward()

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self._forward()

    def _forward(self) -> None:
        target = urlsplit(self.path)
        with self.server.lock:
            self.server.forwarded.append(self.path)
            self.server.authorizations.append(self.headers.get("Proxy-Authorization", ""))
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {key: value for key, value in self.headers.items()
                   if key.lower() not in HOP_BY_HOP}
        upstream = http.client.HTTPConnection(target.hostname or "", target.port or 80,
                                              timeout=30)
        try:
            path = target.path + (f"?{target.query}" if target.query else "")
            upstream.request(self.command, path or "/", body=body, headers=headers)
            answer = upstream.getresponse()
            payload = answer.read()  # the raw bytes: http.client does not decode gzip
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in HOP_BY_HOP | {"content-length"}:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        finally:
            upstream.close()


class ForwardProxy(ThreadingHTTPServer):
    """Serve the proxy on a free port of 127.0.0.1 until ``stop``."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.lock = threading.Lock()
        self.forwarded: list[str] = []
        self.authorizations: list[str] = []

    @property
    def url(self) -> str:
        """The proxy's URL, as HTTP_PROXY gives it."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up mid-answer (a refused reply does)."""

    def start(self) -> ForwardProxy:
        """Serve in a thread of its own."""
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (again: nothing to do)."""
        if self.socket.fileno() != -1:
            self.shutdown()
            self.server_close()
