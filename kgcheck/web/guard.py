"""The safety every local page of kgcheck shares (the review page, the run explorer).

The pages show text from the KG, the model and the web, and the review page writes to the
run folder, so each server:

- binds 127.0.0.1 unless told otherwise, and answers only requests whose ``Host`` is the
  address it serves (a DNS-rebinding page cannot reach it);
- requires a random token, in the address it prints, on every request (``?token=`` for the
  page and its assets, a header for the API); a token from an earlier server gets a
  message saying to open the new address;
- accepts a POST only with the token header and a JSON body, which a cross-site form cannot
  send, and refuses a foreign ``Origin``;
- sends a Content Security Policy that allows only the page's own script and styles; the
  pages put every text in with ``textContent`` (never as HTML), so a triple holding
  ``<script>`` shows as text;
- sends those headers on every reply, refusals and failures included: a query or body
  that does not fit its declared types and ranges gets 400 with one line naming it, and a
  request the server fails on gets 500 with one line (the traceback goes to the log).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response

__all__ = ["SECURITY_HEADERS", "Guard", "ServeError", "Served", "bind", "serve_app"]

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # The token is in the address: never send it on to another site.
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
log = logging.getLogger(__name__)


def invalid_request(errors: list[dict]) -> str:
    """Say in one line which parameter of a request is wrong and why (pydantic's errors)."""
    parts = []
    for error in errors[:3]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p not in ("query", "body"))
        given = error.get("input")
        shown = (f"={str(given)[:40]}" if isinstance(given, str | int | float)
                 and not isinstance(given, bool) else "")
        parts.append(f"{where or 'request'}{shown}: {error.get('msg', 'invalid')}")
    return "; ".join(parts)


class ServeError(ValueError):
    """A local page cannot be served (the port is taken, the host cannot be bound)."""


@dataclass(frozen=True)
class Guard:
    """Who may reach a page: its token, the header carrying it, the ``Host`` values served."""

    token: str
    hosts: frozenset[str]
    header: str
    # Said when a request carries another token: which command to look at again.
    stale: str

    def refusal(self, request: Request) -> Response | None:
        """Return the response that refuses ``request``, or None to let it through."""
        if request.headers.get("host", "") not in self.hosts:
            return PlainTextResponse("unknown host", status_code=400)
        given = request.headers.get(self.header) or request.query_params.get("token") or ""
        posted = request.method != "GET"
        if posted:
            origin = request.headers.get("origin")
            if origin is not None and origin.split("://", 1)[-1] not in self.hosts:
                return JSONResponse({"error": "cross-site request refused"}, status_code=403)
            # Only the page's script sets this header; a cross-site form or image cannot.
            given = request.headers.get(self.header, "")
        if not secrets.compare_digest(given.encode(), self.token.encode()):
            if request.url.path.startswith("/api/"):
                return JSONResponse({"error": self.stale, "stale_token": True}, status_code=403)
            return PlainTextResponse(self.stale, status_code=403)
        if posted and "application/json" not in request.headers.get("content-type", ""):
            return JSONResponse({"error": "expected a JSON body"}, status_code=415)
        return None

    def install(self, app: FastAPI) -> None:
        """Refuse what the guard refuses and add the security headers to every response.

        Parameters that do not fit their declared types and ranges get 400, and a failure
        500, both as one line and through this middleware, so with the same headers.
        """

        async def invalid(request: Request, exc: Exception) -> Response:
            errors = exc.errors() if isinstance(exc, RequestValidationError) else []
            return JSONResponse({"error": invalid_request(list(errors))}, status_code=400)

        app.add_exception_handler(RequestValidationError, invalid)

        @app.middleware("http")
        async def guard(request: Request,
                        call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            response = self.refusal(request)
            if response is None:
                try:
                    response = await call_next(request)
                except Exception as exc:
                    # Starlette's own 500 would bypass this middleware and its headers.
                    log.exception("%s %s failed", request.method, request.url.path)
                    message = (f"the server failed on this request ({type(exc).__name__}); "
                               "its log has the details")
                    response = (JSONResponse({"error": message}, status_code=500)
                                if request.url.path.startswith("/api/")
                                else PlainTextResponse(message, status_code=500))
            response.headers.update(SECURITY_HEADERS)
            return response


@dataclass
class Served:
    """Where a page is served: its address (with the token) and port."""

    url: str
    port: int


def bind(host: str, port: int) -> socket.socket:
    """Bind the server's socket now, so a taken port is a clear error, not a log line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot serve on {host}:{port}: {exc.strerror or exc}; pick another "
                         "--port (0 picks a free one)") from None
    sock.listen(64)
    sock.setblocking(False)
    return sock


async def serve_app(make_app: Callable[[str, set[str]], FastAPI], *, host: str, port: int,
                    on_ready: Callable[[Served], None] | None = None) -> None:
    """Serve the app ``make_app(token, hosts)`` builds until the server is stopped (Ctrl-C)."""
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    shown = f"[{host}]" if ":" in host else host
    hosts = {f"{shown}:{bound}"} | ({f"localhost:{bound}"} if host == "127.0.0.1" else set())
    config = uvicorn.Config(make_app(token, hosts), log_level="warning", access_log=False,
                            lifespan="off")
    server = uvicorn.Server(config)
    if on_ready is not None:
        on_ready(Served(f"http://{shown}:{bound}/?token={token}", bound))
    try:
        await server.serve(sockets=[sock])
    except asyncio.CancelledError:
        pass
    finally:
        sock.close()
