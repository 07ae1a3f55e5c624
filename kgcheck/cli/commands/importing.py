"""``kgcheck import``: verdicts made elsewhere as a run folder (report, export, estimate)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import Command, app, console, user_errors

Opt = typer.Option


@app.command("import", cls=Command)
@user_errors
def import_(
    file: Annotated[Path, typer.Argument(
        metavar="FILE", help="A FactCheck result file (.json, any name) or a .csv/.jsonl "
        "with fact_id,label.")],
    out: Annotated[Path, Opt(help="The run folder to write.")],
    triples: Annotated[Path | None, Opt(help="The facts (and gold labels): your triples "
                                        "file.")] = None,
    dataset: Annotated[str | None, Opt(help="The facts: a dataset (default: the one the "
                                       "file name gives).")] = None,
    data: Annotated[str | None, Opt(help="FactCheck data in the upstream layout.")] = None,
    fresh: Annotated[bool, Opt(help="Replace what --out holds.")] = False,
) -> None:
    """Import verdicts into a run folder and score them like a run."""
    from kgcheck import api
    from kgcheck.cli.commands.run import print_summary

    result = api.import_verdicts(file, out, triples=triples, dataset=dataset, data=data,
                                 fresh=fresh)
    print_summary(result.summary)
    console.print(f"verdicts: {result.out_dir / 'verdicts.jsonl'}  summary: "
                  f"{result.out_dir / 'summary.json'}")
