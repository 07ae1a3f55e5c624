"""``kgcheck sweep``: a grid of strategies x models x prompts x inputs x settings, ranked."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kgcheck.cli.app import Command, app, console, err_console, user_errors


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@app.command("sweep", cls=Command)
@user_errors
def sweep(
    config: Annotated[Path, typer.Argument(
        metavar="CONFIG", help="Sweep file (.toml or .yaml): the grid.")],
    out: Annotated[Path | None, typer.Option(
        help="Sweep folder (default: the file's `out`, else runs/<file name>).")] = None,
    parallel: Annotated[int | None, typer.Option(
        help="Cells run at once (default: the file's `parallel`, else 1).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Ask the models every time.")]
    = False,
    plots: Annotated[bool, typer.Option(help="Draw the leaderboard plots.")] = True,
    check: Annotated[bool, typer.Option("--check", help="Check every cell, list them, and "
                                        "exit without running.")] = False,
) -> None:
    """Run every cell of a sweep as a resumable run folder, then write the leaderboard."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Table

    from kgcheck import api as sweeps

    if parallel is not None and parallel < 1:
        raise ValueError(f"--parallel must be at least 1, got {parallel}")
    spec, out_dir, plans = sweeps.plan_sweep(config, out)
    console.print(f"{len(plans)} cells checked; folder {out_dir}")
    if check:
        for cell, plan in plans:
            console.print(f"  {cell.name}: {len(plan.facts)} facts")
        return
    with Progress(TextColumn("[bold]cells"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[last]}"), TimeElapsedColumn(),
                  console=err_console) as progress:
        task = progress.add_task("cells", total=len(plans), last="")

        def done(cell: Any, row: dict[str, Any]) -> None:
            state = "failed" if row.get("error") else f"macro-F1 {_score(row['macro_f1'])}"
            progress.update(task, advance=1, last=f"{cell.name}: {state}")

        result = sweeps.run_coroutine(sweeps.asweep(spec, out_dir, parallel=parallel,
                                                    cache=not no_cache, plots=plots,
                                                    on_cell=done))
    table = Table(title=f"leaderboard: {config.name}")
    for column in ("#", "group", "strategy", "model", "prompt", "input"):
        table.add_column(column, overflow="fold")
    for column in ("n", "macro-F1", "F1(T)", "F1(F)", "acc", "NA"):
        table.add_column(column, justify="right", no_wrap=True)
    for i, row in enumerate(result.rows, 1):
        table.add_row(str(i), row.get("group") or "-", row["strategy"], row["model"],
                      Path(row["prompt"]).name,
                      row["input"], str(row["n"]), _score(row["macro_f1"]),
                      _score(row["f1_true"]), _score(row["f1_false"]),
                      _score(row["accuracy"]),
                      "-" if row["na_rate"] is None else f"{row['na_rate']:.3f}")
    console.print(table)
    console.print("cells that share a group letter are not significantly different "
                  "(McNemar, Holm)", highlight=False)
    console.print(f"leaderboard: {out_dir / 'tables.md'}  {out_dir / 'leaderboard.json'}")
    for row in result.failed:
        err_console.print(f"[bold red]error:[/] cell {row['cell']}: {row['error']}")
    if result.failed:
        err_console.print(f"{len(result.failed)} of {len(result.rows)} cells failed; run the "
                          "same command again to resume them")
        raise typer.Exit(1)
