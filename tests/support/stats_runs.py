"""Recorded DKA runs of two models over the same FactBench facts, made by `kgcheck run`."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kgcheck.cli import app

MODELS = ("gemma2:9b", "qwen2.5:7b")


def make_replay_run(out: Path, model: str, *, limit: int = 120, dataset: str = "factbench",
                    extra: tuple[str, ...] = ()) -> Path:
    """Run DKA with the study's recorded answers of ``model`` on a seeded sample."""
    result = CliRunner().invoke(app, [
        "run", "--dataset", dataset, "--method", "dka", "--model", f"replay:{model}",
        "--sample", str(limit), "--seed", "1", "--out", str(out), "--no-cache",
        "--no-progress", *extra])
    assert result.exit_code == 0, result.output
    return out
