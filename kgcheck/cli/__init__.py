"""The ``kgcheck`` command line: the Typer app and its commands (parsing and printing only)."""

from kgcheck.cli.main import app

__all__ = ["app"]
