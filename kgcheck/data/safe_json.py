"""Read and write JSON that kgcheck did not make itself: one loader with bounds, one writer.

``loads`` is kgcheck's one way to parse JSON it reads from a file, a line or a peer. On top
of the standard parser it refuses, with one line naming the input:

- a document longer than ``$KGCHECK_MAX_JSON_BYTES`` (``load_file`` checks before reading);
- nesting deeper than ``$KGCHECK_MAX_JSON_DEPTH`` levels (the standard parser would raise
  RecursionError, a traceback, at about a thousand);
- ``NaN``, ``Infinity`` and numbers out of a float's range (``1e999999``): they would be
  written back as ``Infinity``, which is not JSON, and every later reader would fail;
- integers of more than ``MAX_INT_DIGITS`` digits (Python refuses 4,300 on its own, in an
  error that names no input; far fewer are never a count, a time or an id).

``dumps`` writes JSON with ``allow_nan=False``: a non-finite number is an error at the
writer, never invalid JSON in a run's files.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from kgcheck.data.input_limits import JSON_BYTES, JSON_DEPTH

__all__ = ["MAX_INT_DIGITS", "JsonRefused", "dumps", "load_file", "loads", "parse"]

MAX_INT_DIGITS = 100

# What depth is measured on: strings (escapes included) go first, then all but brackets.
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
# Brackets measured at once: bounds the arrays of a long text's measuring.
_CHUNK = 2**20


class JsonRefused(json.JSONDecodeError):
    """JSON out of kgcheck's bounds; ``reason`` says what, not where.

    A ``JSONDecodeError``, so that a reader that handles malformed JSON handles it too.
    """

    def __init__(self, reason: str, doc: str = "", pos: int = 0) -> None:
        super().__init__(reason, doc, pos)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRefused(f"the number {_short(text)} is out of range (not a finite number)")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise JsonRefused(f"an integer of {digits:,} digits (more than {MAX_INT_DIGITS})")
    return int(text)


def _no_constant(name: str) -> Any:
    raise JsonRefused(f"{name} is not a JSON number (only finite numbers are accepted)")


def _short(text: str) -> str:
    return text if len(text) <= 24 else text[:21] + "..."


def _check_depth(text: str, limit: int) -> None:
    # The count of opening brackets bounds the depth: most texts need no measuring at all.
    if text.count("[") + text.count("{") <= limit:
        return
    import numpy as np  # only for the few texts with many brackets

    # The depth after each bracket outside strings is the running sum of +1 (opening) and
    # -1 (closing), computed by numpy in chunks: never a step per character in Python.
    skeleton = _NOT_BRACKETS.sub("", _STRINGS.sub("", text)).encode("ascii")
    depth = 0
    for start in range(0, len(skeleton), _CHUNK):
        marks = np.frombuffer(skeleton, dtype=np.uint8, count=min(_CHUNK, len(skeleton) - start),
                              offset=start)
        steps = np.where((marks == ord("[")) | (marks == ord("{")), 1, -1)
        running = np.cumsum(steps, dtype=np.int64) + depth
        if running.max() > limit:
            raise JsonRefused(f"JSON nested deeper than {limit} levels ({JSON_DEPTH.hint()})")
        depth = int(running[-1])


def parse(text: str | bytes) -> Any:
    """Parse a JSON text within kgcheck's bounds, as ``json.loads`` would.

    Malformed JSON raises ``json.JSONDecodeError``; JSON out of bounds ``JsonRefused`` (one),
    whose ``reason`` says what is wrong.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise JsonRefused(f"not UTF-8 text (byte 0x{text[exc.start]:02x} at offset "
                              f"{exc.start})") from None
    if len(text) > (limit := JSON_BYTES.value()):
        raise JsonRefused(f"JSON text of {len(text):,} characters, more than {limit:,} "
                          f"({JSON_BYTES.hint()})")
    _check_depth(text, JSON_DEPTH.value())
    try:
        return json.loads(text, parse_float=_finite_float, parse_int=_bounded_int,
                          parse_constant=_no_constant)
    except RecursionError:
        # Only when the caller's own stack is already deep: the depth check came first.
        raise JsonRefused("JSON nested too deeply to read") from None


def loads(text: str | bytes, where: str | Path, error: type[ValueError] = ValueError) -> Any:
    """Parse a JSON text; anything wrong raises ``error`` as one line naming ``where``."""
    try:
        return parse(text)
    except JsonRefused as exc:
        raise error(f"{where}: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        at = f" at line {exc.lineno}, column {exc.colno}" if exc.doc.strip().count("\n") else ""
        raise error(f"{where}: malformed JSON ({exc.msg}{at})") from None


def load_file(path: str | Path, error: type[ValueError] = ValueError) -> Any:
    """Read and parse a JSON file, refusing one over the size cap before reading it."""
    path = Path(path)
    limit = JSON_BYTES.value()
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise error(f"{path}: larger than {limit:,} bytes, the cap on a JSON file "
                    f"({JSON_BYTES.hint()})")
    return loads(data, path, error)


def dumps(value: Any, *, indent: int | None = None) -> str:
    """Write ``value`` as JSON; a NaN or an infinity raises ValueError instead of bad JSON."""
    return json.dumps(value, indent=indent, allow_nan=False)
