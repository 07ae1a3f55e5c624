"""``kgcheck report``: the study's tables for your own runs, beside the study's rows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import Command, app, console, user_errors


@app.command("report", cls=Command)
@user_errors
def report(
    run_dirs: Annotated[list[Path], typer.Argument(
        metavar="RUN_DIR...",
        help="Folders written by `kgcheck run` (each with run.json and verdicts.jsonl).")],
    out: Annotated[Path, typer.Option(help="Folder for tables.md, tables.json and plots/.")]
    = Path("runs/report"),
    with_recorded: Annotated[bool, typer.Option(
        help="Add the study's rows for the same datasets and methods, over the same facts.")]
    = False,
    data: Annotated[str | None, typer.Option(
        help="FactCheck data for --with-recorded (default: the vendored copy).")] = None,
    plots: Annotated[bool, typer.Option(help="Draw the figures (PNG and SVG).")] = True,
    ci: Annotated[bool, typer.Option(
        "--ci", help="Add 95% bootstrap intervals of accuracy, F1(T), F1(F) and macro-F1.")]
    = False,
) -> None:
    """Build tables 5 to 8 (and the figures) from run folders."""
    from kgcheck.api import report as build_report

    written = build_report(run_dirs, out, with_recorded=with_recorded, data=data, plots=plots,
                           ci=ci)
    console.print(f"{len(run_dirs)} runs, {len(written.records)} figures")
    console.print(f"tables: {written.markdown}  {written.json}")
    if written.plots:
        console.print(f"plots: {len(written.plots)} files in {written.plots[0].parent}")
    for row in written.reviews:
        rate = "-" if row["overturn_rate"] is None else f"{row['overturn_rate']:.0%}"
        console.print(f"reviewed {row['run']} {row['method']} {row['model']}: "
                      f"{row['reviewed']} of {row['verdicts']}, overturned "
                      f"{row['overturned']} of {row['confirmed'] + row['overturned']} ({rate})",
                      highlight=False)
