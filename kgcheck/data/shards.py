"""Read a large triples file in parallel shards: byte ranges cut at line ends.

N-Triples, N-Quads and JSON Lines hold one record per line, so a file cut at line ends
reads, shard by shard, into the same facts in the same order as one pass does. The shards
are parsed in parallel by a ``ShardMap`` (the Ray engine's workers: ``RayEngine.map_shards``;
``map_in_process`` here) and merged in file order, where what spans shards is settled: ids
unique over the file (JSON Lines), a triple in two named graphs kept once (N-Quads), and
the best name of each term (RDF). Each shard carries its bytes, so workers need not see the
file. Compressed files cannot be cut; they, and files of one shard, are read in one pass.

An engine that checks whole shards on its workers (the Ray engine's sharded pipeline) plans
the shards instead (``plan_shards``: byte ranges, no bytes kept) and offers a ``survey``
(``kgcheck.data.shard_survey``): the workers then read their own shards (``shard_bytes``).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgcheck.data.facts import Fact
from kgcheck.data.input_uri import is_input_uri, read_range, seek_ranges, stat_input
from kgcheck.data.rdf import (
    FORMATS,
    QUAD_FORMATS,
    NameEntry,
    Names,
    RdfReader,
    TripleRow,
    distinct_triples,
    is_name_triple,
    rdf_terms,
    row_fact,
    triple_row,
)
from kgcheck.data.triples import jsonl_facts, unique_ids

SHARDABLE = (".nt", ".nq", ".jsonl", ".ndjson")
DEFAULT_SHARD_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class Shard:
    """One byte range of a file, starting at the start of line ``first_line``."""

    path: str
    dataset: str
    start: int
    end: int
    first_line: int

    @property
    def suffix(self) -> str:
        """The file's format, by extension."""
        return Path(self.path).suffix.lower()


@dataclass
class ShardFacts:
    """A shard's facts in file order, and (RDF) the names its triples give to terms.

    RDF facts travel as rows of strings (``rows``), a third the bytes of pickled facts and
    unpickled some 20 times faster; the merge builds the facts from them.
    """

    facts: list[Fact] = field(default_factory=list)
    rows: list[TripleRow] = field(default_factory=list)
    names: dict[str, NameEntry] = field(default_factory=dict)
    names_overflowed: bool = False


# Parse shards (with their bytes, taken from the iterable as needed, so that few are in
# memory at once) in parallel; yield their facts in the shards' order.
ShardMap = Callable[[Iterable[tuple[Shard, bytes]]], Iterator[ShardFacts]]
# Block size in which the driver reads a file to plan its shards (nothing else is kept).
PLAN_BLOCK = 1024 * 1024


@dataclass(frozen=True)
class ParallelRead:
    """How an engine reads a file in parallel: the map that parses shards, their size.

    ``survey`` is set by an engine that checks whole shards on its workers: given a
    ``shard_survey.ShardSource`` and the planned shards, it surveys them on the cluster and
    returns a ``shard_survey.Survey``.
    """

    map: ShardMap
    shard_bytes: int = DEFAULT_SHARD_BYTES
    survey: Callable[..., Any] | None = None


def can_shard(path: str | Path) -> bool:
    """Whether a file can be cut at line ends (one-record-per-line formats, uncompressed)."""
    return Path(path).suffix.lower() in SHARDABLE


def cut_shards(path: str | Path, dataset: str,
               shard_bytes: int = DEFAULT_SHARD_BYTES) -> Iterator[tuple[Shard, bytes]]:
    """Read a file in one pass as shards of about ``shard_bytes``, each ending at a line end.

    Each shard comes with its bytes and the number of its first line (row ids of JSON
    Lines, error messages), counted in those bytes as they go by; shards are read as they
    are asked for, so few are in memory at once.
    """
    if shard_bytes < 1:
        raise ValueError(f"shard_bytes must be at least 1, got {shard_bytes}")
    path = Path(path)
    start, first_line = 0, 1
    with path.open("rb") as fh:
        while data := fh.read(shard_bytes):
            if not data.endswith(b"\n"):
                data += fh.readline()  # to the end of the line the cut fell in
            yield Shard(str(path), dataset, start, start + len(data), first_line), data
            start += len(data)
            first_line += data.count(b"\n")


def plan_shards(path: str | Path, dataset: str,
                shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[Shard]:
    """Cut a file into shards as ``cut_shards`` does, keeping only their byte ranges.

    The file is read once in blocks to count lines (each shard's first line number names
    its rows and errors); memory stays flat in the file's size.
    """
    if shard_bytes < 1:
        raise ValueError(f"shard_bytes must be at least 1, got {shard_bytes}")
    path = Path(path)
    shards: list[Shard] = []
    start, first_line = 0, 1
    with path.open("rb") as fh:
        while True:
            size = lines = 0
            last = b""
            while size < shard_bytes:
                block = fh.read(min(PLAN_BLOCK, shard_bytes - size))
                if not block:
                    break
                size += len(block)
                lines += block.count(b"\n")
                last = block[-1:]
            if not size:
                return shards
            if last != b"\n":
                rest = fh.readline()  # to the end of the line the cut fell in
                size += len(rest)
                lines += rest.count(b"\n")
            shards.append(Shard(str(path), dataset, start, start + size, first_line))
            start += size
            first_line += lines


def shard_bytes(shard: Shard, stamp: str | None = None) -> bytes:
    """Read a shard's bytes from its file (a worker reading its own shard).

    A file at a URL (``kgcheck.data.input_uri``) is read by one ranged request, after
    making sure the object still has the ``stamp`` (ETag) the run was planned with.
    """
    if is_input_uri(shard.path):
        return read_range(shard.path, shard.start, shard.end, stamp)
    with Path(shard.path).open("rb") as fh:
        fh.seek(shard.start)
        return fh.read(shard.end - shard.start)


def shard_lines(shards: Iterable[Shard]) -> list[int]:
    """Count each shard's lines, reading its bytes here (``seek_shards``' default)."""
    return [shard_bytes(shard).count(b"\n") for shard in shards]


def seek_shards(uri: str, dataset: str, shard_bytes: int = DEFAULT_SHARD_BYTES,
                lines: Callable[[list[Shard]], Sequence[int]] = shard_lines) -> list[Shard]:
    """Cut a file at a URL into the shards ``plan_shards`` cuts a local copy into, by seeking.

    The cuts read a few kilobytes each (``input_uri.seek_ranges``); ``lines`` counts the
    lines of the shards (numbered 0 until then), for their first line numbers: an engine
    counts them where the shards are read (the Ray pipeline: one task per shard).
    """
    ranges = seek_ranges(stat_input(uri), shard_bytes)
    counts = lines([Shard(uri, dataset, start, end, 0) for start, end in ranges])
    shards, first_line = [], 1
    for (start, end), count in zip(ranges, counts, strict=True):
        shards.append(Shard(uri, dataset, start, end, first_line))
        first_line += count
    return shards


def read_shard(shard: Shard, data: bytes) -> ShardFacts:
    """Parse one shard's bytes into its facts (and names, for RDF)."""
    where = shard.path  # as given: a URL stays whole in messages
    if shard.suffix in FORMATS:
        names = Names()
        rows = []
        for subject, predicate, obj in rdf_terms(data, FORMATS[shard.suffix], where,
                                                 shard.first_line):
            if is_name_triple(predicate):
                names.offer(str(subject), predicate.value, obj)
            else:
                rows.append(triple_row(subject, predicate, obj))
        return ShardFacts(rows=rows, names=names.best, names_overflowed=names.overflowed)
    return ShardFacts(list(jsonl_facts(io.BytesIO(data), where, shard.dataset,
                                       shard.first_line)))


def map_in_process(shards: Iterable[tuple[Shard, bytes]]) -> Iterator[ShardFacts]:
    """Parse shards one after another in this process (the reference for parallel maps)."""
    for shard, data in shards:
        yield read_shard(shard, data)


class ShardedReader:
    """Iterate a file's facts, read in parallel shards and merged in file order.

    For RDF, ``reader`` (an ``RdfReader`` of the file) receives the names the shards found,
    so that its ``named`` gives the chosen facts their names as after one pass.
    """

    def __init__(self, path: str | Path, dataset: str, shard_map: ShardMap, *,
                 shard_bytes: int = DEFAULT_SHARD_BYTES,
                 reader: RdfReader | None = None) -> None:
        self.path = Path(path)
        self.dataset = dataset
        self.shard_map = shard_map
        self.shard_bytes = shard_bytes
        self.reader = reader
        self.shards = 0

    def __iter__(self) -> Iterator[Fact]:
        self.shards = 0
        parts = self.shard_map(self._counted(cut_shards(self.path, self.dataset,
                                                        self.shard_bytes)))
        if self.reader is None:
            yield from unique_ids((f for part in parts for f in part.facts), self.path)
            return
        yield from self._merge_rdf(parts, self.reader)

    def _merge_rdf(self, parts: Iterator[ShardFacts], reader: RdfReader) -> Iterator[Fact]:
        reader.exhausted = False
        reader.names = Names(reader.names.cap)
        facts = (row_fact(row, self.dataset) for part in self._names_taken(parts, reader)
                 for row in part.rows)
        yield from distinct_triples(facts) if reader.format in QUAD_FORMATS else facts
        reader.exhausted = True

    def _counted(self, shards: Iterator[tuple[Shard, bytes]]
                 ) -> Iterator[tuple[Shard, bytes]]:
        for shard in shards:
            self.shards += 1
            yield shard

    @staticmethod
    def _names_taken(parts: Iterator[ShardFacts], reader: RdfReader) -> Iterator[ShardFacts]:
        for part in parts:
            reader.names.merge(part.names, overflowed=part.names_overflowed)
            yield part
