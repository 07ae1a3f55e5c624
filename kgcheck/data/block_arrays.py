"""Whole-block byte work with numpy: where a byte occurs in a block, and 8-byte hashes of spans.

The raw-line samplers (``kgcheck.data.record_lines``, ``kgcheck.data.line_blocks``) find a
block's line ends, delimiters and quotes once each, as arrays of offsets, instead of a step
per line; a fact id is kept as an 8-byte hash of its bytes, computed for all the ids of a
block at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

# A span longer than this is hashed on its own (hashlib), so that one huge id does not
# make a pass per 8 bytes over all of a block's ids.
LONG_SPAN = 256
# Bytes of a block compared with a byte at once (``_byte_offsets``).
_PIECE = 1 << 20
_WORD = 8
_SEED = np.uint64(0x9E3779B97F4A7C15)
# The low k bytes of a little-endian word, for k from 0 to 8.
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(_WORD + 1)], dtype=np.uint64)


class BlockArrays:
    """A block of lines as an array of bytes, with the offsets of a byte found once each."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.array = np.frombuffer(data, dtype=np.uint8)
        self._offsets: dict[int, np.ndarray] = {}

    def offsets(self, byte: int) -> np.ndarray:
        """Return the offsets of a byte in the block, ascending."""
        if (found := self._offsets.get(byte)) is None:
            found = self._offsets[byte] = _byte_offsets(self.array, byte)
        return found

    @property
    def line_ends(self) -> np.ndarray:
        """The offsets of the block's line ends (newline bytes)."""
        return self.offsets(0x0A)

    @property
    def lines(self) -> int:
        """How many lines the block holds (the last may lack its line end)."""
        return len(self.line_ends) + (not self.data.endswith(b"\n"))

    def line_starts(self) -> np.ndarray:
        """Return the offset where each line starts."""
        ends = self.line_ends
        starts = np.empty(self.lines, dtype=np.int64)
        starts[0] = 0
        starts[1:] = ends[: self.lines - 1] + 1
        return starts

    def line_stops(self) -> np.ndarray:
        """Return the offset where each line stops (its line end, or the block's end)."""
        ends = self.line_ends
        if len(ends) == self.lines:
            return ends
        return np.append(ends, len(self.data))


def _byte_offsets(data: np.ndarray, byte: int) -> np.ndarray:
    """Return the offsets of ``byte`` in ``data``, ascending, a piece of it at a time.

    One comparison over a whole block would make a mask as large as the block (8 MB) at
    once; pieces of ``_PIECE`` bytes keep that mask small (and in cache): each piece is
    compared twice, to size the result and to fill it.
    """
    pieces = range(0, len(data), _PIECE)
    counts = [int(np.count_nonzero(data[at:at + _PIECE] == byte)) for at in pieces]
    found = np.empty(sum(counts), dtype=np.int64)
    filled = 0
    for at, count in zip(pieces, counts, strict=True):
        if count:
            np.add(np.flatnonzero(data[at:at + _PIECE] == byte), at,
                   out=found[filled:filled + count])
            filled += count
    return found


def _mix(h: np.ndarray) -> np.ndarray:
    """Scramble 64-bit words in place (MurmurHash3's finalizer: a bijection)."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


def _words(data: bytes) -> Callable[[np.ndarray], np.ndarray]:
    """Return a function giving the 8 bytes at each offset of ``data`` as a little-endian word.

    Words are read in place (unaligned views of ``data``, no copy of the block); the last
    seven offsets, whose words run off the end, are read from a zero-padded copy of the tail.
    """
    inside = max(len(data) - _WORD + 1, 0)  # the offsets whose whole word is in ``data``
    body = np.ndarray(shape=(inside,), dtype="<u8", buffer=data, strides=(1,))
    tail_start = max(len(data) - _WORD, 0)
    tail = data[tail_start:] + bytes(_WORD)
    tail_words = np.ndarray(shape=(len(tail) - _WORD + 1,), dtype="<u8", buffer=tail,
                            strides=(1,))

    def words(at: np.ndarray) -> np.ndarray:
        near_end = at >= inside
        if not near_end.any():
            return body[at]
        found = np.empty(len(at), dtype=np.uint64)
        found[~near_end] = body[at[~near_end]]
        found[near_end] = tail_words[at[near_end] - tail_start]
        return found

    return words


def span_hashes(data: bytes, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Return a 64-bit hash (int64) of ``data[start:stop]`` for each span.

    Equal bytes give equal hashes wherever they are; two spans of at most 8 bytes and of
    the same length never share a hash.
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(stops, dtype=np.int64) - starts
    hashes = lengths.astype(np.uint64) * _SEED
    if len(starts) == 0:
        return hashes.view(np.int64)
    words_at = _words(data)
    index = np.flatnonzero(lengths <= LONG_SPAN)
    at, left, mixed = starts[index], lengths[index], hashes[index]
    while len(index):
        # The bytes past the span's end are not its own: keep its remaining 0 to 8.
        mixed ^= words_at(at) & _MASKS[np.minimum(left, _WORD)]
        _mix(mixed)
        # Only the spans still longer go on to their next word.
        more = left > _WORD
        if more.all():
            at, left = at + _WORD, left - _WORD
            continue
        hashes[index] = mixed
        index, at, left, mixed = index[more], at[more] + _WORD, left[more] - _WORD, mixed[more]
    for long in np.flatnonzero(lengths > LONG_SPAN):
        span = data[starts[long]:starts[long] + lengths[long]]
        hashes[long] = int.from_bytes(hashlib.blake2b(span, digest_size=8).digest(), "little")
    return hashes.view(np.int64)


def bytes_hashes(items: Sequence[bytes]) -> np.ndarray:
    """Return ``span_hashes`` of each of these byte strings (the same hash as in a block)."""
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    stops = np.cumsum(lengths)
    return span_hashes(b"".join(items), stops - lengths, stops)


__all__ = ["BlockArrays", "bytes_hashes", "span_hashes"]
