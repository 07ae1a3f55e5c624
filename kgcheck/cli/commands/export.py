"""``kgcheck export``: a run's verdicts as CSV, JSONL or RDF, for a curator to act on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import Command, app, err_console, user_errors


@app.command("export", cls=Command)
@user_errors
def export(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN",
                                            help="A folder written by `kgcheck run`.")],
    format: Annotated[str, typer.Option(
        "--format", "-f", help="csv, jsonl, nt (N-Triples), ttl (Turtle), sparql (a SPARQL "
        "1.1 Update deleting the triples judged false and inserting accepted corrections), "
        "patch (the same as an RDF Patch) or factcheck (the FactCheck study's result file, "
        "named as it names them).")] = "csv",
    only: Annotated[str | None, typer.Option(
        help="Keep these verdicts only, comma-separated: T, F, NA, NEI (e.g. --only F).")]
    = None,
    rdf: Annotated[str, typer.Option(
        help="RDF shape: annotated (each verdict as a reified statement with model, method "
        "and time) or plain (just the triples, e.g. those judged false).")] = "annotated",
    out: Annotated[str | None, typer.Option(
        help="File to write; default RUN/export.<format> (factcheck: a folder, default RUN, "
        "gets the file under FactCheck's name); - for standard output.")] = None,
) -> None:
    """Export verdicts with their triples, reasons, times and review labels."""
    from kgcheck import api

    default = run_dir if format == "factcheck" else Path(run_dir) / f"export.{format}"
    target = out if out is not None else str(default)
    written = api.export(run_dir, format, target, only=only, rdf=rdf)
    if written.path is not None:
        unit = "triple changes" if format in ("sparql", "patch") else "verdicts"
        what = f"{written.count} {unit}" + (f" ({only})" if only else "")
        err_console.print(f"{what} written to {written.path}", highlight=False)
