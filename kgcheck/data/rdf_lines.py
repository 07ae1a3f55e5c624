"""Sample an N-Triples or N-Quads file over its raw lines, parsing only the chosen ones.

One triple per line: a sample drawn over the lines that hold facts (blank lines, comments
and naming triples left out; in N-Quads a triple already seen in another graph left out) is
the sample drawn over the file's facts, with the same seed giving the same facts. The file
is read in large binary blocks; a line is looked at with byte operations only (its first
byte, a substring test for the naming predicates, a split for the predicate field when
strata or names need it). The chosen lines are then parsed by pyoxigraph, and one more
byte-level pass finds the naming triples (``rdfs:label``, ``skos:prefLabel``,
``schema:name``) of the chosen facts' terms, so memory holds the sample and its names only.
Lines that are not chosen are not parsed: a syntax error on one of them goes unnoticed
(the full parse, e.g. ``--limit`` or a whole-file run, reports it).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyoxigraph as ox

from kgcheck.data.facts import Fact
from kgcheck.data.line_blocks import (
    BLOCK_BYTES,
    Line,
    file_blocks,
    file_lines,
    kept_lines,
    line_at,
    line_count,
    line_indices,
)
from kgcheck.data.offset_spill import OffsetSpill
from kgcheck.data.rdf import NAME_PREDICATES, QUAD_FORMATS, TERMS, Names, RdfReader, rdf_fact
from kgcheck.data.rdf import rdf_terms as parse_terms
from kgcheck.data.sampling import Reservoir
from kgcheck.data.sources import TriplesError, open_binary

LINE_FORMATS = (ox.RdfFormat.N_TRIPLES, ox.RdfFormat.N_QUADS)
NAME_FIELDS = frozenset(f"<{iri}>".encode() for iri in NAME_PREDICATES)
# Substrings every naming predicate's line holds: a line without any needs no split.
_NAME_HINTS = (b"#label>", b"#prefLabel>", b"schema.org/name>")
# Blank node labels the streaming parser renumbers by first appearance in the whole file
# (see ``rdf.rdf_terms``): a chosen line holding one is only named right by the full parse.
_RENUMBERED_BNODE = re.compile(rb"_:[0-9a-f]{20,32}(?![0-9A-Za-z_.-])")

# A line that may hold no triple (a comment, a blank, indentation) starts with neither; the
# lookahead leaves that first byte unread, so a blank line before another odd one is found.
_ODD_START = re.compile(rb"\n(?=[^<_])")
# What the naming predicates end with: one search finds rdfs:label and skos:prefLabel.
_NAME_ENDS = (b"abel>", b"/name>")


def can_sample_lines(reader: RdfReader) -> bool:
    """Whether a file is sampled over its raw lines (N-Triples and N-Quads, gzipped too)."""
    return reader.format in LINE_FORMATS


def _no_fact_lines(block: bytes) -> tuple[array[int], list[tuple[int, int]]]:
    """Find, in a block, the lines holding no fact (names, comments, blanks).

    Returns their indices, and the start and subject hash of each naming line. Found with
    two substring searches (the ends of the naming predicates) and one regular expression
    (a line starting with anything but the ``<`` or ``_`` a triple starts with); only the
    lines found are looked at.
    """
    starts: set[int] = set()
    named: list[tuple[int, int]] = []
    for needle in _NAME_ENDS:
        at = block.find(needle)
        while at >= 0:
            start = block.rfind(b"\n", 0, at) + 1
            fields = _fields(line_at(block, start))
            if len(fields) > 1 and fields[1] in NAME_FIELDS and start not in starts:
                starts.add(start)
                named.append((start, hash(fields[0])))
            at = block.find(needle, at + len(needle))
    odd = [] if block[:1] in (b"<", b"_") else [0]
    odd += [match.start() + 1 for match in _ODD_START.finditer(block)]
    for start in odd:
        text = line_at(block, start).strip()
        if not text or text.startswith(b"#"):
            starts.add(start)
    named.sort()
    return line_indices(block, starts), named


def _fields(line: bytes) -> list[bytes]:
    """Split a line into subject, predicate and the rest (IRIs and blank nodes hold no space)."""
    return line.split(None, 2)


def _unbracket(term: bytes) -> str:
    """Return a term's plain value as ``rdf.term_value`` does: an IRI without its brackets."""
    text = term.decode("utf-8", "replace")
    return text[1:-1] if text.startswith("<") and text.endswith(">") else text


def _triple_key(line: bytes) -> int:
    """Return a hash of a quad line's triple: its terms without the graph, spaces normalized."""
    body = line.strip()
    if body.endswith(b"."):
        body = body[:-1].rstrip()
    quote = body.rfind(b'"')
    if quote < 0:  # no literal: S P O [G], none holding a space
        return hash(b" ".join(body.split()[:3]))
    head, tail = body[: quote + 1], body[quote + 1:]
    before = head.find(b'"')
    # The literal's language tag or datatype is glued to its closing quote; the graph follows.
    suffix = tail.split(None, 1)[0] if tail[:1] in (b"@", b"^") else b""
    return hash(b" ".join(head[:before].split()) + b" " + head[before:] + suffix)


class LineSampler:
    """The facts of an N-Triples or N-Quads file, also drawn from as raw lines.

    Called, it streams the file's facts through ``reader`` (as ``iter(reader)``); as
    ``sampling.RawRecords`` its records are the lines holding facts, and the chosen lines'
    facts are parsed and named here, leaving ``reader`` with their names (as after a full
    pass, so that ``reader.named`` reads the file no further).
    """

    def __init__(self, reader: RdfReader, block_bytes: int = BLOCK_BYTES) -> None:
        self.reader = reader
        self.block_bytes = block_bytes

    def __call__(self) -> Iterator[Fact]:
        """Stream the file's facts with the full parser."""
        return iter(self.reader)

    def records(self) -> Iterator[Line]:
        """Yield the lines holding facts, one per fact of the streaming parser, in order."""
        quads = self.reader.format in QUAD_FORMATS
        seen: set[int] = set()
        for number, line in file_lines(self.reader.path, self.block_bytes):
            first = line[:1]
            if first != b"<" and first != b"_":
                text = line.strip()
                if not text or text.startswith(b"#"):
                    continue
            if ((_NAME_HINTS[0] in line or _NAME_HINTS[1] in line or _NAME_HINTS[2] in line)
                    and _is_name_line(line)):
                continue
            if quads:
                key = _triple_key(line)
                if key in seen:
                    continue
                seen.add(key)
            yield number, line

    def record_key(self, stratify: str) -> Callable[[Line], str]:
        """Return a line's stratum from its fields, as ``sampling.STRATA`` gives its fact's."""
        if stratify == "predicate":
            return lambda item: _unbracket(_field(item[1], 1))
        if stratify == "subject":
            return lambda item: _unbracket(_field(item[1], 0))
        constant = self.reader.dataset if stratify == "dataset" else "unknown"
        return lambda _item: constant

    def parse_chosen(self, chosen: list[tuple[int, Any]]) -> list[tuple[int, Fact]] | None:
        """Parse the chosen lines into facts and find their names; None if a line needs more.

        A malformed chosen line is a ``TriplesError`` naming the file and the line.
        """
        if any(_RENUMBERED_BNODE.search(line) for _n, (_number, line) in chosen):
            return None
        reader = self.reader
        facts: list[tuple[int, Fact]] = []
        for n, (number, line) in chosen:
            triples = list(parse_terms(line + b"\n", reader.format, reader.path, number))
            if len(triples) != 1:
                raise TriplesError(f"{reader.path}, line {number}: {len(triples)} triples on "
                                   "one line; N-Triples and N-Quads hold one per line")
            facts.append((n, rdf_fact(*triples[0], reader.dataset)))
        self._name([fact for _n, fact in facts])
        return facts

    def _name(self, facts: list[Fact]) -> None:
        """Give ``reader`` the names of the facts' terms: naming lines found by byte search."""
        self.reader.names = self.names_of({fact.rdf[key] for fact in facts if fact.rdf
                                           for key in TERMS})
        self.reader.exhausted = True

    def names_of(self, terms: set[str]) -> Names:
        """Return the names the file gives to these terms (N-Triples form), best first.

        The naming lines are found by byte search and only they are parsed; a broken one
        is passed over (its term keeps its local name).
        """
        reader = self.reader
        names = Names(reader.names.cap)
        for number, line in self._name_lines({term.encode() for term in terms}):
            try:
                triples = list(parse_terms(line + b"\n", reader.format, reader.path, number))
            except TriplesError:
                continue
            for subject, predicate, obj in triples:
                names.offer(str(subject), predicate.value, obj, bounded=False)
        return names

    def _name_lines(self, subjects: set[bytes]) -> Iterator[Line]:
        """Yield, in file order, the naming lines whose subject is one of ``subjects``."""
        if not subjects:
            return
        number = 0
        for block in file_blocks(self.reader.path, self.block_bytes):
            found: list[int] = []
            for needle in NAME_FIELDS:
                at = block.find(needle)
                while at >= 0:
                    found.append(block.rfind(b"\n", 0, at) + 1)
                    at = block.find(needle, at + len(needle))
            counted = 0
            for start in sorted(set(found)):
                line = line_at(block, start)
                fields = _fields(line)
                if len(fields) > 1 and fields[1] in NAME_FIELDS and fields[0] in subjects:
                    number += block.count(b"\n", counted, start)
                    counted = start
                    yield number + 1, line
            number += block.count(b"\n", counted)


class TriplesLineSampler(LineSampler):
    """An N-Triples file, whose facts a plain sample draws from block by block, in one read.

    N-Triples needs no per-line step (no graph to deduplicate): the facts of a block are its
    lines less those the byte searches of ``_no_fact_lines`` find, so the reservoir is
    advanced by a block's count at once, and the lines it keeps are taken from the block in
    hand. The naming lines are noted as they pass (``OffsetSpill``: their offsets and
    subject hashes, on disk past a cap), to name the chosen facts without another read.
    """

    # Where the naming lines are, from the last draw (None: not drawn, or since drawn over
    # the lines one by one, as strata are).
    _names: OffsetSpill | None = None

    def records(self) -> Iterator[Line]:
        """Yield the lines holding facts (for strata), forgetting the last draw's names."""
        self._forget_names()
        return super().records()

    def _forget_names(self) -> None:
        if self._names is not None:
            self._names.close()
            self._names = None

    def draw(self, reservoir: Reservoir) -> tuple[int, list[tuple[int, Any]]]:
        """Draw Algorithm R's sample while counting the facts (one read; ``DrawnRecords``).

        Each block advances the reservoir by its facts; the lines of those it keeps are
        taken from the block then, and dropped when a later block's fact takes their place.
        """
        self._forget_names()
        self._names = names = OffsetSpill()
        lines: dict[int, Line] = {}
        offset = number = 0
        for block in file_blocks(self.reader.path, self.block_bytes):
            skipped, named = _no_fact_lines(block)
            names.extend(named, offset)
            count = line_count(block)
            first = reservoir.seen
            reservoir.advance(count - len(skipped))
            lines = kept_lines(lines, reservoir.kept, first, block, number, skipped)
            offset += len(block)
            number += count
        return reservoir.seen, [(index, lines[index]) for index in sorted(reservoir.kept)]

    def _name_lines(self, subjects: set[bytes]) -> Iterator[Line]:
        """Yield the naming lines of ``subjects``, found by the draw (number 0)."""
        if self._names is None:
            yield from super()._name_lines(subjects)
            return
        hashes = np.array(sorted({hash(subject) for subject in subjects}), dtype=np.int64)
        with open_binary(self.reader.path) as fh:
            for piece in self._names.pieces():
                for at in piece[np.isin(piece[:, 1], hashes), 0].tolist():
                    fh.seek(at)
                    line = fh.readline().rstrip(b"\r\n")
                    if _fields(line)[0] in subjects:  # not another term of the same hash
                        yield 0, line


def _field(line: bytes, index: int) -> bytes:
    fields = _fields(line)
    return fields[index] if len(fields) > index else b""


def _is_name_line(line: bytes) -> bool:
    fields = _fields(line)
    return len(fields) > 1 and fields[1] in NAME_FIELDS


def line_source(reader: RdfReader) -> Callable[[], Iterator[Fact]]:
    """Return the stream of a file's facts: a ``LineSampler`` where lines can be sampled."""
    if reader.format == ox.RdfFormat.N_TRIPLES:
        return TriplesLineSampler(reader)
    if can_sample_lines(reader):
        return LineSampler(reader)
    return lambda: iter(reader)


__all__ = ["LineSampler", "TriplesLineSampler", "can_sample_lines", "line_source"]
