"""Whole-block byte work: offsets of a byte, line starts and stops, and hashes of spans."""

from __future__ import annotations

import random

import numpy as np
import pytest

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
