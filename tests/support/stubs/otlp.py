"""An OTLP/HTTP trace receiver on loopback: accepts protobuf exports, keeps decoded spans."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def attribute_value(value: Any) -> Any:
    """Unwrap an OTLP ``AnyValue`` into a Python value."""
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class OTLPReceiver(ThreadingHTTPServer):
    """Records each request path and content type, and every span of ``/v1/traces``.

    A span is kept as ``{name, service, trace, id, parent, attributes}``. A receiver made
    with ``status=503`` accepts each export and answers that status (keeping no span);
    with ``hang=True`` it accepts the connection and never answers.
    """

    daemon_threads = True

    def __init__(self, port: int, *, status: int = 200, hang: bool = False) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.spans: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.content_types: list[str | None] = []
        self.status = status
        self.hang = hang
        self.release = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    server: OTLPReceiver

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.paths.append(self.path)
        self.server.content_types.append(self.headers.get("Content-Type"))
        if self.server.hang:
            self.server.release.wait(60)
            self.close_connection = True
            return
        if self.server.status != 200:
            self.send_response(self.server.status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                service = {a.key: a.value.string_value
                           for a in resource_spans.resource.attributes}.get("service.name")
                for scope_spans in resource_spans.scope_spans:
                    self.server.spans.extend({
                        "name": span.name,
                        "service": service,
                        "trace": span.trace_id.hex(),
                        "id": span.span_id.hex(),
                        "parent": span.parent_span_id.hex() or None,
                        "attributes": {a.key: attribute_value(a.value) for a in span.attributes},
                    } for span in scope_spans.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return


@contextmanager
def otlp_receiver(port: int, *, status: int = 200, hang: bool = False) -> Iterator[OTLPReceiver]:
    """Serve an ``OTLPReceiver`` on ``127.0.0.1:port`` for the duration of the block."""
    server = OTLPReceiver(port, status=status, hang=hang)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
