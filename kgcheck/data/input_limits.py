"""The caps on what kgcheck reads from a user's files: lines, JSON documents, names, texts.

Every cap is a setting read from the environment when it is used (so a child process and a
test see the value set for them), with a default far above what real inputs hold:

- ``$KGCHECK_MAX_LINE_BYTES`` (1 MiB): a line of a JSON Lines, CSV or TSV input;
- ``$KGCHECK_MAX_JSON_BYTES`` (64 MiB): a JSON document read whole (a study's results file);
- ``$KGCHECK_MAX_JSON_DEPTH`` (64): how deeply a JSON value may nest;
- ``$KGCHECK_MAX_NAME_CHARS`` (1,000): a fact id, a model's, method's or dataset's name;
- ``$KGCHECK_MAX_TEXT_CHARS`` (100,000): a free text kgcheck stores (an imported answer).

``bounded_lines`` reads a file line by line without ever holding more than the cap of one
line: a longer line is refused with one line naming the file and the line number.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["JSON_BYTES", "JSON_DEPTH", "LINE_BYTES", "NAME_CHARS", "TEXT_CHARS", "Cap",
           "bounded_lines", "checked_text"]


@dataclass(frozen=True)
class Cap:
    """A limit on an input, its environment variable and its default."""

    env: str
    default: int
    unit: str

    def value(self, error: type[Exception] = ValueError) -> int:
        """Return the cap: the environment variable's whole number if set, else the default.

        A value that is no whole number of at least 1 raises ``error`` naming the variable.
        """
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        try:
            value = int(raw.replace("_", ""))
        except ValueError:
            value = 0
        if value < 1:
            raise error(f"${self.env}={raw!r}: expected a whole number of {self.unit}, "
                        "at least 1")
        return value

    def hint(self) -> str:
        """Say how to raise the cap, for an error message."""
        return f"${self.env} raises the cap"


LINE_BYTES = Cap("KGCHECK_MAX_LINE_BYTES", 2**20, "bytes")
JSON_BYTES = Cap("KGCHECK_MAX_JSON_BYTES", 64 * 2**20, "bytes")
JSON_DEPTH = Cap("KGCHECK_MAX_JSON_DEPTH", 64, "levels")
NAME_CHARS = Cap("KGCHECK_MAX_NAME_CHARS", 1_000, "characters")
TEXT_CHARS = Cap("KGCHECK_MAX_TEXT_CHARS", 100_000, "characters")


def bounded_lines(fh: IO[bytes], where: str | Path, error: type[ValueError],
                  first_line: int = 1) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number, line)`` of a binary file, each line at most the line cap long.

    A line is read with ``readline(cap + 1)``, so a longer one is never held whole: it
    raises ``error`` naming ``where`` and the line. Lines keep their line ends.
    """
    limit = LINE_BYTES.value()
    number = first_line - 1
    while line := fh.readline(limit + 1):
        number += 1
        if len(line) > limit and not (len(line) == limit + 1 and line.endswith(b"\n")):
            raise error(f"{where}, line {number}: longer than {limit:,} bytes; a line holds "
                        f"one record ({LINE_BYTES.hint()})")
        yield number, line


def checked_text(value: str, cap: Cap, what: str, where: str, error: type[ValueError]) -> str:
    """Return ``value`` if it is at most the cap long, else raise ``error`` naming ``where``."""
    limit = cap.value()
    if len(value) > limit:
        raise error(f"{where}: {what} is {len(value):,} characters long, more than "
                    f"{limit:,} ({cap.hint()})")
    return value
