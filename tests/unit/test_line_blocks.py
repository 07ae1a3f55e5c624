"""A file read in blocks: each ends at a line end, together they are the file, gzip alike."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from kgcheck.data.line_blocks import file_blocks, file_lines


def _text(rng: random.Random) -> bytes:
    lines = b"".join(b"x" * rng.randrange(0, 12) + b"\n" for _ in range(rng.randrange(0, 30)))
    return lines + (b"no line end" if rng.random() < 0.3 else b"")


@pytest.mark.parametrize("block_bytes", [1, 2, 5, 16, 1000])
def test_blocks_end_at_line_ends_and_make_the_file(tmp_path: Path, block_bytes: int) -> None:
    rng = random.Random(block_bytes)
    plain, packed = tmp_path / "lines.txt", tmp_path / "lines.txt.gz"
    for _ in range(50):
        text = _text(rng)
        plain.write_bytes(text)
        packed.write_bytes(gzip.compress(text))
        blocks = list(file_blocks(plain, block_bytes))
        assert b"".join(blocks) == text
        assert all(block.endswith(b"\n") for block in blocks[:-1])
        # A block is cut at the first line end from its size on: no sooner, no later.
        assert all(len(block) >= block_bytes and b"\n" not in block[block_bytes - 1:-1]
                   for block in blocks[:-1])
        # The plain file (read to the cut's line end first) and the gzip stream cut alike.
        assert list(file_blocks(packed, block_bytes)) == blocks
        assert [line for _n, line in file_lines(plain, block_bytes)] == text.splitlines()


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    from kgcheck.data.sources import TriplesError

    with pytest.raises(TriplesError, match="missing.nt: cannot be read"):
        list(file_blocks(tmp_path / "missing.nt"))
