"""``kgcheck datasets``: what data is there."""

from __future__ import annotations

from typing import Annotated

import typer

from kgcheck.cli.app import app, console, user_errors

DataOption = Annotated[
    str | None,
    typer.Option("--data", help="FactCheck data in the upstream layout (default: vendored copy)."),
]


@app.command("datasets")
@user_errors
def datasets(data: DataOption = None) -> None:
    """List the datasets with their fact counts and gold accuracy (share of true facts).

    Every folder ``dataset/<Name>/data/kg.json`` (with ``gt.json``) of ``--data`` is listed.
    """
    from rich.table import Table

    from kgcheck.api import data_location
    from kgcheck.api import datasets as describe_datasets

    table = Table(title=f"Datasets in {data_location(data)}")
    for column in ("dataset", "facts", "labelled", "gold accuracy", "defective rows"):
        table.add_column(column, justify="left" if column == "dataset" else "right")
    for info in describe_datasets(data):
        share = "-" if info.true_share is None else f"{info.true_share:.2f}"
        table.add_row(info.name, f"{info.facts:,}", f"{info.labelled:,}", share, str(info.defects))
    console.print(table)
