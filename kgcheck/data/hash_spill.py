"""The 8-byte hashes of a stream's fact ids in bounded memory: which occur more than once.

Refusing a repeated fact id without holding the ids takes one hash per fact, and a file of
a billion facts would hold 8 GB of them. ``HashSpill`` keeps up to ``MEMORY_HASHES`` in one
array; past that it sorts the array in place, appends it to one spill file in a temporary
folder as a run (one write; where each of the ``PARTITIONS`` ranges of the hashes' top bits
lies in it is kept), and starts the array anew. At the end each partition is checked on
its own (its pieces read from every run, sorted, compared with their neighbours): memory
is bounded by the array while the hashes come, and by one partition (up to
``CHECKED_CAPS`` arrays) while they are checked; a larger partition is split again by its
next bits. Disk holds 8 bytes per hash beyond the cap while the check lasts; the folder
goes when the set is closed (``with``, or once garbage), whatever ends the run. A stream
within the cap touches no disk and is one in-place sort.
"""

from __future__ import annotations

import mmap
import shutil
import tempfile
import weakref
from array import array
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import numpy as np

__all__ = ["CHECKED_CAPS", "MEMORY_HASHES", "PARTITIONS", "HashSpill", "repeated_hashes"]

# Hashes kept in memory (1 MB) before they are spilled: 8 MB of them made the peak RSS of a
# sample grow by 7 MB up to a million ids; 1 MB costs one spill per 131,072 ids.
MEMORY_HASHES = 1 << 17
# A partition file of up to this many caps is checked whole (8 MB by default: read once
# the pass that added the hashes is over, its blocks freed).
CHECKED_CAPS = 8
# Partition files, by the top 8 bits: each is checked whole up to 256 * 8 times the cap
# (268 million hashes); a larger one is split by the next 8 bits when it is checked.
PARTITION_BITS = 8
PARTITIONS = 1 << PARTITION_BITS
_HASH_BITS = 64
_HASH_BYTES = 8


def repeated_hashes(hashes: array[int] | np.ndarray, *, in_place: bool = False) -> frozenset[int]:
    """Return the hashes that occur more than once (candidates for repeated ids), in memory.

    ``in_place`` sorts ``hashes`` itself rather than a copy (8 bytes a hash less), for a
    caller that needs them no more.
    """
    values = np.frombuffer(hashes, dtype=np.int64) if isinstance(hashes, array) else hashes
    return frozenset(_sorted_repeats(values if in_place else values.copy()).tolist())


def _sorted_repeats(values: np.ndarray) -> np.ndarray:
    """Sort ``values`` in place; return those that occur more than once, once each."""
    if len(values) < 2:
        return values[:0]
    values.sort()
    twice = values[1:][values[1:] == values[:-1]]
    if not len(twice):  # the common case, without np.unique (whose first call imports numpy.ma)
        return twice
    return np.unique(twice)


def _remove_spill(file: BinaryIO, folder: Path) -> None:
    """Close the spill file and remove its folder."""
    file.close()
    shutil.rmtree(folder, ignore_errors=True)


def _anonymous_array(length: int) -> np.ndarray:
    """Return an int64 array of its own memory map, outside the allocator's heap.

    Its pages are taken as it fills (a small file costs a small array), and it leaves no
    hole in the heap for the blocks' arrays to fragment around (measured: 7 MB less peak
    RSS at a million hashes than ``np.empty``).
    """
    return np.frombuffer(mmap.mmap(-1, length * _HASH_BYTES), dtype=np.int64)


class HashSpill:
    """A multiset of 64-bit hashes that tells which occur more than once (see the module).

    Args:
        memory_hashes: How many hashes stay in memory before they spill
            (``MEMORY_HASHES``; tests give a few).
        level: Which 8 bits choose a hash's partition (0: the top ones); a partition split
            again is a ``HashSpill`` one level down, in its parent's folder.
        folder: Where the temporary folder goes (the system's temporary folder).

    ``repeated`` and ``any_repeated`` end it: one of them, once.

    """

    def __init__(self, memory_hashes: int | None = None, *, level: int = 0,
                 folder: Path | None = None) -> None:
        self.cap = max(1, memory_hashes or MEMORY_HASHES)
        self.level = level
        self.spilled = 0  # hashes in the partition files
        self._parent = folder
        self._buffer: np.ndarray | None = None  # allocated at the first add, filled in order
        self._size = 0
        self._folder: Path | None = None
        self._file: BinaryIO | None = None  # the spill file: the sorted runs, one after another
        self._runs: list[tuple[int, np.ndarray]] = []  # each run's first hash, partitions' bounds
        self._remove: weakref.finalize[Any, Any] | None = None

    def __len__(self) -> int:
        return self.spilled + self._size

    def __enter__(self) -> HashSpill:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def add(self, hashes: np.ndarray | array[int]) -> None:
        """Add hashes (int64, or an ``array('q')``)."""
        values = np.frombuffer(hashes, dtype=np.int64) if isinstance(hashes, array) else hashes
        while len(values):
            if self._buffer is None:
                self._buffer = _anonymous_array(self.cap)
            elif self._size == self.cap:
                self._spill()
            taken = min(len(values), self.cap - self._size)
            self._buffer[self._size:self._size + taken] = values[:taken]
            self._size += taken
            values = values[taken:]

    def repeated(self) -> frozenset[int]:
        """Return the hashes added more than once; exactly what ``repeated_hashes`` gives."""
        try:
            return frozenset(h for found in self._repeats() for h in found.tolist())
        finally:
            self.close()

    def any_repeated(self) -> bool:
        """Whether a hash was added more than once (stops at the first partition with one)."""
        try:
            return any(len(found) for found in self._repeats())
        finally:
            self.close()

    def close(self) -> None:
        """Remove the spill file and free the array."""
        self._buffer = None
        self._size = self.spilled = 0
        if self._remove is not None:
            self._remove()
            self._remove = self._folder = self._file = None
        self._runs = []

    def _spill(self) -> None:
        """Sort the array in place and append it to the spill file as one run.

        A run is one write, and where each partition's hashes lie in it is kept (257
        offsets a run): opening a file per partition per spill cost more than the sort.
        """
        assert self._buffer is not None
        if self._file is None:
            self._folder = Path(tempfile.mkdtemp(prefix="kgcheck-hashes-", dir=self._parent))
            self._file = (self._folder / "runs").open("w+b")
            # Removed even if the set is never closed (dropped, or at the interpreter's exit).
            self._remove = weakref.finalize(self, _remove_spill, self._file, self._folder)
        values = self._buffer[:self._size]
        values.sort()
        bounds = np.searchsorted(values, self._thresholds(int(values[0])))
        self._runs.append((self._file.tell() // _HASH_BYTES,
                           np.concatenate([[0], bounds, [len(values)]]).astype(np.int64)))
        self._file.write(values.data)
        self.spilled += self._size
        self._size = 0

    def _thresholds(self, member: int) -> np.ndarray:
        """Return the smallest hash of each partition but the first, at this level.

        ``member`` is any hash added (below the top level, all share their higher bits).
        """
        shift = _HASH_BITS - PARTITION_BITS * (self.level + 1)
        if self.level == 0:
            base = -(1 << (_HASH_BITS - 1))
        else:  # the partition being split: its hashes' common higher bits
            base = (member >> (shift + PARTITION_BITS)) << (shift + PARTITION_BITS)
        return np.array([base + (k << shift) for k in range(1, PARTITIONS)], dtype=np.int64)

    def _repeats(self) -> Iterator[np.ndarray]:
        """Yield the repeated hashes, a partition's at a time (each sorted, once each)."""
        if self._file is None:
            if self._buffer is not None:
                yield _sorted_repeats(self._buffer[:self._size])
            return
        if self._size:
            self._spill()
        self._buffer = None  # from here one partition at a time is in memory
        self._file.flush()
        for part in range(PARTITIONS):
            if count := sum(int(bounds[part + 1] - bounds[part]) for _at, bounds in self._runs):
                yield from self._partition_repeats(part, count)

    def _partition_pieces(self, part: int) -> Iterator[np.ndarray]:
        """Yield a partition's hashes, one run's at a time (each within the cap)."""
        assert self._file is not None
        for at, bounds in self._runs:
            if count := int(bounds[part + 1] - bounds[part]):
                self._file.seek((at + int(bounds[part])) * _HASH_BYTES)
                yield np.frombuffer(self._file.read(count * _HASH_BYTES), dtype=np.int64)

    def _partition_repeats(self, part: int, count: int) -> Iterator[np.ndarray]:
        if count <= self.cap * CHECKED_CAPS:
            whole = np.empty(count, dtype=np.int64)
            filled = 0
            for piece in self._partition_pieces(part):
                whole[filled:filled + len(piece)] = piece
                filled += len(piece)
            yield _sorted_repeats(whole)
        elif PARTITION_BITS * (self.level + 1) >= _HASH_BITS:
            # Every bit was a partition's: the partition holds one hash, more than once.
            yield next(self._partition_pieces(part))[:1]
        else:
            # Split by the next bits: memory stays within two caps (a run's piece, the array).
            with HashSpill(self.cap, level=self.level + 1, folder=self._folder) as split:
                for piece in self._partition_pieces(part):
                    split.add(piece)
                yield from split._repeats()
