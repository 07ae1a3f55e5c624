"""``kgcheck view``: explore runs in the browser: scores, figures, every fact's steps, diffs.

Argument parsing and presentation only: the explorer is ``kgcheck.api.open_explorer``'s and
the page ``kgcheck.api.serve_explorer``'s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import Command, app, user_errors


@app.command("view", cls=Command)
@user_errors
def view(
    run_dirs: Annotated[list[Path], typer.Argument(
        metavar="RUN...", help="Folders written by `kgcheck run` (run.json and "
        "verdicts.jsonl); two or more to compare them.")],
    errors: Annotated[Path | None, typer.Option(
        help="An error analysis (`kgcheck errors --out DIR`): filter facts by its "
        "clusters.")] = None,
    port: Annotated[int, typer.Option(help="Port to serve on (0: any free port).")] = 8766,
    host: Annotated[str, typer.Option(
        help="Address to serve on; anything but loopback lets others on the network in.")]
    = "127.0.0.1",
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

    if not 0 <= port < 65536:
        raise ValueError(f"--port {port}: expected a TCP port from 0 to 65535")
    explorer = open_explorer(run_dirs, errors=errors)

    def ready(served: Served) -> None:
        # Plain print, first line: scripts read the address from it; it must stay whole.
        print(served.url, flush=True)
        print(explorer.dump(), flush=True)
        print("Ctrl-C stops the explorer (it only reads the run folders)", flush=True)

    try:
        asyncio.run(serve(explorer, host=host, port=port, studio=studio, review=review,
                          on_ready=ready))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    finally:
        explorer.close()
    raise typer.Exit(130)
