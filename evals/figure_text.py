"""Figures draw the names they are given as plain text, never as TeX math.

Dataset, run, model, strategy and cluster names come from users and their files.
matplotlib reads ``$...$`` in a text as mathtext and fails on what it cannot parse (a
dollar sign, an unknown command, another dollar sign), or hands every text to LaTeX when
``text.usetex`` is on. Every figure of kgcheck is built and saved under ``plain_text``:
texts are drawn as they are, and the numbers on the axes are written without mathtext
too, whatever the user's matplotlib settings say.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

__all__ = ["PLAIN_TEXT", "plain_text", "plain_text_settings"]

PLAIN_TEXT: dict[Any, Any] = {"text.parse_math": False, "text.usetex": False,
              "axes.formatter.use_mathtext": False}

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def plain_text_settings() -> Iterator[None]:
    """Within the block, matplotlib draws every text as plain text."""
    # Imported here: importing matplotlib costs a command's start a noticeable time.
    import matplotlib

    with matplotlib.rc_context(PLAIN_TEXT):
        yield


def plain_text(draw: Callable[P, R]) -> Callable[P, R]:
    """Run a figure-drawing function under ``plain_text_settings``.

    A text keeps the setting it was created with, so a figure built here and saved later
    still shows its names as plain text.
    """

    @functools.wraps(draw)
    def drawn(*args: P.args, **kwargs: P.kwargs) -> R:
        with plain_text_settings():
            return draw(*args, **kwargs)

    return drawn
