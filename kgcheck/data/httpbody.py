"""Read an HTTP response body decoded and capped: the one way kgcheck's clients read bodies.

Servers compress what they send (``Content-Encoding: gzip``, ``deflate``, ``zstd``), and a
small compressed body can stand for a huge one: a 300 KB gzip body can decode to 300 MB.
``CappedBody`` takes the raw bytes as they arrive (httpx's ``aiter_raw``/``iter_raw``),
decodes them step by step and never holds more than ``limit`` decoded bytes: each decoder
is asked for no more output than the room left (zlib's ``max_length``; zstd writes in
64 KiB pieces), so a bomb costs the cap, not its decoded size. ``ACCEPT_ENCODING`` is what
clients should ask for: the encodings decoded here (Brotli is not: no bounded decoder is
installed for it).
"""

from __future__ import annotations

import zlib
from typing import Protocol

import httpx

__all__ = ["ACCEPT_ENCODING", "BodyDecodeError", "CappedBody", "aread_capped", "read_capped"]

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


class CappedBody:
    """Collect a body from its raw bytes, decoded, keeping at most ``limit`` bytes.

    ``feed`` returns False once the limit is passed (``over`` is then True): stop reading.
    """

    def __init__(self, content_encoding: str, limit: int) -> None:
        self.limit = limit
        self.decoders = _decoders(content_encoding)
        self.data = bytearray()
        self.over = False

    def feed(self, raw: bytes) -> bool:
        """Decode ``raw`` into the body; return whether there is room for more."""
        if self.over:
            return False
        # One byte more than the room tells a body that fits from one that does not.
        room = self.limit - len(self.data) + 1
        piece = raw
        for decoder in self.decoders:
            piece = decoder.decode(piece, room)
        self.data += piece
        if len(self.data) > self.limit:
            del self.data[self.limit:]
            self.over = True
        return not self.over

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
