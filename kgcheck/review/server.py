"""The review page: a local web server over a ``ReviewSession`` (``kgcheck review RUN``).

FastAPI serves one page and its assets from ``kgcheck/review/static`` (plain HTML, CSS and JS, no
CDN: it works offline) and a small JSON API the page calls. It is guarded as every local page
of kgcheck is (``kgcheck.web.guard``: loopback, token, ``Host`` check, JSON-only POSTs, CSP);
the API's token header is ``X-Review-Token``.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from importlib import resources
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field

from kgcheck.review.session import ReviewError, ReviewSession
from kgcheck.web.guard import SECURITY_HEADERS, Guard, Served, ServeError, bind, serve_app

__all__ = ["SECURITY_HEADERS", "ServeError", "Served", "bind", "create_app", "serve"]

__all__ = ["ASSETS", "DecisionIn", "SECURITY_HEADERS", "STALE", "ServeError", "Served",
           "TOKEN_HEADER", "UndoIn", "bind", "create_app", "serve"]

TOKEN_HEADER = "X-Review-Token"
ASSETS = {"review.js": "text/javascript", "review.css": "text/css",
          "favicon.svg": "image/svg+xml"}
STALE = ("this page's token is not the server's (was kgcheck review restarted?): open the "
         "address it printed")


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
            "annotator": session.annotator, "progress": session.progress(),
            "estimate": session.estimate(), "items": [i.as_json() for i in session.items]}


def create_app(session: ReviewSession, token: str, hosts: set[str]) -> FastAPI:
    """Build the review app for a session; ``hosts`` are the ``Host`` values it answers."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    page = _asset("review.html").replace("__TOKEN__", html.escape(token, quote=True))

    Guard(token, frozenset(hosts), TOKEN_HEADER, STALE).install(app)

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
                             "progress": session.progress(), "estimate": session.estimate()})

    @app.post("/api/undo")
    async def undo(request: UndoIn) -> Response:
        try:
            fact_id = await session.undo(request.fact_id)
        except ReviewError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        item = session.item(fact_id).as_json() if fact_id else None
        return JSONResponse({"undone": fact_id, "item": item, "progress": session.progress(),
                             "estimate": session.estimate()})

    return app


async def serve(session: ReviewSession, *, host: str = "127.0.0.1", port: int = 8765,
                on_ready: Callable[[Served], None] | None = None) -> None:
    """Serve the review page for ``session`` until the server is stopped (Ctrl-C)."""
    await serve_app(lambda token, hosts: create_app(session, token, hosts), host=host,
                    port=port, on_ready=on_ready)
