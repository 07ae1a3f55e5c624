"""Keep RDF/XML's DTD entities from expanding without bound (the "billion laughs").

The XML parser under pyoxigraph expands every ``<!ENTITY`` a document declares, nested ones
too, and honours a DOCTYPE wherever it appears: nine nested entities in 943 bytes make
gigabytes. ``EntityGuard`` wraps the byte stream the parser reads and checks every
declaration before the parser sees it. Only the kind ontology editors write is accepted: a
plain abbreviation such as ``<!ENTITY owl "http://www.w3.org/2002/07/owl#">`` (no
references inside, no external or parameter entities, at most ``MAX_ENTITY_CHARS``), and the
text all references expand to is counted and capped. Anything else is refused with one line
naming the file. ``kgcheck.data.rdf_input`` applies it to every RDF/XML parse in kgcheck
(``--triples``, ontologies, shapes, the KG files of the rules).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import IO, NoReturn

from kgcheck.data.sources import TriplesError

__all__ = ["MAX_ENTITY_CHARS", "MAX_EXPANSION_CHARS", "EntityGuard"]

MAX_ENTITY_CHARS = 256
MAX_EXPANSION_CHARS = 64 * 1024 * 1024
_MAX_NAME = 64
_MAX_DECLARATION = 1024
# Bytes kept back at the end of each chunk: a reference or the start of a declaration that
# begins before the cut is then whole in what was read.
_HOLD = _MAX_NAME + 16
_DECLARATION = re.compile(rb"<!ENTITY")
_PLAIN = re.compile(rb'<!ENTITY\s+([A-Za-z_][\w.-]{0,63})\s+"([^"&%<>]*)"\s*>')


class EntityGuard:
    """A binary stream that refuses unsafe DTD entities while the parser reads it."""

    def __init__(self, inner: IO[bytes], path: Path, chunk: int = 1 << 16) -> None:
        self._inner = inner
        self._path = path
        self._chunk = chunk
        self._pending = b""
        self._checked = 0  # how many leading bytes of _pending were checked
        self._eof = False
        self._entities: dict[bytes, int] = {}
        self.expanded = 0

    def read(self, size: int = -1) -> bytes:
        """Return the next checked bytes (``b""`` at the end)."""
        while self._checked == 0:
            if not self._eof and len(self._pending) < _HOLD + self._chunk:
                self._fill()
                continue
            cut = len(self._pending) if self._eof else len(self._pending) - _HOLD
            if cut <= 0:
                return b""  # the end, and everything was handed over
            # Checked once: later reads hand over what was checked without scanning again.
            self._checked = self._check(cut)
        count = self._checked if size is None or size < 0 else min(size, self._checked)
        out = self._pending[:count]
        self._pending = self._pending[count:]
        self._checked -= count
        return out

    def readable(self) -> bool:
        """Say that this stream can be read (io's protocol)."""
        return True

    def _fill(self) -> None:
        data = self._inner.read(self._chunk)
        if data:
            self._pending += data
        else:
            self._eof = True

    def _check(self, cut: int) -> int:
        """Check the declarations and references starting before ``cut``; return the cut."""
        checked = 0
        while (found := _DECLARATION.search(self._pending, checked)) and found.start() < cut:
            start = found.start()
            while (end := self._pending.find(b">", start)) < 0 and not self._eof and \
                    len(self._pending) - start < _MAX_DECLARATION:
                self._fill()
            plain = _PLAIN.fullmatch(self._pending[start:end + 1]) if end >= 0 else None
            if not plain or len(plain.group(2)) > MAX_ENTITY_CHARS:
                self._refuse()
            self._entities[plain.group(1)] = len(plain.group(2))
            checked = end + 1
            cut = max(cut, checked)
        if self._entities:
            for name, size in self._entities.items():
                # References starting before the cut (whole in the bytes held back).
                token = b"&" + name + b";"
                end = min(len(self._pending), cut + len(token) - 1)
                self.expanded += size * self._pending.count(token, 0, end)
            if self.expanded > MAX_EXPANSION_CHARS:
                raise TriplesError(
                    f"{self._path}: refused: its DTD entities expand to over "
                    f"{MAX_EXPANSION_CHARS:,} characters (write the IRIs out, or convert "
                    "the file to Turtle or N-Triples)")
        return cut

    def _refuse(self) -> NoReturn:
        raise TriplesError(
            f"{self._path}: refused: a DTD entity that is nested, external, a parameter "
            f"entity or over {MAX_ENTITY_CHARS} characters (these can expand without bound; "
            'plain ones like <!ENTITY owl "http://www.w3.org/2002/07/owl#"> are read)')
