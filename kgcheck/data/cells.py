"""Keep spreadsheet formulas out of the CSV files kgcheck writes, and read them back exactly.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is run as a
formula by Excel, LibreOffice and Google Sheets (``=HYPERLINK(...)``, ``+cmd|...``): triple
values and review notes are untrusted text. As OWASP recommends, such a cell is written
with a leading apostrophe, which spreadsheets show as text. A plain number (``-12.5``) is no
formula and stays as it is. ``restore`` undoes ``neutralise`` exactly: a value that already
starts with apostrophes before such a character gets one more, so reading strips one.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["neutralise", "neutralise_row", "restore"]

_FORMULA = re.compile(r"'*[=+\-@\t\r]")
_ESCAPED = re.compile(r"'+[=+\-@\t\r]")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def neutralise(value: Any) -> Any:
    """Return a cell value that no spreadsheet runs as a formula (non-strings unchanged)."""
    if isinstance(value, str) and _FORMULA.match(value) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def neutralise_row(row: dict[str, Any]) -> dict[str, Any]:
    """Return a CSV row with every cell neutralised."""
    return {key: neutralise(value) for key, value in row.items()}


def restore(value: str) -> str:
    """Return the value ``neutralise`` was given for a cell read back from a CSV file."""
    return value[1:] if _ESCAPED.match(value) and not _NUMBER.fullmatch(value[1:]) else value
