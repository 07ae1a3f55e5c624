"""Whole-block byte work: offsets of a byte, line starts and stops, and hashes of spans."""

from __future__ import annotations

import random

import numpy as np
import pytest

import kgcheck.data.block_arrays as block_arrays
from kgcheck.data.block_arrays import LONG_SPAN, BlockArrays, bytes_hashes, span_hashes


@pytest.mark.parametrize("data", [b"a,b\nc\n", b"a,b\nc", b"\n\n", b"x", b"\r\n,\n"])
def test_lines_as_the_bytes_split_them(data: bytes) -> None:
    arrays = BlockArrays(data)
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()
    assert arrays.lines == len(lines)
    assert [data[a:b] for a, b in zip(arrays.line_starts(), arrays.line_stops(), strict=True)] == lines
    assert arrays.offsets(ord(",")).tolist() == [i for i, b in enumerate(data) if b == ord(",")]


def test_offsets_found_piece_by_piece_are_all_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pieces of 4 bytes: the byte at every piece's first and last offset, and pieces without it.
    monkeypatch.setattr(block_arrays, "_PIECE", 4)
    rng = random.Random(1)
    for length in [0, 1, 3, 4, 5, 8, 9, 31, 64]:
        data = bytes(rng.choice(b",,ab\n") for _ in range(length))
        for byte in b",\n":
            assert BlockArrays(data).offsets(byte).tolist() == [
                i for i, b in enumerate(data) if b == byte]
    assert BlockArrays(b"abcd" * 3 + b",").offsets(ord(",")).tolist() == [12]


def test_spans_at_a_blocks_end_hash_as_anywhere_else() -> None:
    # A span's last word runs past the block's end there: only the span's own bytes count.
    rng = random.Random(2)
    for length in range(0, 21):
        data = bytes(rng.randrange(256) for _ in range(length))
        spans = [(a, b) for a in range(length + 1) for b in range(a, length + 1)]
        starts = np.array([a for a, _ in spans], dtype=np.int64)
        stops = np.array([b for _, b in spans], dtype=np.int64)
        assert span_hashes(data, starts, stops).tolist() == bytes_hashes(
            [data[a:b] for a, b in spans]).tolist()
        inside = data + b"\xff" * 9  # the same spans, other bytes after them
        assert span_hashes(inside, starts, stops).tolist() == span_hashes(
            data, starts, stops).tolist()


def test_equal_bytes_hash_alike_wherever_they_are() -> None:
    rng = random.Random(0)
    lengths = [0, 1, 3, 7, 8, 9, 15, 16, 17, 40, LONG_SPAN, LONG_SPAN + 1, 1000]
    items = [bytes(rng.randrange(1, 256) for _ in range(rng.choice(lengths))) for _ in range(2000)]
    items += [b"f1", b"f1", b"f1\x00"[:2], b"1f", b"a" * 9, b"a" * 10]
    hashes = bytes_hashes(items)
    # The same spans inside other bytes (another offset, other bytes after them).
    data, starts = b"", []
    for item in items:
        data += bytes([rng.randrange(256)]) * rng.randrange(1, 12)
        starts.append(len(data))
        data += item
    starts_array = np.array(starts)
    stops = starts_array + [len(item) for item in items]
    assert span_hashes(data, starts_array, stops).tolist() == hashes.tolist()
    assert [bytes_hashes([item])[0] for item in items[:50]] == hashes[:50].tolist()
    by_hash: dict[int, set[bytes]] = {}
    for item, value in zip(items, hashes.tolist(), strict=True):
        by_hash.setdefault(value, set()).add(item)
    assert all(len(same) == 1 for same in by_hash.values())
    assert len(by_hash) == len(set(items))


def test_short_spans_of_one_length_never_share_a_hash() -> None:
    # Every two-byte string, and every eight-byte one with six given bytes.
    data = bytes(byte for a in range(256) for c in range(256) for byte in (a, c))
    starts = np.arange(0, len(data), 2)
    assert len(np.unique(span_hashes(data, starts, starts + 2))) == 256 * 256
    words = b"".join(b"kg" + bytes([a, c]) + b"fact" for a in range(256) for c in range(256))
    starts = np.arange(0, len(words), 8)
    assert len(np.unique(span_hashes(words, starts, starts + 8))) == 256 * 256
    assert bytes_hashes([]).tolist() == []
