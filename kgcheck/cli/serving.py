"""What the commands that serve a page in the browser share: their options and how they stop."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, NoReturn

import typer

__all__ = ["check_port", "host_option", "port_option", "serve_until_stopped"]


def port_option() -> Any:
    """Return the ``--port`` option of a page server (its default is the command's)."""
    return typer.Option(help="Port to serve on (0: any free port).")


def host_option() -> Any:
    """Return the ``--host`` option of a page server, loopback by default."""
    return typer.Option(
        help="Address to serve on; anything but loopback lets others on the network in.")


def check_port(port: int) -> None:
    """Refuse a ``--port`` that is no TCP port."""
    if not 0 <= port < 65536:
        raise ValueError(f"--port {port}: expected a TCP port from 0 to 65535")


def serve_until_stopped(server: Coroutine[Any, Any, None]) -> NoReturn:
    """Run a page server until a signal stops it; exit with 130, as Ctrl-C does."""
    from kgcheck import api

    try:
        api.run_coroutine(server)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    # asyncio turns a Ctrl-C into a cancellation of the server, which closing what it serves
    # may absorb depending on where it lands; it was stopped all the same, so it ends as
    # Ctrl-C does.
    raise typer.Exit(130)
