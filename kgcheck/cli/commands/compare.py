"""``kgcheck compare``: two runs on the facts both checked, with a paired test and intervals."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import Command, app, console, err_console, user_errors

# Disagreements printed; the rest go to --disagreements FILE.
SHOWN = 20


@app.command("compare", cls=Command)
@user_errors
def compare(
    run_a: Annotated[Path, typer.Argument(metavar="RUN_A", help="A folder written by "
                                          "`kgcheck run`.")],
    run_b: Annotated[Path, typer.Argument(metavar="RUN_B", help="Another run folder, over "
                                          "the same facts.")],
    json_file: Annotated[Path | None, typer.Option(
        "--json", help="Also write the result as JSON to this file.")] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 10_000,
    confidence: Annotated[float, typer.Option(help="Confidence of the intervals.")] = 0.95,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap: same seed, same "
                                      "intervals.")] = 0,
    disagreements: Annotated[Path | None, typer.Option(
        help="Write every fact the runs answer differently to this CSV file.")] = None,
) -> None:
    """Compare two runs: McNemar's exact test and paired bootstrap intervals of A - B."""
    # Imported on use: the CLI starts without numpy and scipy.
    from kgcheck import api

    result = api.compare(run_a, run_b, resamples=resamples, confidence=confidence, seed=seed,
                         json_out=json_file, disagreements_out=disagreements,
                         warn=lambda m: err_console.print(f"warning: {m}", highlight=False))
    console.print(api.comparison_text(result, shown=SHOWN), highlight=False, soft_wrap=True)
    if json_file is not None:
        err_console.print(f"JSON: {json_file}", highlight=False)
    if disagreements is not None:
        err_console.print(f"{len(result.disagreements)} disagreements: {disagreements}",
                          highlight=False)
