"""kgcheck's one JSON loader, with bounds, and its one strict JSON writer.

``parse`` (and ``loads``, ``load_file``, which name the input in their errors) is kgcheck's
one way to parse JSON it reads from a file, a line or a peer. On top of the standard parser
it refuses:

- a document longer than ``$KGCHECK_MAX_JSON_BYTES`` (``load_file`` checks before reading);
- nesting deeper than ``$KGCHECK_MAX_JSON_DEPTH`` levels (the standard parser raises
  RecursionError, a traceback, at about 900: caught, and refused the same way);
- ``NaN``, ``Infinity`` and numbers out of a float's range (``1e999999``): they would be
  written back as ``Infinity``, which is not JSON, and every later reader would fail;
- integers of more than ``MAX_INT_DIGITS`` digits (Python refuses 4,300 on its own, in an
  error that names no input; no count, time or id needs a hundred).

``dumps`` writes JSON with ``allow_nan=False``: a non-finite number is an error at the
writer, never invalid JSON in a run's files.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from kgcheck.data.input_limits import JSON_BYTES, JSON_DEPTH

__all__ = ["MAX_INT_DIGITS", "JsonRefused", "dumps", "load_file", "loads", "parse"]

MAX_INT_DIGITS = 100
# Below the depth at which the standard parser raises RecursionError (about 900 levels with
# Python's default limit), so that its refusal states a depth that was truly exceeded.
_PARSER_DEPTH = 500

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


def _too_deep(limit: int) -> JsonRefused:
    return JsonRefused(f"JSON nested deeper than {limit} levels ({JSON_DEPTH.hint()})")


def _check_depth(value: Any, limit: int) -> None:
    """Refuse a parsed value whose containers nest deeper than ``limit``.

    A walk over the containers alone (not the characters), with a stack, not recursion.
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise _too_deep(limit)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, dict | list))


def parse(text: str | bytes, *, nan_constants: bool = False) -> Any:
    """Parse a JSON text within kgcheck's bounds, as ``json.loads`` would.

    Malformed JSON raises ``json.JSONDecodeError``; JSON out of bounds ``JsonRefused`` (one),
    whose ``reason`` says what is wrong. ``nan_constants`` reads ``NaN``, ``Infinity`` and
    ``-Infinity`` as floats, for a reader that turns them into something else (the upstream
    datasets' bare NaN becomes a defect of its fact).
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
    depth = JSON_DEPTH.value()
    try:
        value = json.loads(text, parse_float=_finite_float, parse_int=_bounded_int,
                           parse_constant=float if nan_constants else _no_constant)
    except RecursionError:
        # The parser stops at Python's recursion limit (about 900 levels here): a clean
        # RecursionError, turned into the depth cap's refusal.
        raise _too_deep(min(depth, _PARSER_DEPTH)) from None
    # The count of opening brackets bounds the depth: most texts need no walk at all.
    if isinstance(value, dict | list) and text.count("[") + text.count("{") > depth:
        _check_depth(value, depth)
    return value


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
