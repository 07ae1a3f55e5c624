"""``python -m kgcheck.cli``: the same as the ``kgcheck`` command."""

from kgcheck.cli.main import app

app()
