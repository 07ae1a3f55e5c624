"""The review page: a local web server over a ``ReviewSession`` (``kgcheck review RUN``).

FastAPI serves one page and its assets from ``kgcheck/review/static`` (plain HTML, CSS and JS, no
CDN: it works offline) and a small JSON API the page calls. Safety, since the page writes
to the run folder and shows text from the KG, the model and the web:

- it binds 127.0.0.1 unless told otherwise, and answers only requests whose ``Host`` is the
  address it serves (a DNS-rebinding page cannot reach it);
- a random token, in the address it prints, is required on every request (``?token=`` for
  the page and its assets, the ``X-Review-Token`` header for the API); a token from an
  earlier server gets a message saying to open the new address;
- a POST needs the token header and a JSON body, which a cross-site form cannot send, and a
  foreign ``Origin`` is refused;
- the page puts every text in with ``textContent`` (never as HTML), and a Content Security
  Policy allows only the page's own script: a triple holding ``<script>`` shows as text.
"""

from __future__ import annotations

import asyncio
import html
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field

from kgcheck.review.session import ReviewError, ReviewSession

TOKEN_HEADER = "X-Review-Token"
ASSETS = {"review.js": "text/javascript", "review.css": "text/css",
          "favicon.svg": "image/svg+xml"}
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
STALE = ("this page's token is not the server's (was kgcheck review restarted?): open the "
         "address it printed")


class ServeError(ValueError):
    """The review server cannot start (the port is taken, the host cannot be bound)."""


class DecisionIn(BaseModel):
    """A decision the page posts."""

    fact_id: str = Field(max_length=1_000)
    label: str = Field(max_length=10)
    note: str = Field(default="", max_length=10_000)
    correction: str = Field(default="", max_length=10)
    corrected_value: str = Field(default="", max_length=1_000)


class UndoIn(BaseModel):
    """An undo the page posts: a fact, or (None) the last decision."""

    fact_id: str | None = Field(default=None, max_length=1_000)


def _asset(name: str) -> str:
    return resources.files("kgcheck.review").joinpath("static", name).read_text(encoding="utf-8")


def _state(session: ReviewSession) -> dict[str, Any]:
    return {"run": session.run_dir.resolve().name, "labels": str(session.labels_path),
            "progress": session.progress(), "items": [i.as_json() for i in session.items]}


def create_app(session: ReviewSession, token: str, hosts: set[str]) -> FastAPI:
    """Build the review app for a session; ``hosts`` are the ``Host`` values it answers."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    page = _asset("review.html").replace("__TOKEN__", html.escape(token, quote=True))

    @app.middleware("http")
    async def guard(request: Request,
                    call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = _refusal(request, token, hosts) or await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.get("/")
    async def index() -> Response:
        return Response(page, media_type="text/html; charset=utf-8")

    @app.get("/static/{name}")
    async def asset(name: str) -> Response:
        if name not in ASSETS:
            return PlainTextResponse("not found", status_code=404)
        return Response(_asset(name), media_type=f"{ASSETS[name]}; charset=utf-8")

    @app.get("/api/state")
    async def state() -> dict[str, Any]:
        return _state(session)

    @app.post("/api/decide")
    async def decide(decision: DecisionIn) -> Response:
        try:
            review = await session.decide(decision.fact_id, decision.label, decision.note,
                                          correction=decision.correction,
                                          corrected_value=decision.corrected_value)
        except ReviewError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"saved": True, "fact_id": decision.fact_id, "review": review,
                             "progress": session.progress()})

    @app.post("/api/undo")
    async def undo(request: UndoIn) -> Response:
        try:
            fact_id = await session.undo(request.fact_id)
        except ReviewError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        item = session.item(fact_id).as_json() if fact_id else None
        return JSONResponse({"undone": fact_id, "item": item, "progress": session.progress()})

    return app


def _refusal(request: Request, token: str, hosts: set[str]) -> Response | None:
    """Return the response that refuses a request, or None to let it through."""
    if request.headers.get("host", "") not in hosts:
        return PlainTextResponse("unknown host", status_code=400)
    given = request.headers.get(TOKEN_HEADER) or request.query_params.get("token") or ""
    posted = request.method != "GET"
    if posted:
        origin = request.headers.get("origin")
        if origin is not None and origin.split("://", 1)[-1] not in hosts:
            return JSONResponse({"error": "cross-site request refused"}, status_code=403)
        # Only the page's script sets this header; a cross-site form or image cannot.
        given = request.headers.get(TOKEN_HEADER, "")
    if not secrets.compare_digest(given.encode(), token.encode()):
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": STALE, "stale_token": True}, status_code=403)
        return PlainTextResponse(STALE, status_code=403)
    if posted and "application/json" not in request.headers.get("content-type", ""):
        return JSONResponse({"error": "expected a JSON body"}, status_code=415)
    return None


@dataclass
class Served:
    """Where the review page is served: its address (with the token) and port."""

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


async def serve(session: ReviewSession, *, host: str = "127.0.0.1", port: int = 8765,
                on_ready: Callable[[Served], None] | None = None) -> None:
    """Serve the review page for ``session`` until the server is stopped (Ctrl-C)."""
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    shown = f"[{host}]" if ":" in host else host
    hosts = {f"{shown}:{bound}"} | ({f"localhost:{bound}"} if host == "127.0.0.1" else set())
    config = uvicorn.Config(create_app(session, token, hosts), log_level="warning",
                            access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    if on_ready is not None:
        on_ready(Served(f"http://{shown}:{bound}/?token={token}", bound))
    try:
        await server.serve(sockets=[sock])
    except asyncio.CancelledError:
        pass
    finally:
        sock.close()
