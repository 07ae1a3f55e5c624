"""``kgcheck reproduce``: the study's tables 5 to 8 and figures from its recorded answers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import app, console, err_console, user_errors


def split_names(value: str | None) -> list[str] | None:
    """Turn ``A,B`` into ``["A", "B"]``; None or blank gives None (all)."""
    if value is None:
        return None
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise ValueError(f"--datasets {value!r}: expected names separated by commas")
    return names


@app.command("reproduce")
@user_errors
def reproduce(
    data: Annotated[str | None, typer.Option(
        help="FactCheck data in the upstream layout (default: the vendored copy).")] = None,
    datasets: Annotated[str | None, typer.Option(
        help="Datasets, comma-separated (default: every dataset with recorded answers).")] = None,
    out: Annotated[Path, typer.Option(help="Folder for tables.md, tables.json and plots/.")]
    = Path("runs/reproduce"),
    plots: Annotated[bool, typer.Option(help="Draw the figures (PNG and SVG).")] = True,
    ci: Annotated[bool, typer.Option(
        "--ci", help="Add 95% bootstrap intervals of accuracy, F1(T), F1(F) and macro-F1 "
        "after the tables (their values stay the study's points).")] = False,
) -> None:
    """Recompute the study's tables and figures from its recorded answers."""
    from kgcheck import api

    def warn(message: str) -> None:
        err_console.print(f"[bold yellow]warning:[/] {message}", highlight=False)

    written = api.reproduce(out, data=data, datasets=split_names(datasets), plots=plots,
                            warn=warn, ci=ci)
    shown = sorted({(r["dataset"], r["method"]) for r in written.records})
    console.print(f"{len(shown)} dataset/method pairs, {len(written.records)} figures")
    console.print(f"tables: {written.markdown}  {written.json}")
    if written.plots:
        console.print(f"plots: {len(written.plots)} files in {written.plots[0].parent}")
