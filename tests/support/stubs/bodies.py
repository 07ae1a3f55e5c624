"""Send a body as real servers do: gzip when the request accepts it, in chunks.

Web servers, SearxNG behind nginx, MediaWiki and SPARQL endpoints compress their answers
for clients that send ``Accept-Encoding: gzip`` and stream them chunked. The evidence
stubs answer through ``send_body`` so that kgcheck's clients meet both on every request.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

# Bytes per chunk: small enough that a body of a few KB comes in several.
CHUNK = 1024


def accepts_gzip(handler: BaseHTTPRequestHandler) -> bool:
    """Tell whether the request's Accept-Encoding allows gzip (and not with q=0)."""
    for token in (handler.headers.get("Accept-Encoding") or "").split(","):
        name, _, params = token.strip().partition(";")
        if name.strip().lower() in ("gzip", "*") and params.replace(" ", "") != "q=0":
            return True
    return False


def send_body(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None, *, encoded: str = "",
              on_gzip: Callable[[], None] = lambda: None) -> None:
    """Send ``body`` chunked, gzip-compressed when accepted.

    ``encoded`` names an encoding ``body`` already has (a test's own gzip bomb): it is sent
    as it is, with that Content-Encoding. ``on_gzip`` is called before a compressed body
    goes out, so a count it keeps is up to date by the time the client has the answer.
    """
    if not encoded and accepts_gzip(handler) and body:
        body = gzip.compress(body, mtime=0)
        on_gzip()
        gzipped = True
    else:
        gzipped = False
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    if gzipped or encoded:
        handler.send_header("Content-Encoding", encoded or "gzip")
        handler.send_header("Vary", "Accept-Encoding")
    handler.send_header("Transfer-Encoding", "chunked")
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    try:
        for start in range(0, len(body), CHUNK):
            piece = body[start:start + CHUNK]
            handler.wfile.write(f"{len(piece):X}\r\n".encode() + piece + b"\r\n")
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
    except OSError:
        handler.close_connection = True  # the client stopped reading: what a cap does


def gzip_bomb(megabytes: int) -> bytes:
    """Return ``megabytes`` MB of zeros gzip-compressed (about 1 KB a MB), made a MB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = bytes(2**20)
    return b"".join([*(packer.compress(zeros) for _ in range(megabytes)), packer.flush()])
