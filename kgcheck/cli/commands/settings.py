"""``kgcheck settings``: the ``--set`` keys of a strategy, with type, default and meaning."""

from __future__ import annotations

from typing import Annotated

import typer

from kgcheck.cli.app import Command, app, console, user_errors


@app.command("settings", cls=Command)
@user_errors
def settings(
    strategy: Annotated[str, typer.Argument(
        metavar="STRATEGY", help="Strategy name (dka, giv-z, giv-f, rag, ...; "
        "`kgcheck graph list`).")],
) -> None:
    """List the settings `kgcheck run --strategy STRATEGY --set KEY=VALUE` accepts."""
    from rich.table import Table

    from kgcheck import api

    chosen = api.strategy(strategy)

    table = Table(title=f"--set keys of {chosen.name}", show_lines=False)
    table.add_column("key", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("default", overflow="fold", max_width=18)
    table.add_column("description")
    for item in api.settings(chosen.name):
        default = item["default"]
        shown = '""' if default == "" else ",".join(map(str, default)) if isinstance(
            default, list | tuple) else str(default)
        table.add_row(item["name"], item["type"], shown, item["description"])
    console.print(table)
    console.print("e.g. kgcheck run --strategy " + chosen.name + " --set KEY=VALUE "
                  "(lists: comma-separated)", highlight=False)
