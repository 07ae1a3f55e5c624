"""Read an HTTP response body decoded and capped: the one way kgcheck's clients read bodies.

Servers compress what they send (``Content-Encoding: gzip``, ``deflate``, ``zstd``), and a
small compressed body can stand for a huge one: a 300 KB gzip body can decode to 300 MB.
``CappedBody`` takes the raw bytes as they arrive (httpx's ``aiter_raw``/``iter_raw``),
decodes them step by step and never holds more than ``limit`` decoded bytes: each decoder
is asked for no more output than the room left (zlib's ``max_length``; zstd writes in
64 KiB pieces), so a bomb costs the cap, not its decoded size. ``ACCEPT_ENCODING`` is what
clients should ask for: the encodings decoded here (Brotli is not: no bounded decoder is
installed for it). For clients that read bodies themselves (the model SDKs),
``CappedTransport`` wraps their httpx transport: bodies reach them decoded, and a body past
the cap ends in ``BodyTooLargeError``.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import httpx

__all__ = ["ACCEPT_ENCODING", "BodyDecodeError", "BodyDecoder", "BodyTooLargeError", "CappedBody",
           "CappedTransport", "aread_capped", "read_capped"]

try:  # zstandard comes with httpx[zstd]; without it, zstd is neither asked for nor read.
    import zstandard
except ImportError:  # pragma: no cover - depends on the environment
    zstandard = None  # type: ignore[assignment]

ACCEPT_ENCODING = "gzip, deflate" + (", zstd" if zstandard is not None else "")
# The largest piece a zstd decoder writes at once.
ZSTD_PIECE = 65_536


class BodyDecodeError(ValueError):
    """A body in an encoding that is not supported, or that does not decode."""


class _Decoder(Protocol):
    def decode(self, data: bytes, room: int) -> bytes:
        """Decode ``data``; return at most ``room`` bytes (more would be over the cap)."""
        ...


class _Identity:
    def decode(self, data: bytes, room: int) -> bytes:
        return data[:room]


class _Zlib:
    """gzip (``wbits`` 16 + 15) or deflate, zlib-wrapped or raw (tried in that order)."""

    def __init__(self, gzip: bool) -> None:
        self.gzip = gzip
        self.first = True
        self.inner = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)

    def decode(self, data: bytes, room: int) -> bytes:
        first, self.first = self.first, False
        try:
            # Output beyond ``room`` stays in unconsumed_tail, unread: the body is full then.
            return self.inner.decompress(data, room)
        except zlib.error as exc:
            if first and not self.gzip:
                # "deflate" is often sent raw, without the zlib header the standard asks for.
                self.inner = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.decode(data, room)
            raise BodyDecodeError(f"the {'gzip' if self.gzip else 'deflate'} body does not "
                                  f"decode ({exc})") from None


class _Full(Exception):
    """The decoded body reached its room (raised from inside the zstd decoder)."""


class _Zstd:
    def __init__(self) -> None:
        assert zstandard is not None
        self.out = bytearray()
        self.room = 0
        # A sink with write() is all the decoder needs of its writer.
        self.inner = zstandard.ZstdDecompressor().stream_writer(
            self, write_size=ZSTD_PIECE)  # type: ignore[arg-type]

    def write(self, piece: bytes) -> int:
        """Take one piece the decoder wrote (the decoder's sink interface)."""
        self.out += piece[:max(0, self.room - len(self.out))]
        if len(self.out) >= self.room:
            raise _Full
        return len(piece)

    def decode(self, data: bytes, room: int) -> bytes:
        self.out, self.room = bytearray(), room
        try:
            self.inner.write(data)
        except _Full:
            pass
        except zstandard.ZstdError as exc:
            raise BodyDecodeError(f"the zstd body does not decode ({exc})") from None
        return bytes(self.out)


def _decoders(content_encoding: str) -> list[_Decoder]:
    """Return the decoders for a Content-Encoding header, in the order to apply them."""
    decoders: list[_Decoder] = []
    # Encodings are listed in the order they were applied: undo them last first.
    for name in reversed([n.strip().lower() for n in content_encoding.split(",")]):
        if name in ("", "identity"):
            continue
        if name in ("gzip", "x-gzip"):
            decoders.append(_Zlib(gzip=True))
        elif name == "deflate":
            decoders.append(_Zlib(gzip=False))
        elif name == "zstd" and zstandard is not None:
            decoders.append(_Zstd())
        else:
            raise BodyDecodeError(f"the body is in content encoding {name!r}, which kgcheck "
                                  f"does not read (it asks for {ACCEPT_ENCODING})")
    return decoders or [_Identity()]


class BodyDecoder:
    """Decode a body piece by piece, giving out no more than ``limit`` decoded bytes in all.

    ``feed`` returns the decoded bytes of one raw piece; once the body passes the limit,
    ``over`` is True and what is given out stops at the limit.
    """

    def __init__(self, content_encoding: str, limit: int) -> None:
        self.limit = limit
        self.decoders = _decoders(content_encoding)
        self.size = 0
        self.over = False

    def feed(self, raw: bytes) -> bytes:
        """Decode ``raw``; return its decoded bytes (cut where the limit is passed)."""
        if self.over:
            return b""
        # One byte more than the room tells a body that fits from one that does not.
        room = self.limit - self.size + 1
        piece = raw
        for decoder in self.decoders:
            piece = decoder.decode(piece, room)
        if self.size + len(piece) > self.limit:
            piece = piece[:self.limit - self.size]
            self.over = True
        self.size += len(piece)
        return piece


class CappedBody:
    """Collect a body from its raw bytes, decoded, keeping at most ``limit`` bytes.

    ``feed`` returns False once the limit is passed (``over`` is then True): stop reading.
    """

    def __init__(self, content_encoding: str, limit: int) -> None:
        self.decoder = BodyDecoder(content_encoding, limit)
        self.data = bytearray()

    @property
    def over(self) -> bool:
        """Whether the body passed the limit (then only its first ``limit`` bytes are kept)."""
        return self.decoder.over

    def feed(self, raw: bytes) -> bool:
        """Decode ``raw`` into the body; return whether there is room for more."""
        self.data += self.decoder.feed(raw)
        return not self.decoder.over

    def body(self) -> bytes:
        """Return the decoded body (its first ``limit`` bytes when it was over)."""
        return bytes(self.data)


def read_capped(response: httpx.Response, limit: int) -> CappedBody:
    """Read a streamed response's body decoded, stopping once it passes ``limit`` bytes."""
    body = CappedBody(response.headers.get("content-encoding", ""), limit)
    for raw in response.iter_raw():
        if not body.feed(raw):
            break
    return body


async def aread_capped(response: httpx.Response, limit: int) -> CappedBody:
    """Read a streamed response's body decoded, without blocking, up to ``limit`` bytes."""
    body = CappedBody(response.headers.get("content-encoding", ""), limit)
    async for raw in response.aiter_raw():
        if not body.feed(raw):
            break
    return body


class BodyTooLargeError(httpx.DecodingError):
    """A response whose decoded body passed the cap of a ``CappedTransport``."""


class _CappedStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response's raw stream, given out decoded and cut at the cap with an error."""

    def __init__(self, raw: Any, decoder: BodyDecoder, url: str) -> None:
        self.raw, self.decoder, self.url = raw, decoder, url

    def _piece(self, raw: bytes) -> bytes:
        piece = self.decoder.feed(raw)
        if self.decoder.over:
            raise BodyTooLargeError(f"{self.url} answered more than {self.decoder.limit:,} "
                                    "bytes (decoded); the answer was not read further")
        return piece

    def __iter__(self) -> Iterator[bytes]:
        for raw in self.raw:
            yield self._piece(raw)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for raw in self.raw:
            yield self._piece(raw)

    def close(self) -> None:
        """Close the raw stream."""
        self.raw.close()

    async def aclose(self) -> None:
        """Close the raw stream without blocking."""
        await self.raw.aclose()


class CappedTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Wrap an httpx transport: bodies come out decoded here, capped at ``limit`` bytes.

    For clients that read bodies themselves (SDKs): the response they see has no
    ``Content-Encoding`` left, and reading past the cap raises ``BodyTooLargeError``.
    """

    def __init__(self, inner: httpx.BaseTransport | httpx.AsyncBaseTransport,
                 limit: int) -> None:
        self.inner, self.limit = inner, limit

    def _decoded(self, request: httpx.Request, response: httpx.Response) -> httpx.Response:
        encoding = response.headers.get("content-encoding", "")
        try:
            decoder = BodyDecoder(encoding, self.limit)
        except BodyDecodeError as exc:
            raise httpx.DecodingError(f"{request.url}: {exc}", request=request) from None
        headers = [(key, value) for key, value in response.headers.raw
                   if key.lower() not in (b"content-encoding", b"content-length")]
        return httpx.Response(response.status_code, headers=headers,
                              stream=_CappedStream(response.stream, decoder, str(request.url)),
                              extensions=response.extensions, request=request)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send a request through the inner transport; decode and cap its body."""
        assert isinstance(self.inner, httpx.BaseTransport)
        return self._decoded(request, self.inner.handle_request(request))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send a request without blocking; decode and cap its body."""
        assert isinstance(self.inner, httpx.AsyncBaseTransport)
        return self._decoded(request, await self.inner.handle_async_request(request))

    def close(self) -> None:
        """Close the inner transport."""
        if isinstance(self.inner, httpx.BaseTransport):
            self.inner.close()

    async def aclose(self) -> None:
        """Close the inner transport without blocking."""
        if isinstance(self.inner, httpx.AsyncBaseTransport):
            await self.inner.aclose()
