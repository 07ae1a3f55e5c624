"""Offsets with a key each, in bounded memory: on disk past the cap, read back in order."""

from __future__ import annotations

import numpy as np
import pytest

from kgcheck.data.offset_spill import OffsetSpill


@pytest.mark.parametrize("cap, count", [(1, 0), (1, 5), (4, 4), (4, 9), (1000, 300)])
def test_pairs_come_back_in_the_order_noted(cap: int, count: int) -> None:
    spill = OffsetSpill(cap)
    pairs = [(10 * n, -(n**3)) for n in range(count)]
    for offset, key in pairs[: count // 2]:
        spill.add(offset, key)
    # Read while more are to come: the pairs so far, and afterwards all of them.
    assert [tuple(p) for piece in spill.pieces() for p in piece.tolist()] == pairs[: count // 2]
    for offset, key in pairs[count // 2:]:
        spill.add(offset, key)
    pieces = list(spill.pieces())
    assert all(len(piece) <= cap for piece in pieces)
    assert [tuple(p) for piece in pieces for p in piece.tolist()] == pairs
    # Each time the cap is reached, the pairs in memory go to disk.
    assert len(spill) == count and spill.spilled == count // cap * cap
    spill.close()
    assert len(spill) == 0 and list(spill.pieces()) == []


def test_a_piece_is_an_array_of_its_own() -> None:
    spill = OffsetSpill(8)
    spill.add(1, 2)
    (piece,) = spill.pieces()
    spill.add(3, 4)  # the memory it came from grows: the piece stays as it was
    assert piece.tolist() == [[1, 2]] and np.asarray(piece).dtype == np.int64
