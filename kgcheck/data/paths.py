"""Where kgcheck keeps a project's working files: the one derivation of the ``.kgcheck`` home.

Imported corpora (``corpus.sqlite``), vector indexes (``chroma/``) and Studio's generated
``langgraph.json`` live in ``.kgcheck`` in the current folder, or in ``$KGCHECK_HOME`` when
it is set (``~`` expanded). The answer cache is elsewhere: the user's cache folder
(``kgcheck.providers.cache``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["HOME_ENV", "kgcheck_home"]

HOME_ENV = "KGCHECK_HOME"


def kgcheck_home() -> Path:
    """Return the project's working folder: ``$KGCHECK_HOME``, else ``./.kgcheck``."""
    return Path(os.environ.get(HOME_ENV) or Path.cwd() / ".kgcheck").expanduser()
