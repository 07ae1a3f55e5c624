"""Open a user's input file: one check for what the path is, and the error every reader raises.

A missing path, a folder or a device (``/dev/zero``) is named as such before any reading;
``.gz`` files are read through gzip, so every format can be compressed.
"""

from __future__ import annotations

import gzip
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, cast

from kgcheck.data.input_limits import bounded_lines
from kgcheck.data.safe_json import loads


class TriplesError(ValueError):
    """A triples file (or endpoint) that cannot be read as facts; the message says where."""


def check_input(path: str | Path) -> Path:
    """Return ``path`` when it is a regular file, else raise a precise ``TriplesError``."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise TriplesError(f"{path}: file not found") from None
    except OSError as exc:
        raise TriplesError(f"{path}: cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise TriplesError(f"{path}: is a folder, not a file; give the triples file in it")
    if not stat.S_ISREG(mode):
        raise TriplesError(f"{path}: is not a regular file (a device, pipe or socket); "
                           "give a file of triples")
    return path


def base_name(path: Path) -> tuple[str, str]:
    """Return the file's stem and its format suffix, looking through a ``.gz`` ending."""
    name = path.name
    if name.lower().endswith(".gz"):
        name = name[:-3]
    stem, dot, suffix = name.rpartition(".")
    return (stem, "." + suffix.lower()) if dot and stem else (name, "")


def open_binary(path: Path) -> IO[bytes]:
    """Open a file for reading bytes, decompressing ``.gz`` files on the fly."""
    if path.name.lower().endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def json_objects(lines: Iterable[str], path: str | Path, error: type[ValueError] = TriplesError,
                 first_line: int = 1) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line of a JSON Lines file.

    A line that is not JSON within ``safe_json``'s bounds, or not a JSON object, raises
    ``error`` naming the file and line (``first_line``: the number of the first of ``lines``
    in the file).
    """
    for n, line in enumerate(lines, start=first_line):
        if not line.strip():
            continue
        row = loads(line, f"{path}, line {n}", error)
        if not isinstance(row, dict):
            raise error(f"{path}, line {n}: expected a JSON object")
        yield n, row


def text_lines(path: Path, error: type[ValueError] = TriplesError) -> Iterator[str]:
    """Yield the lines of a UTF-8 text file (``.gz`` read through), each within the line cap.

    A line over the cap (``input_limits.LINE_BYTES``) or not UTF-8 raises ``error`` naming
    the file and the line; line ends are kept, as a text file's iteration keeps them.
    """
    with open_binary(path) as fh:
        for number, raw in bounded_lines(fh, path, error):
            try:
                yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise error(f"{path}, line {number}: not UTF-8 text (byte "
                            f"0x{raw[exc.start]:02x} at column {exc.start + 1}); save the "
                            "file as UTF-8") from None
