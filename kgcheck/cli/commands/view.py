"""``kgcheck view``: explore runs in the browser: scores, figures, every fact's steps, diffs.

Argument parsing and presentation only: the explorer is ``kgcheck.api.open_explorer``'s and
the page ``kgcheck.api.serve_explorer``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import Command, app, user_errors
from kgcheck.cli.serving import check_port, host_option, port_option, serve_until_stopped


@app.command("view", cls=Command)
@user_errors
def view(
    run_dirs: Annotated[list[Path], typer.Argument(
        metavar="RUN...", help="Folders written by `kgcheck run` (run.json and "
        "verdicts.jsonl); two or more to compare them.")],
    errors: Annotated[Path | None, typer.Option(
        help="An error analysis (`kgcheck errors --out DIR`): filter facts by its "
        "clusters.")] = None,
    port: Annotated[int, port_option()] = 8766,
    host: Annotated[str, host_option()] = "127.0.0.1",
    studio: Annotated[str, typer.Option(
        help="Where `kgcheck studio` serves the graphs (the fact page links to it).")]
    = "http://127.0.0.1:2024",
    review: Annotated[str | None, typer.Option(
        help="The address a running `kgcheck review` printed (the fact page links to "
        "it).")] = None,
) -> None:
    """Serve a local explorer of runs; its address (with its token) is the first line printed."""
    # Imported here, as in every command: the CLI starts light.
    from kgcheck.api import Served, open_explorer
    from kgcheck.api import serve_explorer as serve

    check_port(port)
    explorer = open_explorer(run_dirs, errors=errors)

    def ready(served: Served) -> None:
        # Plain print, first line: scripts read the address from it; it must stay whole.
        print(served.url, flush=True)
        print(explorer.dump(), flush=True)
        kept = ", ".join(sorted({str(run.index.parent) for run in explorer.runs}))
        print(f"Ctrl-C stops the explorer (it writes nothing in the run folders; their "
              f"indexes are kept in {kept})", flush=True)

    try:
        serve_until_stopped(serve(explorer, host=host, port=port, studio=studio, review=review,
                                  on_ready=ready))
    finally:
        explorer.close()
