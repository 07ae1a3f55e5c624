"""Where a file's lines of some kind are, with a key each, in bounded memory.

A raw-line sampler notes each naming line of a file as it counts the facts (its offset and
a hash of its subject) to name the chosen facts afterwards without reading the file again.
A dump of a hundred million triples has millions of naming lines (16 bytes each): past
``MEMORY_PAIRS`` the pairs go on to an anonymous temporary file (gone with the process,
whatever ends it), and they are read back in pieces of that size, in the order noted.
"""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Iterator
from typing import IO

import numpy as np

__all__ = ["MEMORY_PAIRS", "OffsetSpill"]

# Pairs kept in memory (1 MB) before they go on to disk, and read back at once.
MEMORY_PAIRS = 1 << 16


class OffsetSpill:
    """An append-only list of (offset, key) pairs of int64, in memory up to a cap."""

    def __init__(self, memory_pairs: int | None = None) -> None:
        self.cap = max(1, memory_pairs or MEMORY_PAIRS)
        self._memory = array("q")  # offset, key, offset, key, ...
        self._file: IO[bytes] | None = None
        self.spilled = 0  # pairs on disk

    def __len__(self) -> int:
        return self.spilled + len(self._memory) // 2

    def add(self, offset: int, key: int) -> None:
        """Note one pair."""
        self.extend([(offset, key)])

    def extend(self, pairs: list[tuple[int, int]], base: int = 0) -> None:
        """Note pairs at once, each offset ``base`` on (a block's lines, from its start)."""
        if not pairs:
            return
        found = np.array(pairs, dtype=np.int64)
        found[:, 0] += base
        self._memory.frombytes(found.tobytes())
        if len(self._memory) >= 2 * self.cap:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="kgcheck-offsets-")
            self._file.write(self._memory.tobytes())
            self.spilled += len(self._memory) // 2
            self._memory = array("q")

    def pieces(self) -> Iterator[np.ndarray]:
        """Yield the pairs in the order noted, as arrays of shape (n, 2), at most a cap each."""
        if self._file is not None:
            self._file.flush()
            self._file.seek(0)
            left = self.spilled
            while left:
                count = min(left, self.cap)
                data = self._file.read(count * 16)
                yield np.frombuffer(data, dtype=np.int64).reshape(-1, 2)
                left -= count
            self._file.seek(0, 2)  # more pairs may follow
        if self._memory:
            yield np.frombuffer(self._memory, dtype=np.int64).reshape(-1, 2).copy()

    def close(self) -> None:
        """Forget the pairs (and remove their file)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._memory = array("q")
        self.spilled = 0
