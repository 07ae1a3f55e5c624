"""``kgcheck studio``: serve every registered graph in LangGraph Studio (``langgraph dev``).

The graphs come from the registry, plugins included, so a strategy that an installed
package registers is served without editing ``langgraph.json``. ``--write-config`` writes
the config file instead (the repository's ``langgraph.json`` is written this way).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import app, console, user_errors
from kgcheck.cli.process_group import run_in_own_group

# Quiet and offline: no analytics, no version check, no LangSmith tracing.
QUIET_ENV = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true",
             "LANGSMITH_TRACING": "false"}


def write_config(path: Path | None = None) -> Path:
    """Write the ``langgraph.json`` that serves every registered graph; return its path."""
    from kgcheck.api import write_studio_config

    return write_studio_config(path)


@app.command("studio")
@user_errors
def studio(
    host: Annotated[str, typer.Option(help="Address to serve on (loopback by default).")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 2024,
    reload: Annotated[bool, typer.Option(help="Restart the server when a file changes.")]
    = True,
    write_config_to: Annotated[Path | None, typer.Option(
        "--write-config", help="Only write the langgraph.json for every registered graph "
        "to this file, then exit.")] = None,
) -> None:
    """Serve every registered graph (and consensus) with `langgraph dev`."""
    if write_config_to is not None:
        console.print(f"wrote {write_config(write_config_to)}")
        return
    if not 0 < port < 65536:
        raise ValueError(f"--port {port}: expected a TCP port from 1 to 65535")
    langgraph = shutil.which("langgraph", path=str(Path(sys.executable).parent)) or shutil.which(
        "langgraph")
    if langgraph is None:
        raise ValueError("`langgraph dev` is not installed: pip install 'kgcheck[studio]' "
                         "(langgraph-cli[inmem])")
    config = write_config()
    command = [langgraph, "dev", "--config", str(config), "--host", host, "--port", str(port),
               "--no-browser", *([] if reload else ["--no-reload"])]
    console.print(f"serving {config} on http://{host}:{port}")
    # In a process group of its own, stopped whole: a signal to kgcheck stops the server's
    # workers too, and the port is free again when kgcheck has exited.
    raise typer.Exit(run_in_own_group(command, env={**os.environ, **QUIET_ENV}))
