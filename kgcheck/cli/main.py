"""Entry point of the ``kgcheck`` console script."""

from __future__ import annotations

import importlib
import pkgutil

from kgcheck.cli import commands
from kgcheck.cli.app import app

# Each module in kgcheck/cli/commands registers its commands on `app` when imported.
for _module in pkgutil.iter_modules(commands.__path__):
    importlib.import_module(f"{commands.__name__}.{_module.name}")

__all__ = ["app"]

if __name__ == "__main__":
    app()
