"""Entry point of the ``kgcheck`` console script.

The commands are imported when they run (``kgcheck.cli.app.LazyGroup``), not here.
"""

from __future__ import annotations

from kgcheck.cli.app import app

__all__ = ["app"]

if __name__ == "__main__":
    app()
