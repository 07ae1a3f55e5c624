"""Sample a JSON Lines, CSV or TSV file over its raw lines, parsing only the chosen records.

One record per line (a JSON object; a table row after the header row), so a sample drawn
over the lines that hold records, with a seed, is the sample the streaming reader
(``kgcheck.data.triples``) draws over the file's facts: the same facts, in the same order.
The file is read in large binary blocks (``kgcheck.data.line_blocks``); the lines that hold
no record are found with byte searches (a JSON line not starting with ``{``, a table line
of only blanks, delimiters and quotes is then looked at closely: skipped as the streaming
reader skips it). A uniform sample is drawn in the same pass, block by block
(``sampling.Reservoir``). Only the chosen records are decoded and built into facts, with
the reader's own code and errors (a malformed chosen record names the file and the line).
A table's blocks are read as arrays (``kgcheck.data.block_arrays``): the offsets of its
line ends, delimiters and quotes, found once per block, give its plain quoted fields, its
lines of blanks and its id cells without a step per line.

What is read of the other records, so that the sample stays the streaming reader's:

- **fact ids**, when the file gives them (a JSON line holding ``"id"``, an ``id`` column),
  to refuse a repeated id as the streaming reader does: one search per block where every
  line allows it (the key once in one object, no Unicode escape, a plain string or integer
  value; a cell with no quote before it and no blank around the id), else a search per
  line, else the line's JSON or row; 8 bytes per id kept (its hash; a table's hashed in
  bulk from the cells' offsets), in memory up to a cap and on disk beyond it
  (``kgcheck.data.hash_spill``), and an exact second pass only when two hashes meet
  or when some facts are numbered (a numbered fact's id may be another's);
- **the stratum** of ``--stratify``: the field or column alone, found the same way.

A malformed record that is not chosen goes unnoticed unless reading its id or stratum
shows it (the full parse, e.g. ``--limit`` or a whole-file run, reports it). A table whose
quoted field holds a line break (found by a byte-level check of the lines holding a quote:
quotes pairing up as plain quoted fields within their lines, else a match of each such
line) has records spanning lines: such a file is sampled by the full parse instead.
"""

from __future__ import annotations

import csv
import io
import re
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from kgcheck.data.block_arrays import BlockArrays, bytes_hashes, span_hashes
from kgcheck.data.facts import MAX_TERM_CHARS, Fact
from kgcheck.data.hash_spill import HashSpill
from kgcheck.data.input_limits import LINE_BYTES
from kgcheck.data.labels import label_word
from kgcheck.data.line_blocks import (
    BLOCK_BYTES,
    Line,
    LineIndex,
    file_blocks,
    kept_lines,
    line_at,
    line_count,
    line_indices,
)
from kgcheck.data.sampling import Reservoir, label_stratum
from kgcheck.data.sources import TriplesError, base_name, json_objects
from kgcheck.data.triples import (
    JSONL_SUFFIXES,
    TABLE_SUFFIXES,
    _fact,
    _fact_id,
    blank_row,
    decode_line,
    iter_triples,
    jsonl_facts,
    repeated_id,
    table_error,
    table_fact,
    table_header,
    term_text,
)

# Bytes a line of blanks may hold: ASCII white space, the separators str.strip() also
# strips, and any non-ASCII byte (Unicode spaces are multi-byte); a line of only these is
# decoded to tell.
_BLANKISH = rb" \t\r\x0b\x0c\x1c-\x1f\x80-\xff"
_CONTENT = re.compile(rb"[^" + _BLANKISH + rb"]")
_BOM = b"\xef\xbb\xbf"
# A JSON line that is not an object's start: blank, or a record the parser will refuse.
_NOT_OBJECT = re.compile(rb"\n(?=[^{])")
# An id as its fact holds it (no blank at either end), and a line's id key: a quote after
# a backslash is escaped, so a match not after one is the string token "id" itself.
_CLEAN = rb"[^\s\x1c-\x1f\x80-\xff%s](?:[^\n%s]*[^\s\x1c-\x1f\x80-\xff%s])?"
_ID_KEY = rb'"id"(?<!\\"id")[ \t\r]*:[ \t\r]*'
# (Each match takes the rest of its line: one match per line at most.)
_ID_STRINGS = re.compile(_ID_KEY + rb'"(' + _CLEAN % ((rb'"\\',) * 3) + rb')"[^\n]*')
_ID_INTEGERS = re.compile(_ID_KEY + rb"(0|-?[1-9][0-9]*)[ \t\r]*[,}][^\n]*")


def record_source(path: Path, dataset: str) -> Callable[[], Iterator[Fact]]:
    """Return the stream of a CSV, TSV or JSON Lines file's facts, sampled over raw lines."""
    suffix = base_name(path)[1]
    if suffix in JSONL_SUFFIXES:
        return JsonLinesSampler(path, dataset)
    if suffix in TABLE_SUFFIXES:
        return TableSampler(path, dataset, "\t" if suffix == ".tsv" else ",")
    return lambda: iter_triples(path, dataset)


# How a sampler hashes ids (their UTF-8), many at once: one function for all of a file's.
IdHasher = Callable[[list[bytes]], np.ndarray]


def python_hashes(ids: list[bytes]) -> np.ndarray:
    """Return Python's hash of each id."""
    return np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids))


class _IdHashes:
    """The ids of a file's records as hashes (of their UTF-8): whether one may repeat.

    A file whose records give ids and whose other records are numbered (an id may then be
    a number) is read again, exactly, as is one where two hashes meet. The hashes spill to
    disk past a cap (``hash_spill``): used in a ``with`` block, which removes them.
    """

    def __init__(self, hash_ids: IdHasher) -> None:
        self.hashes = HashSpill()
        self.numbered = 0  # records whose id is their line or row number
        self._hash_ids = hash_ids
        self._waiting: list[bytes] = []  # ids added one by one, hashed at the block's end

    def __enter__(self) -> _IdHashes:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.hashes.close()

    def add(self, fact_id: str | None) -> None:
        if fact_id is None:
            self.numbered += 1
        else:
            self._waiting.append(fact_id.encode("utf-8", "surrogatepass"))

    def add_hashes(self, hashes: np.ndarray) -> None:
        self.hashes.add(hashes.astype(np.int64, copy=False))

    def flush(self) -> None:
        """Hash the ids added one by one."""
        if self._waiting:
            self.add_hashes(self._hash_ids(self._waiting))
            self._waiting = []

    def may_repeat(self) -> bool:
        self.flush()
        if self.numbered and len(self.hashes):
            self.hashes.close()
            return True
        return self.hashes.any_repeated()


class RecordSampler:
    """The facts of a JSON Lines or table file, also drawn from as raw lines.

    Called, it streams the file's facts with the full reader; as ``sampling.RawRecords``
    (and ``CountedRecords``) its records are ``(line number, line)`` for the lines holding
    facts, counted block by block.
    """

    # How the format's ids are hashed (the block searches and the line by line reads alike).
    hash_ids: IdHasher = staticmethod(python_hashes)

    def __init__(self, path: Path, dataset: str, block_bytes: int = BLOCK_BYTES) -> None:
        self.path = path
        self.dataset = dataset
        self.block_bytes = block_bytes
        # Set when a record spans lines: only the full parse reads the file right.
        self.spanning = False
        self._index = LineIndex()
        self._ids_checked: tuple[int, int] | None = None

    def __call__(self) -> Iterator[Fact]:
        """Stream the file's facts with the full reader."""
        return iter_triples(self.path, self.dataset)

    # What each format says about its lines.

    def _start(self) -> bool:
        """Read what precedes the records (a header); False when the file needs the full parse."""
        return True

    def _no_records(self, block: bytes, number: int) -> array[int] | None:
        """Return the indices of a block's lines holding no record; None if one spans lines.

        ``number`` is how many lines of the file come before the block.
        """
        raise NotImplementedError

    def _may_hold_ids(self, block: bytes) -> bool:
        """Whether a record of this block may give its fact's id."""
        raise NotImplementedError

    def _block_ids(self, block: bytes, lines: int, skipped: array[int]) -> np.ndarray | None:
        """Return the hashes of a block's records' ids, found by byte searches; None if not."""
        return None

    def _line_count(self, block: bytes) -> int:
        """Return how many lines a block holds."""
        return line_count(block)

    def _line_ends(self, block: bytes) -> np.ndarray | None:
        """Return the offsets of a block's line ends if they were found already, else None."""
        return None

    def _id(self, number: int, line: bytes) -> str | None:
        """Return the id a record gives its fact; None when its fact is numbered instead."""
        raise NotImplementedError

    def _numbered_id(self, number: int, record: int) -> str:
        """Return the id of the ``record``-th fact, on line ``number``, when it gives none."""
        raise NotImplementedError

    def record_key(self, stratify: str) -> Callable[[Line], str]:
        """Return a record's stratum, as ``sampling.STRATA`` gives its fact's."""
        if stratify in ("subject", "predicate"):
            return lambda item: self._term(*item, stratify)
        if stratify == "label":
            return lambda item: self._label(*item)
        return lambda _item: self.dataset

    def _term(self, number: int, line: bytes, name: str) -> str:
        """Return the record's ``subject`` or ``predicate``, read without building a fact."""
        raise NotImplementedError

    def _label(self, number: int, line: bytes) -> str:
        """Return the record's label stratum (``T``, ``F`` or ``unknown``)."""
        raise NotImplementedError

    def _fact(self, record: int, number: int, line: bytes) -> Fact:
        """Build the fact of the ``record``-th record, line ``number``."""
        raise NotImplementedError

    # The passes.

    def _blocks(self) -> Iterator[tuple[bytes, int, int, array[int]]]:
        """Yield each block, how many lines precede and make it, and its lines holding none.

        Stops, setting ``spanning``, at a record that spans lines.
        """
        self.spanning = False
        if not self._start():
            self.spanning = True
            return
        number = 0
        for block in file_blocks(self.path, self.block_bytes, LINE_BYTES.value()):
            if (nul := block.find(b"\x00")) >= 0:
                start = block.rfind(b"\n", 0, nul) + 1
                decode_line(line_at(block, start), self.path,
                            number + block.count(b"\n", 0, start) + 1)
            skipped = self._no_records(block, number)
            if skipped is None:
                self.spanning = True
                return
            lines = self._line_count(block)
            yield block, number, lines, skipped
            number += lines

    def _raw_records(self) -> Iterator[Line]:
        """Yield ``(line number, line)`` for each record, in order."""
        for block, number, _lines, skipped in self._blocks():
            yield from _block_records(block, number, skipped)

    def _stamp(self) -> tuple[int, int]:
        stat = self.path.stat()
        return stat.st_size, stat.st_mtime_ns

    def records(self) -> Iterator[Line]:
        """Yield ``(line number, line)`` for the records, one per fact, in order.

        The first complete pass also refuses a repeated fact id, as the streaming reader.
        """
        check = self._ids_checked != self._stamp()
        with _IdHashes(self.hash_ids) as ids:
            for block, number, lines, skipped in self._blocks():
                if check:
                    self._add_ids(ids, block, number, lines, skipped)
                yield from _block_records(block, number, skipped)
            if check and not self.spanning:
                self._check_ids(ids)

    def count_records(self) -> int:
        """Count the records (one pass), keeping per block what ``pick`` needs."""
        self._index = index = LineIndex()
        with _IdHashes(self.hash_ids) as ids:
            for block, number, lines, skipped in self._blocks():
                self._add_ids(ids, block, number, lines, skipped)
                index.add(lines, skipped)
            if self.spanning:
                return 0
            self._check_ids(ids)
        return index.records

    def draw(self, reservoir: Reservoir) -> tuple[int, list[tuple[int, Any]]]:
        """Draw Algorithm R's sample while counting the records (one pass; ``DrawnRecords``).

        Each block advances the reservoir by its records; the lines of those it keeps are
        taken from it then, and dropped when a later block's record takes their place.
        """
        lines: dict[int, Line] = {}
        with _IdHashes(self.hash_ids) as ids:
            for block, number, count, skipped in self._blocks():
                self._add_ids(ids, block, number, count, skipped)
                first = reservoir.seen
                reservoir.advance(count - len(skipped))
                lines = kept_lines(lines, reservoir.kept, first, block, number, skipped,
                                   self._line_ends(block))
            if self.spanning:
                return 0, []
            self._check_ids(ids)
        return reservoir.seen, [(index, lines[index]) for index in sorted(reservoir.kept)]

    def _add_ids(self, ids: _IdHashes, block: bytes, number: int, lines: int,
                 skipped: array[int]) -> None:
        """Add the ids of a block's records: by one search where it can, else line by line."""
        if not self._may_hold_ids(block):
            ids.numbered += lines - len(skipped)
        elif (found := self._block_ids(block, lines, skipped)) is not None:
            ids.add_hashes(found)
        else:
            for line_number, line in _block_records(block, number, skipped):
                ids.add(self._id(line_number, line))
            ids.flush()

    def pick(self, indices: list[int]) -> list[tuple[int, Any]]:
        """Return ``(index, (line number, line))`` for the records at these indices."""
        if self.spanning:
            return []
        return list(self._index.pick(file_blocks(self.path, self.block_bytes,
                                                 LINE_BYTES.value()), indices))

    def parse_chosen(self, chosen: list[tuple[int, Any]]) -> list[tuple[int, Fact]] | None:
        """Build the chosen records' facts; None when the file needs the full parse."""
        if self.spanning:
            return None
        return [(n, self._fact(n + 1, number, line)) for n, (number, line) in chosen]

    def _check_ids(self, ids: _IdHashes) -> None:
        """Refuse a repeated id as ``triples.unique_ids`` does, reading the ids again if one may."""
        if ids.may_repeat():
            first: dict[str, int] = {}
            for record, (number, line) in enumerate(self._raw_records(), start=1):
                fact_id = self._id(number, line) or self._numbered_id(number, record)
                earlier = first.setdefault(fact_id, record)
                if earlier != record:
                    raise repeated_id(self.path, fact_id, earlier, record)
        self._ids_checked = self._stamp()


def _block_records(block: bytes, number: int, skipped: array[int]) -> Iterator[Line]:
    """Yield ``(line number, line)`` for the lines of a block that hold records."""
    lines = block.split(b"\n")
    if not lines[-1]:
        lines.pop()
    if not skipped:
        for index, line in enumerate(lines, start=number + 1):
            yield index, line
        return
    skip = set(skipped)
    for index, line in enumerate(lines):
        if index not in skip:
            yield number + index + 1, line


def _byte_table(allowed: bytes) -> np.ndarray:
    """Return which of the 256 byte values a regex character set of these bytes allows."""
    pattern = re.compile(b"[" + allowed + b"]")
    return np.array([pattern.match(bytes([value])) is not None for value in range(256)])


def _blank_text(line: bytes) -> bool:
    """Whether a line of blank-looking bytes is blank as text (str.strip() empties it)."""
    try:
        return not line.decode("utf-8").strip()
    except UnicodeDecodeError:
        return False  # not text: a record, whose error a full read reports


def _field(name: str) -> tuple[bytes, re.Pattern[bytes], re.Pattern[bytes]]:
    """Return a JSON key's bytes, its search as a key, and as a key with a plain value."""
    key = b'"%s"' % name.encode()
    # A quote after a backslash is escaped: a match not after one is the string token.
    keyed = key + rb"(?<!\\" + key + rb")[ \t\r]*:[ \t\r]*"
    return key, re.compile(keyed), re.compile(
        keyed + rb'(?:"([^"\\]*)"|(-?(?:0|[1-9][0-9]*))(?=[ \t\r]*[,}]))')


_FIELDS = {name: _field(name) for name in ("id", "subject", "predicate", "label")}


def _simple_value(line: bytes, name: str) -> tuple[bool, str | int | None]:
    """Find a JSON line's top-level field by byte search, where the line allows it.

    Returns ``(True, value)`` (``value`` None when the key is absent) for a line holding
    one object and no Unicode escape, with the key once and a plain string or an integer
    as its value; ``(False, None)`` when only decoding the line tells.
    """
    if b"\\u" in line or line.count(b"{") != 1:
        return False, None
    key, keyed, valued = _FIELDS[name]
    if (occurrences := line.count(key)) == 0:
        return True, None
    found = valued.search(line)
    if occurrences > 1 or found is None:  # the name also as a value, or another value
        keys = len(keyed.findall(line))
        if keys == 0:
            return True, None
        if keys > 1 or found is None:
            return False, None  # the key twice (JSON keeps the last), or a value to decode
    text, integer = found.groups()
    if text is None:
        return True, int(integer)
    try:
        return True, text.decode("utf-8")
    except UnicodeDecodeError:
        return False, None


class JsonLinesSampler(RecordSampler):
    """A JSON Lines file: a fact per line holding an object, blank lines skipped."""

    def _no_records(self, block: bytes, number: int) -> array[int]:
        starts = [] if block[:1] == b"{" else [0]
        starts += [found.start() + 1 for found in _NOT_OBJECT.finditer(block)]
        return line_indices(block, [start for start in starts if self._blank(
            line_at(block, start), first=number == 0 and start == 0)])

    @staticmethod
    def _blank(line: bytes, first: bool) -> bool:
        if first and line.startswith(_BOM):
            line = line[len(_BOM):]
        return _CONTENT.search(line) is None and _blank_text(line)

    def _may_hold_ids(self, block: bytes) -> bool:
        return b'"id"' in block or b"\\u" in block

    def _block_ids(self, block: bytes, lines: int, skipped: array[int]) -> np.ndarray | None:
        # Every record holding one "{" (an object holds at least one) and "id" once, as a
        # key whose value is a plain string or an integer: the ids are a search's matches.
        records = lines - len(skipped)
        if (block.count(b"{") != records or block.count(b'"id"') != records
                or b"\\u" in block):
            return None
        for pattern in (_ID_STRINGS, _ID_INTEGERS):
            if len(found := pattern.findall(block)) == records:
                return self.hash_ids(found)
        return None

    def _row(self, number: int, line: bytes) -> dict[str, Any]:
        """Decode a record into its object, with the streaming reader's errors."""
        for _n, row in json_objects([decode_line(line, self.path, number)], self.path,
                                    first_line=number):
            return row
        return {}

    def _where(self, number: int) -> str:
        return f"{self.path}, line {number}"

    def _id(self, number: int, line: bytes) -> str | None:
        if b'"id"' not in line and b"\\u" not in line:
            return None  # no key spelled id
        simple, value = _simple_value(line, "id")
        if simple and (value is None or (value := str(value).strip())):
            return value
        row = self._row(number, line)
        return None if row.get("id") is None else _fact_id(row, self._where(number), number)

    def _numbered_id(self, number: int, record: int) -> str:
        return str(number)

    def _term(self, number: int, line: bytes, name: str) -> str:
        simple, value = _simple_value(line, name)
        text = str(value).strip() if simple and value is not None else ""
        if not text:
            row = self._row(number, line)
            if not (text := term_text(row, name)):
                _fact(row, self._where(number), number, self.dataset)  # raises: missing
        return text[:MAX_TERM_CHARS]

    def _label(self, number: int, line: bytes) -> str:
        simple, value = _simple_value(line, "label")
        if not simple:
            value = self._row(number, line).get("label")
        return label_stratum(label_word(value, self._where(number), TriplesError))

    def _fact(self, record: int, number: int, line: bytes) -> Fact:
        for fact in jsonl_facts(io.BytesIO(line), self.path, self.dataset, first_line=number):
            return fact
        raise TriplesError(f"{self._where(number)}: holds no JSON object")


class TableSampler(RecordSampler):
    """A CSV or TSV file: a header row, then a fact per row, rows of blanks skipped.

    A block's line ends, delimiters and quotes are found once each (``BlockArrays``): the
    rows' quoted fields, the lines of blanks and the id cells are then read from them.
    """

    # The id cells' hashes are computed from their offsets in the block.
    hash_ids = staticmethod(bytes_hashes)

    def __init__(self, path: Path, dataset: str, delimiter: str,
                 block_bytes: int = BLOCK_BYTES) -> None:
        super().__init__(path, dataset, block_bytes)
        self.delimiter = delimiter
        self._separator = delimiter.encode()
        self._arrays: BlockArrays | None = None
        blankish = _BLANKISH + b'"' + (b"" if delimiter == "\t" else self._separator)
        # The first byte of a line that may be blank (an empty line starts with its end).
        self._blank_start = _byte_table(blankish + b"\n")
        # The bytes that may start and end an id as the cell holds it (``_CLEAN``'s ends).
        self._id_end = ~_byte_table(_BLANKISH + rb'\n"' + self._separator)
        self.header: list[str] = []
        self._columns: dict[str, int] = {}
        sep = re.escape(self._separator)
        # A row on one line, by the csv module's rules: a quote opens a field only at its
        # start, "" inside is a quote, and a quoted field may go on after its closing quote.
        # (Possessive: one forward pass, as the csv module reads.)
        field = (rb'(?>"(?:[^"\n]|"")*+"(?:[^"' + sep + rb"\r\n][^" + sep + rb"\r\n]*+)?"
                 rb'|[^"' + sep + rb"\r\n][^" + sep + rb"\r\n]*+|)")
        self._one_line = re.compile(field + rb"(?:" + sep + field + rb")*+\r?(?:\n|\Z)")
        self._blank_after = re.compile(rb"\n(?=[" + blankish + rb"]*(?:\n|\Z))")
        self._content = re.compile(rb"[^" + blankish + rb"]")

    def _start(self) -> bool:
        first = line_at(next(file_blocks(self.path, 1 << 16, LINE_BYTES.value()), b""), 0)
        if b'"' in first and not self._one_line.fullmatch(first):
            return False
        self.header = table_header(self._fields(1, first), self.path)
        self._columns = {name: at for at, name in enumerate(self.header) if name}
        if "id" in self._columns:
            sep = re.escape(self._separator)
            blank = rb"[ \t\x0b\x0c]" if self.delimiter != "\t" else rb"[ \x0b\x0c]"
            cell = (rb'(?:[^"\n' + sep + rb"]*" + sep + rb"){%d}" % self._columns["id"]
                    + blank + rb"*(" + _CLEAN % ((b'"' + sep,) * 3) + rb")" + blank
                    + rb"*\r?(?=" + sep + rb"|\n|\Z)")
            self._id_cell_at = re.compile(cell)
            self._id_cells = re.compile(rb"\n" + cell)
        return True

    def _block_arrays(self, block: bytes) -> BlockArrays:
        """Return the block's arrays, made once for all the searches of its pass."""
        if self._arrays is None or self._arrays.data is not block:
            self._arrays = BlockArrays(block)
        return self._arrays

    def _line_count(self, block: bytes) -> int:
        return self._block_arrays(block).lines

    def _line_ends(self, block: bytes) -> np.ndarray | None:
        return self._block_arrays(block).line_ends

    def _no_records(self, block: bytes, number: int) -> array[int] | None:
        if not self._rows_on_lines(block):
            return None
        return self._blank_lines(block, number)

    def _blank_lines(self, block: bytes, number: int) -> array[int]:
        """Return the indices of a block's lines holding no record (the header, blank rows)."""
        arrays = self._block_arrays(block)
        starts = arrays.line_starts()
        # A line of blanks starts with one: only such lines are looked at (with the first).
        maybe = np.flatnonzero(self._blank_start[arrays.array[starts]])
        if len(maybe) > len(starts) // 8:  # many: one search over the block costs less
            return self._searched_blank_lines(block, number)
        return array("I", [index for index in [0, *maybe[maybe > 0].tolist()]
                           if (number == 0 and index == 0)
                           or self._blank(line_at(block, int(starts[index])))])

    def _searched_blank_lines(self, block: bytes, number: int) -> array[int]:
        """Return what ``_blank_lines`` does, found by a regex search over the block."""
        # (The search also finds the empty end after a block's last line end: no line.)
        starts = [0] + [found.start() + 1 for found in self._blank_after.finditer(block)
                        if found.start() + 1 < len(block)]
        return line_indices(block, [
            start for start in starts
            if (number == 0 and start == 0) or self._blank(line_at(block, start))])

    def _rows_on_lines(self, block: bytes) -> bool:
        """Whether each line of a block holding a quote is one whole row.

        A line that is not (a quoted field going on past its end, or a malformed row) sends
        the file to the full parse, which reads the row or reports it.
        """
        return b'"' not in block or self._quotes_pair_up(block) or self._rows_matched(block)

    def _rows_matched(self, block: bytes) -> bool:
        """Whether each line of a block holding a quote is one whole row, matched one by one."""
        at = block.find(b'"')
        while at >= 0:
            whole = self._one_line.match(block, block.rfind(b"\n", 0, at) + 1)
            if whole is None:
                return False
            at = block.find(b'"', whole.end())
        return True

    def _quotes_pair_up(self, block: bytes) -> bool:
        """Whether a block's quotes pair up as plain quoted fields, each within its line.

        Each pair opens at a field's start and closes at its end, holding no quote: every
        line holding them is then one whole row (``_one_line`` matches it). Not so (a
        doubled quote, a quote inside a field, a carriage return not ending its line), the
        lines are matched one by one.
        """
        arrays = self._block_arrays(block)
        quotes = arrays.offsets(0x22)
        if len(quotes) % 2 or (b"\r" in block
                               and block.count(b"\r") != block.count(b"\r\n")):
            return False
        data, sep = arrays.array, self._separator[0]
        opens, closes = quotes[0::2], quotes[1::2]
        before = data[opens - 1]  # (for a quote at the block's start, its last byte: unused)
        after = data[np.minimum(closes + 1, len(data) - 1)]
        ends = arrays.line_ends
        plain = (((opens == 0) | (before == sep) | (before == 0x0A))
                 & ((closes + 1 == len(data)) | (after == sep) | (after == 0x0A)
                    | (after == 0x0D))
                 & (np.searchsorted(ends, opens) == np.searchsorted(ends, closes)))
        return bool(plain.all())

    def _blank(self, line: bytes) -> bool:
        if self._content.search(line) is not None:
            return False
        try:  # quotes and delimiters around blanks: the row's fields tell
            return blank_row(next(csv.reader([line.decode("utf-8")],
                                             delimiter=self.delimiter), []))
        except (UnicodeDecodeError, csv.Error):
            return False  # a record, whose error a full read reports

    def _fields(self, number: int, line: bytes) -> list[str]:
        """Parse a row into its fields, with the streaming reader's errors."""
        try:
            return next(csv.reader([decode_line(line, self.path, number)],
                                   delimiter=self.delimiter), [])
        except csv.Error as exc:
            raise table_error(exc, self.path, number, self.delimiter) from None

    def _cell(self, number: int, line: bytes, column: int) -> str | None:
        """Return a row's field in ``column`` (None if the row is shorter), parsed cheaply."""
        if b'"' in line:
            fields = self._fields(number, line)
            return fields[column] if column < len(fields) else None
        parts = line.split(self._separator)
        if column >= len(parts):
            return None
        try:
            return parts[column].decode("utf-8")
        except UnicodeDecodeError:
            decode_line(line, self.path, number)  # raises, naming the line
            raise

    def _may_hold_ids(self, block: bytes) -> bool:
        return "id" in self._columns

    def _block_ids(self, block: bytes, lines: int, skipped: array[int]) -> np.ndarray | None:
        if (cells := self._id_cell_spans(block)) is None:
            return self._searched_ids(block, lines, skipped)
        hashes = span_hashes(block, *cells)
        return np.delete(hashes, np.asarray(skipped, dtype=np.int64)) if skipped else hashes

    def _id_cell_spans(self, block: bytes) -> tuple[np.ndarray, np.ndarray] | None:
        """Return where each line's id is, from the block's arrays; None where one is not plain.

        Plain: the line has the id cell, no quote up to its end, and the cell's first and
        last bytes are the id's (no blank around it): what ``_id_cells`` would find.
        """
        arrays = self._block_arrays(block)
        data, starts, stops = arrays.array, arrays.line_starts(), arrays.line_stops()
        column = self._columns["id"]
        separators = arrays.offsets(self._separator[0])
        first = np.searchsorted(separators, starts)  # each line's first separator
        if column:
            before = first + (column - 1)  # the separator before the id cell
            if len(before) and before[-1] >= len(separators):
                return None
            cell_starts = separators[before] + 1
            if (cell_starts > stops).any():
                return None
        else:
            cell_starts = starts
        after = np.append(separators, len(data))[np.minimum(first + column, len(separators))]
        cell_stops = np.minimum(after, stops)
        # The last cell of a line ends before its carriage return.
        cell_stops -= ((cell_stops == stops) & (cell_stops > cell_starts)
                       & (data[cell_stops - 1] == 0x0D))
        if not (cell_stops > cell_starts).all() or not (
                self._id_end[data[cell_starts]] & self._id_end[data[cell_stops - 1]]).all():
            return None
        if len(quotes := arrays.offsets(0x22)):
            first_quote = np.append(quotes, len(data))[np.searchsorted(quotes, starts)]
            if (first_quote < cell_stops).any():
                return None
        return cell_starts, cell_stops

    def _searched_ids(self, block: bytes, lines: int, skipped: array[int]) -> np.ndarray | None:
        """Return the hashes of a block's ids found by a regex search; None if not all are."""
        # Every line's id cell found by one search (no quote up to it), header included.
        first = self._id_cell_at.match(block)
        found = self._id_cells.findall(block)
        if first is None or len(found) + 1 != lines:
            return None
        cells = [first.group(1), *found]
        if skipped:
            skip = set(skipped)
            cells = [cell for index, cell in enumerate(cells) if index not in skip]
        return self.hash_ids(cells)

    def _where(self, number: int) -> str:
        return f"{self.path}, row {number}"

    def _id(self, number: int, line: bytes) -> str | None:
        if "id" not in self._columns:
            return None
        cell = self._cell(number, line, self._columns["id"])
        if cell is None:
            return None
        return cell.strip() or _fact_id({"id": cell}, self._where(number), 0)  # raises: blank

    def _numbered_id(self, number: int, record: int) -> str:
        return str(record)

    def _term(self, number: int, line: bytes, name: str) -> str:
        cell = self._cell(number, line, self._columns[name])
        if not (text := (cell or "").strip()):
            # Raises: missing (the record number only names an id, unused here).
            table_fact(self._fields(number, line), self.header, self.path, number, 0,
                       self.dataset)
        return text[:MAX_TERM_CHARS]

    def _label(self, number: int, line: bytes) -> str:
        at = self._columns.get("label")
        cell = None if at is None else self._cell(number, line, at)
        return label_stratum(label_word(cell, self._where(number), TriplesError))

    def _fact(self, record: int, number: int, line: bytes) -> Fact:
        return table_fact(self._fields(number, line), self.header, self.path, number, record,
                          self.dataset)


__all__ = ["JsonLinesSampler", "RecordSampler", "TableSampler", "record_source"]
