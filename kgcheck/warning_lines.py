"""Show kgcheck's own warnings as one line each: ``kgcheck: warning: <message>``.

Python's format (``asyncio/runners.py:118: KgcheckWarning: ...`` and a source line) names
the frame that issued the warning, which for a run is the event loop's, not the script's:
it tells a user nothing. Every warning category kgcheck defines lives in a ``kgcheck.``
module; those are printed as one plain line on the stream Python would use. Other packages'
warnings keep Python's format, and filters (``-W``, ``warnings.simplefilter``) apply as
before: this changes how a warning that is shown looks, not whether it is shown.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, TextIO

__all__ = ["PREFIX", "format_line", "is_own", "show_own_warnings_as_lines"]

PREFIX = "kgcheck: warning: "


def is_own(category: type[Warning]) -> bool:
    """Tell whether ``category`` is one of kgcheck's warnings."""
    return getattr(category, "__module__", "").split(".")[0] == "kgcheck"


def format_line(message: Warning | str) -> str:
    """Return a warning's one line: the prefix and the message, line breaks folded."""
    return PREFIX + " ".join(str(message).split("\n")) + "\n"


def show_own_warnings_as_lines() -> None:
    """Print kgcheck's warnings as one line from now on (installed once; others untouched)."""
    shown = warnings.showwarning
    if getattr(shown, "kgcheck_lines", False):
        return

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if not is_own(category):
            shown(message, category, filename, lineno, file, line)
            return
        target: Any = file if file is not None else sys.stderr
        if target is None:  # pythonw: nowhere to print
            return
        try:
            target.write(format_line(message))
        except OSError:
            pass  # a closed stream: a warning is not worth failing for

    show.kgcheck_lines = True  # type: ignore[attr-defined]
    warnings.showwarning = show
