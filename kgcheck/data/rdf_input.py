"""The one gate every RDF parse in kgcheck goes through, so that its guards always apply.

Two kinds of RDF can make a small file reach far: RDF/XML whose DTD entities expand without
bound (``EntityGuard`` checks them while the parser reads), and JSON-LD whose ``@context``
names a document to load (a URL, or a ``file:`` path). pyoxigraph's JSON-LD parser loads
no context it is not handed, and none is handed here: such a context is refused with one
line naming the file. ``parse_rdf`` streams a file's quads and ``load_rdf`` fills a store;
both wrap their input the same way. ``tests/unit/test_rdf_gate.py`` fails if a parser of RDF or
XML is called anywhere else.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

import pyoxigraph as ox

from kgcheck.data.sources import TriplesError
from kgcheck.data.xml_guard import EntityGuard

__all__ = ["RDF_FILE_FORMATS", "load_rdf", "parse_rdf", "rdf_file_format"]

# The formats of a rule, shape or KG file, by extension (``.gz`` is looked through).
RDF_FILE_FORMATS = {
    "nt": ox.RdfFormat.N_TRIPLES,
    "nq": ox.RdfFormat.N_QUADS,
    "ttl": ox.RdfFormat.TURTLE,
    "trig": ox.RdfFormat.TRIG,
    "n3": ox.RdfFormat.N3,
    "rdf": ox.RdfFormat.RDF_XML,
    "xml": ox.RdfFormat.RDF_XML,
    "owl": ox.RdfFormat.RDF_XML,
    "jsonld": ox.RdfFormat.JSON_LD,
    "json": ox.RdfFormat.JSON_LD,
}
# pyoxigraph's words when a JSON-LD document asks for a context to be loaded.
_CONTEXT_LOAD = "LoadDocumentCallback"

Source = IO[bytes] | bytes


def rdf_file_format(path: str | Path) -> ox.RdfFormat | None:
    """Return the RDF format a file's extension names (None: not an RDF extension)."""
    name = Path(path).name.lower().removesuffix(".gz")
    suffix = Path(name).suffix.lstrip(".")
    return RDF_FILE_FORMATS.get(suffix or "ttl")


def _guarded(source: Source, rdf_format: ox.RdfFormat, path: str | Path) -> Source:
    if rdf_format != ox.RdfFormat.RDF_XML:
        return source
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    return cast(IO[bytes], EntityGuard(stream, Path(path)))


def _refuse_context(exc: SyntaxError, path: str | Path) -> None:
    if _CONTEXT_LOAD in str(exc):
        raise TriplesError(
            f"{path}: refused: its JSON-LD @context names a document to load (a URL or a "
            "file); kgcheck loads none: write the context into the file") from None


def parse_rdf(source: Source, rdf_format: ox.RdfFormat, path: str | Path, *,
              base_iri: str | None = None) -> Iterator[ox.Quad]:
    """Yield the quads of RDF read from ``source``, guarded (``path`` names it in errors).

    Relative IRIs resolve against ``base_iri`` (None: refused, as the parser does).

    Raises:
        TriplesError: A guard refused the input (one line naming ``path``).
        SyntaxError: The input is malformed (pyoxigraph's error, with its line).

    """
    try:
        yield from ox.parse(_guarded(source, rdf_format, path), rdf_format, base_iri=base_iri)
    except SyntaxError as exc:
        _refuse_context(exc, path)
        raise


def load_rdf(store: ox.Store, source: Source, rdf_format: ox.RdfFormat,
             path: str | Path) -> None:
    """Load RDF read from ``source`` into ``store`` (streamed), guarded as ``parse_rdf``.

    Raises:
        TriplesError: A guard refused the input (one line naming ``path``).
        SyntaxError: The input is malformed (pyoxigraph's error, with its line).

    """
    try:
        store.bulk_load(_guarded(source, rdf_format, path), rdf_format)
    except SyntaxError as exc:
        _refuse_context(exc, path)
        raise
