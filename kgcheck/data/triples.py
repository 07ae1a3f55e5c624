"""Read a user's own facts: CSV, TSV or JSON Lines with subject, predicate, object, or RDF.

Optional columns: ``id`` (default: the row number) and ``label`` (a label word, as
``kgcheck.data.labels`` reads it: T/F, true/false, 1/0, ...; empty or idk/na: unlabelled).
RDF files (N-Triples, N-Quads, Turtle, TriG, RDF/XML) go to ``kgcheck.data.rdf``. Every
format may be gzipped (``kg.nt.gz``). Facts are yielded one at a time, so that a sample of a
large file never holds the file in memory. A malformed row is an error naming the file and
the row, never a silent skip or a silently shortened fact.
"""

from __future__ import annotations

import csv
import gzip
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from kgcheck.data.facts import Fact, checked_fact_id
from kgcheck.data.input_limits import bounded_lines
from kgcheck.data.labels import label_word
from kgcheck.data.rdf import RDF_SUFFIXES, RdfReader
from kgcheck.data.sources import (
    TriplesError,
    base_name,
    check_input,
    json_objects,
    open_binary,
)

REQUIRED = ("subject", "predicate", "object")
TABLE_SUFFIXES = (".csv", ".tsv")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
SUFFIXES = (*TABLE_SUFFIXES, *JSONL_SUFFIXES, *RDF_SUFFIXES)
QUOTING_HINT = 'a field holding the delimiter must be quoted, e.g. "Paris, France"'

__all__ = ["TriplesError", "iter_triples", "read_triples", "repeated_id", "unique_ids"]


def _fact_id(row: dict[str, Any], where: str, row_number: int) -> str:
    if "id" not in row or row["id"] is None:
        return str(row_number)
    text = str(row["id"]).strip()  # 0 is an id like any other
    if not text:
        raise TriplesError(f"{where}: id is blank; give every row an id or leave the id "
                           "out (then the row number is the id)")
    return checked_fact_id(text, where, TriplesError)


def term_text(row: dict[str, Any], name: str) -> str:
    """Return a row's term as its fact holds it (stripped; empty when missing)."""
    value = row.get(name)
    return "" if value is None else str(value).strip()


def _fact(row: dict[str, Any], where: str, row_number: int, dataset: str) -> Fact:
    terms = [term_text(row, k) for k in REQUIRED]
    missing = [k for k, term in zip(REQUIRED, terms, strict=True) if not term]
    if missing:
        raise TriplesError(f"{where}: missing {', '.join(missing)}")
    return Fact.from_triple(_fact_id(row, where, row_number), dataset, terms,
                            label_word(row.get("label"), where, TriplesError))


def decode_line(raw: bytes, path: str | Path, number: int) -> str:
    """Decode line ``number`` of a text file, naming the line when its bytes are not text."""
    if b"\x00" in raw:
        raise TriplesError(f"{path}, line {number}: holds NUL bytes, so it is a binary "
                           "file, not text; give a CSV, TSV or JSON Lines file")
    try:
        return raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise TriplesError(
            f"{path}, line {number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
            f"column {exc.start + 1}); save the file as UTF-8") from None


def _text_lines(fh: IO[bytes], path: str | Path, first_line: int = 1) -> Iterator[str]:
    """Decode a file line by line, so that bad bytes are reported with their line.

    A line longer than the line cap (``input_limits.LINE_BYTES``) is refused unread.
    """
    number = first_line - 1
    try:
        for number, raw in bounded_lines(fh, path, TriplesError, first_line):  # noqa: B007 - the count is the location
            yield decode_line(raw, path, number)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise TriplesError(f"{path}, line {number + 1}: broken gzip data ({exc})") from None


def table_kind(delimiter: str) -> str:
    """Name the format of a table with this delimiter."""
    return "TSV" if delimiter == "\t" else "CSV"


def table_header(fields: list[str], path: Path) -> list[str]:
    """Read a table's header row into lower-cased column names; refuse repeated or lacking ones."""
    header = [h.strip().lower() for h in fields]
    seen: set[str] = set()
    for name in header:
        if name and name in seen:
            raise TriplesError(f"{path}, row 1: the header names column {name!r} "
                               "twice; give each column once")
        seen.add(name)
    absent = [k for k in REQUIRED if k not in header]
    if absent:
        raise TriplesError(
            f"{path}: header lacks {', '.join(absent)} (found: {', '.join(header)})")
    return header


def blank_row(fields: list[str]) -> bool:
    """Whether a table row holds nothing (it is skipped, and gets no row id)."""
    return not fields or not any(f.strip() for f in fields)


def table_fact(fields: list[str], header: list[str], path: Path, row: int, record: int,
               dataset: str) -> Fact:
    """Build the fact of table row ``row`` (the header is row 1), the ``record``-th fact."""
    if len(fields) > len(header) and any(f.strip() for f in fields[len(header):]):
        raise TriplesError(f"{path}, row {row}: {len(fields)} fields but the header has "
                           f"{len(header)}; {QUOTING_HINT}")
    return _fact(dict(zip(header, fields, strict=False)), f"{path}, row {row}", record, dataset)


def table_error(exc: csv.Error, path: Path, row: int, delimiter: str) -> TriplesError:
    """Turn the csv module's error on table row ``row`` into one naming the file and row."""
    detail = str(exc)
    if "field limit" in detail:
        detail = (f"a field is longer than {csv.field_size_limit():,} characters "
                  "(128 KiB); an unclosed quote makes the rest of the file one field")
    return TriplesError(f"{path}, row {row}: malformed {table_kind(delimiter)} ({detail})")


def _table_rows(path: Path, dataset: str, delimiter: str) -> Iterator[Fact]:
    with open_binary(path) as fh:
        reader = csv.reader(_text_lines(fh, path), delimiter=delimiter)
        rows = records = 0
        try:
            header = table_header(next(reader, []), path)
            for fields in reader:
                rows += 1
                if blank_row(fields):
                    continue
                records += 1
                # The header is row 1, as in a spreadsheet.
                yield table_fact(fields, header, path, rows + 1, records, dataset)
        except csv.Error as exc:
            raise table_error(exc, path, rows + 2, delimiter) from None


def _jsonl_rows(path: Path, dataset: str) -> Iterator[Fact]:
    with open_binary(path) as fh:
        yield from jsonl_facts(fh, path, dataset)


def jsonl_facts(fh: IO[bytes], path: str | Path, dataset: str, first_line: int = 1
                ) -> Iterator[Fact]:
    """Read the facts of JSON Lines text that starts at line ``first_line`` of ``path``."""
    for n, row in json_objects(_text_lines(fh, path, first_line), path,
                               first_line=first_line):
        yield _fact(row, f"{path}, line {n}", n, dataset)


def repeated_id(path: str | Path, fact_id: str, earlier: int, n: int) -> TriplesError:
    """Say that facts ``earlier`` and ``n`` of a file (counted from 1) share an id."""
    return TriplesError(f"{path}: fact id {fact_id!r} appears more than once (facts "
                        f"{earlier:,} and {n:,}); ids must be unique")


def unique_ids(facts: Iterable[Fact], path: Path) -> Iterator[Fact]:
    """Refuse a second fact with an id already seen (one dictionary look-up per fact)."""
    first: dict[str, int] = {}
    for n, fact in enumerate(facts, start=1):
        earlier = first.setdefault(fact.id, n)
        if earlier != n:
            raise repeated_id(path, fact.id, earlier, n)
        yield fact


def iter_triples(path: str | Path, dataset: str = "", *, reader: RdfReader | None = None
                 ) -> Iterator[Fact]:
    """Yield facts from a triples file one by one; ``dataset`` defaults to the file stem.

    For RDF, ``reader`` may be an ``RdfReader`` of the file (to read its names afterwards).
    """
    path = check_input(path)
    stem, suffix = base_name(path)
    dataset = dataset or stem
    if suffix in RDF_SUFFIXES:
        yield from (reader or RdfReader(path, dataset))
    elif suffix in TABLE_SUFFIXES:
        yield from unique_ids(_table_rows(path, dataset, "\t" if suffix == ".tsv" else ","),
                              path)
    elif suffix in JSONL_SUFFIXES:
        yield from unique_ids(_jsonl_rows(path, dataset), path)
    else:
        raise TriplesError(f"{path}: unsupported format {suffix!r}; use "
                           f"{', '.join(SUFFIXES)} (optionally .gz)")


def read_triples(path: str | Path, dataset: str = "", *, base_iri: str | None = None
                 ) -> list[Fact]:
    """Load every fact of a triples file (CSV, TSV, JSON Lines or RDF).

    ``base_iri`` resolves the relative IRIs of a Turtle, TriG or RDF/XML file (by default
    the file's own URI).
    """
    reader = None
    path = check_input(path)
    if base_name(path)[1] in RDF_SUFFIXES:
        reader = RdfReader(path, dataset or base_name(path)[0], base_iri)
    facts = list(iter_triples(path, dataset, reader=reader))
    if not facts:
        raise TriplesError(f"{path}: no facts found")
    if reader is None:
        return facts
    # A triple written twice is one fact (ids are the triples' hashes).
    return reader.named(list({f.id: f for f in facts}.values()))
