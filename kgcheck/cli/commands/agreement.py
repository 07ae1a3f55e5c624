"""``kgcheck agreement``: how well the people who labelled a run agree, and with the model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import Command, app, console, err_console, user_errors

SHOWN = 20


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


@app.command("agreement", cls=Command)
@user_errors
def agreement(
    files: Annotated[list[Path], typer.Argument(
        metavar="LABELS.csv...", help="Labels files of one run, one per person "
        "(kgcheck review --annotator NAME writes RUN/labels-NAME.csv).")],
    json_file: Annotated[Path | None, typer.Option(
        "--json", help="Also write the result as JSON to this file.")] = None,
    run: Annotated[Path | None, typer.Option(
        help="The run whose verdicts the people reviewed (default: the folder of the first "
        "labels file in a run folder).")] = None,
) -> None:
    """Report Cohen's or Fleiss' kappa, Krippendorff's alpha and the model's agreement."""
    # Imported on use: the CLI starts without numpy and statsmodels.
    from kgcheck import api

    result = api.agreement(files, run=run, json_out=json_file)
    n = len(result["annotators"])
    console.print(f"{n} annotators ({', '.join(result['annotators'])}), "
                  f"{result['facts']:,} facts labelled", highlight=False)
    if n == 2:
        console.print(f"Cohen's kappa {_fmt(result['cohen_kappa'])} over "
                      f"{result['cohen_facts']:,} facts both labelled", highlight=False)
    else:
        console.print(f"Fleiss' kappa {_fmt(result['fleiss_kappa'])} over "
                      f"{result['fleiss_facts']:,} facts every file labelled", highlight=False)
    console.print(f"Krippendorff's alpha {_fmt(result['krippendorff_alpha'])} over "
                  f"{result['alpha_facts']:,} facts labelled twice or more", highlight=False)
    for who, found in (result["model"] or {}).items():
        console.print(f"model vs {who}: agreement {_fmt(found['agreement'])}, kappa "
                      f"{_fmt(found['cohen_kappa'])} over {found['facts']:,} facts"
                      + (f" ({found['model_na']} NA verdicts left out)"
                         if found["model_na"] else ""), highlight=False)
    for note in result["notes"]:
        err_console.print(f"note: {note}", highlight=False)
    rows = result["disagreements"]
    console.print(f"{len(rows):,} facts the people labelled differently (the adjudication "
                  "queue: kgcheck review RUN --adjudicate)", highlight=False)
    for row in rows[:SHOWN]:
        console.print("  " + row["fact_id"] + ": " + ", ".join(
            f"{k} {v}" for k, v in row["labels"].items()), highlight=False)
    if json_file is not None:
        err_console.print(f"JSON: {json_file}", highlight=False)
