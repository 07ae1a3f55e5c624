"""Run folders made as a user makes them: `kgcheck run` on a file of facts."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kgcheck.cli import app

runner = CliRunner()


def cli_run(kg: Path, model: str, out: Path, *extra: str) -> Path:
    """Check the facts of ``kg`` with ``model`` by `kgcheck run ... EXTRA`; return ``out``."""
    result = runner.invoke(app, ["run", "--triples", str(kg), "--model", model, "--out",
                                 str(out), "--no-progress", *extra])
    assert result.exit_code == 0, result.output
    return out
