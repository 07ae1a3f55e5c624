"""Read a file of one record per line in large blocks, and find its records again by index.

The raw-line sampler (``kgcheck.data.record_lines``, for JSON Lines, CSV and TSV) counts a
file's records block by block with byte searches, keeping per block only its line count and
the lines that hold no record (``LineIndex``); a second read picks the chosen records by
their index.
"""

from __future__ import annotations

import io
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

import numpy as np

from kgcheck.data.input_limits import LINE_BYTES
from kgcheck.data.sources import TriplesError, open_binary

# Large enough that a block's byte searches and arrays cost little per line, small enough
# that the few blocks and arrays alive at once stay out of the allocator's growing heap
# (measured: 8 MB blocks left a CSV sample's peak RSS 10 to 16 MB higher, and growing with
# the file, for the same CPU).
BLOCK_BYTES = 2 * 1024 * 1024

# A line of a file: its number (from 1) and its bytes, without the line end.
Line = tuple[int, bytes]


class _LineTooLong(Exception):
    """The line a block's cut falls in runs past the cap; ``before``: the block's lines before."""

    def __init__(self, before: int) -> None:
        super().__init__(before)
        self.before = before


def file_blocks(path: Path, block_bytes: int = BLOCK_BYTES,
                max_line: int | None = None) -> Iterator[bytes]:
    """Yield a file in blocks of about ``block_bytes``, each cut at a line end.

    With ``max_line``, the line a cut falls in is read at most that far past the cut: a
    longer one raises TriplesError naming the file and the line, never held whole (a
    block holds at most ``block_bytes + max_line`` bytes).
    """
    number = 0  # the lines before the block, to name a line too long
    try:
        with open_binary(path) as fh:
            exact = isinstance(fh, io.BufferedReader)  # a plain file, cheap to seek in
            while block := (_read_to_line_end(fh, block_bytes, max_line) if exact
                            else fh.read(block_bytes)):
                if not block.endswith(b"\n"):
                    try:  # to the end of the line the cut fell in
                        block += _rest_of_line(fh, max_line)
                    except _LineTooLong:
                        raise _LineTooLong(block.count(b"\n")) from None
                if max_line is not None:
                    number += block.count(b"\n")
                yield block
    except _LineTooLong as exc:
        raise TriplesError(f"{path}, line {number + exc.before + 1}: longer than "
                           f"{max_line:,} bytes; a line holds one record "
                           f"({LINE_BYTES.hint()})") from None
    except (OSError, EOFError) as exc:
        raise TriplesError(f"{path}: cannot be read ({exc})") from None


def _rest_of_line(fh: IO[bytes], max_line: int | None) -> bytes:
    """Read to the end of the current line, at most ``max_line`` bytes (None: no cap)."""
    if max_line is None:
        return fh.readline()
    rest = fh.readline(max_line + 1)
    if len(rest) > max_line and not rest.endswith(b"\n"):
        raise _LineTooLong(0)
    return rest


def _read_to_line_end(fh: IO[bytes], block_bytes: int, max_line: int | None = None) -> bytes:
    """Read about ``block_bytes`` of a plain file, to the end of the line the cut falls in.

    The cut's line is found first (a seek past the block, one line read, a seek back), so
    the block is read as one object of its final size: appending the rest of the line to
    a block already read would copy the whole block (8 MB more at the peak).
    """
    start = fh.tell()
    # From the block's last byte: a block already ending with a line end takes no more.
    fh.seek(start + block_bytes - 1)
    try:
        rest = max(len(_rest_of_line(fh, max_line)) - 1, 0)
    except _LineTooLong:
        fh.seek(start)
        raise _LineTooLong(fh.read(block_bytes).count(b"\n")) from None
    fh.seek(start)
    return fh.read(block_bytes + rest)


def file_lines(path: Path, block_bytes: int = BLOCK_BYTES) -> Iterator[Line]:
    """Yield every line of a file with its number (without its line end)."""
    number = 0
    for block in file_blocks(path, block_bytes):
        lines = block.split(b"\n")
        if not lines[-1]:
            lines.pop()
        for line in lines:
            number += 1
            yield number, line


def line_count(block: bytes) -> int:
    """Return how many lines a block holds (the last may lack its line end)."""
    return block.count(b"\n") + (not block.endswith(b"\n"))


def line_at(block: bytes, start: int) -> bytes:
    """Return the line of a block that starts at ``start``, without its line end."""
    end = block.find(b"\n", start)
    return block[start:] if end < 0 else block[start:end]


def line_indices(block: bytes, starts: Iterable[int]) -> array[int]:
    """Turn the start offsets of some lines of a block into their indices in it (ascending)."""
    indices, counted, line = array("I"), 0, 0
    for start in sorted(starts):
        line += block.count(b"\n", counted, start)
        counted = start
        indices.append(line)
    return indices


class LineIndex:
    """Where a file's records are, from one pass: per block, its lines less those holding none.

    Keeps a block's line count and the indices of its lines that hold no record (4 bytes
    each: blank lines, comments, names, a header), so that the records at given indices
    are found again by reading the blocks once more.
    """

    def __init__(self) -> None:
        self.lines: list[int] = []
        self.skipped: list[array[int]] = []

    def add(self, lines: int, skipped: array[int]) -> None:
        """Count the next block, of ``lines`` lines, those at ``skipped`` holding no record."""
        self.lines.append(lines)
        self.skipped.append(skipped)

    @property
    def records(self) -> int:
        """How many records the blocks counted so far hold."""
        return sum(self.lines) - sum(map(len, self.skipped))

    def pick(self, blocks: Iterable[bytes], indices: Sequence[int]) -> list[tuple[int, Line]]:
        """Return ``(index, (line number, line))`` for the records at these (ascending) indices.

        ``blocks`` are the blocks counted, read again; only the line ends of those holding a
        chosen record are found (with numpy, not a bytes object per line).
        """
        picked: list[tuple[int, Line]] = []
        wanted = list(indices)
        at = first_record = first_line = 0
        for block, count, skipped in zip(blocks, self.lines, self.skipped, strict=False):
            if at == len(wanted):
                break
            records = count - len(skipped)
            upto = at
            while upto < len(wanted) and wanted[upto] < first_record + records:
                upto += 1
            if upto > at:
                inside = [index - first_record for index in wanted[at:upto]]
                found = block_records_at(block, first_line, skipped, inside)
                picked += zip(wanted[at:upto], found, strict=True)
                at = upto
            first_record += records
            first_line += count
        return picked


def block_records_at(block: bytes, first_line: int, skipped: Sequence[int],
                     records: Sequence[int], ends: np.ndarray | None = None) -> list[Line]:
    """Return ``(line number, line)`` for the records at these (ascending) indices of a block.

    ``first_line`` lines come before the block; the lines at ``skipped`` hold no record;
    ``ends`` are the offsets of its line ends, when already found.
    """
    if ends is None:
        ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 0x0A)
    found: list[Line] = []
    passed = 0
    for record in records:
        line = record + passed
        while passed < len(skipped) and skipped[passed] <= line:
            passed += 1
            line = record + passed
        start = int(ends[line - 1]) + 1 if line else 0
        stop = int(ends[line]) if line < len(ends) else len(block)
        found.append((first_line + line + 1, block[start:stop]))
    return found


def kept_lines(lines: dict[int, Line], kept: Sequence[int], first: int, block: bytes,
               first_line: int, skipped: Sequence[int], ends: np.ndarray | None = None
               ) -> dict[int, Line]:
    """Return ``lines`` with the block's records a reservoir newly keeps, by their index.

    The block's first record is record ``first``; ``kept`` are the indices the reservoir
    keeps after the block. Lines it no longer keeps are dropped once they are as many.
    """
    if new := sorted(index for index in kept if index >= first):
        found = block_records_at(block, first_line, skipped, [i - first for i in new], ends)
        lines.update(zip(new, found, strict=True))
        if len(lines) > 2 * len(kept):
            lines = {index: lines[index] for index in kept}
    return lines


__all__ = ["BLOCK_BYTES", "Line", "LineIndex", "block_records_at", "file_blocks", "file_lines",
           "kept_lines", "line_at", "line_count", "line_indices"]
