"""``kgcheck search-api``: serve the mock search API (FactCheck-compatible) over a corpus."""

from __future__ import annotations

import os
import secrets
import socket
from typing import Annotated

import typer

from kgcheck.cli.app import app, console, user_errors


class ServeError(ValueError):
    """The API cannot listen on the address asked for."""


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _reason(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        text = exc.strerror or str(exc)
    else:
        text = os.strerror(exc.errno) if exc.errno else str(exc)
    return text[:1].lower() + text[1:]


def bind_sockets(host: str, port: int) -> list[socket.socket]:
    """Bind the sockets the server will listen on, as asyncio's ``create_server`` would.

    Binding before anything is printed or loaded turns a taken port into one clear error,
    and handing these sockets to uvicorn leaves no window for another process to take the
    port in between.

    Args:
        host: Interface name or address; a name may resolve to several addresses.
        port: TCP port (0 picks a free one).

    Returns:
        One bound, not yet listening, socket per address ``host`` resolves to.

    Raises:
        ServeError: The host does not resolve or an address cannot be bound (in use, not
            local, not permitted).

    """
    where = _address(host, port)
    if not 0 <= port <= 65535:
        raise ServeError(f"cannot serve on {where}: the port must be 0 to 65535")
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(f"cannot serve on {where}: {_reason(exc)}") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            # The same options as asyncio (and so uvicorn): a port in TIME_WAIT may be
            # reused, one that something listens on may not.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ServeError(f"cannot serve on {where}: {_reason(exc)}") from None
    return sockets


@app.command("search-api")
@user_errors
def search_api(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.", min=0, max=65535)] = 8765,
    api_key: Annotated[str, typer.Option(help="Key clients send as X-API-Key; default "
                                         "$KGCHECK_SEARCH_API_KEY, else a random one.")] = "",
    corpus: Annotated[str, typer.Option(help="Folder, .tar.gz or .sqlite store; default: the "
                                        "imported store.")] = "",
    data: Annotated[str | None, typer.Option(help="FactCheck data (for the facts' "
                                             "sentences); default: vendored.")] = None,
    embedding: Annotated[str, typer.Option(help="Embedder for ranking (minilm, ...).")] = "minilm",
    index: Annotated[str, typer.Option(help="Chunk vectors: auto (Chroma where a Chroma "
                                       "folder is configured or exists, else memory), chroma "
                                       "or memory.")] = "auto",
    chroma_path: Annotated[str, typer.Option(help="Chroma folder (default "
                                             "$KGCHECK_HOME/chroma or .kgcheck/chroma).")] = "",
) -> None:
    """Serve stored search results over HTTP, with the hosted FactCheck API's paths."""
    from kgcheck.api import search_server

    sockets = bind_sockets(host, port)
    try:
        key = api_key or os.environ.get("KGCHECK_SEARCH_API_KEY", "") or secrets.token_urlsafe(16)
        bound = sockets[0].getsockname()[1]  # the port picked when --port is 0
        server, location = search_server(corpus=corpus, embedding=embedding, index=index,
                                         chroma_path=chroma_path, api_key=key, data=data,
                                         host=host, port=bound)
        shown = key if not api_key else "(as given)"
        console.print(f"mock search API on http://{_address(host, bound)}/api/datasets/  "
                      f"corpus: {location}  X-API-Key: {shown}", soft_wrap=True)
        server.run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
