"""The run explorer: a local web app over run folders (``kgcheck view RUN [RUN ...]``).

FastAPI serves one page and its assets from ``kgcheck/view/static`` (plain HTML, CSS and JS,
no CDN: it works offline), the runs' figures as PNG, and a JSON API the page calls; every
list is paged on the server (``kgcheck.view.explorer``). It is guarded as every local page
of kgcheck is (``kgcheck.web.guard``: loopback, token, ``Host`` check, CSP); the API's
token header is ``X-View-Token``. The explorer only reads the run folders; its indexes are
kept in kgcheck's cache folder (``kgcheck.view.index``).

Every query parameter is declared once below with its type and range; one that does not fit
gets 400 with one line naming it (``kgcheck.web.guard``), never a failure deep in a query.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Callable
from importlib import resources
from typing import Annotated, Any

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from kgcheck.view.explorer import (
    MAX_PAGE,
    MAX_PAGE_NUMBER,
    Explorer,
    ExplorerError,
    FactQuery,
)
from kgcheck.view.figures import Figures
from kgcheck.web.guard import Guard, Served, serve_app

__all__ = ["DEFAULT_STUDIO", "TOKEN_HEADER", "create_app", "serve"]

TOKEN_HEADER = "X-View-Token"
ASSETS = {"view.js": "text/javascript", "view.css": "text/css", "favicon.svg": "image/svg+xml"}
STALE = ("this page's token is not the server's (was kgcheck view restarted?): open the "
         "address it printed")
DEFAULT_STUDIO = "http://127.0.0.1:2024"
STUDIO_PAGE = "https://smith.langchain.com/studio/?baseUrl="
# Far more runs than one explorer opens; the explorer names the runs it has.
MAX_RUNS = 10_000
# Error clusters are numbered from -1 (noise) up: 32 bits is plenty.
MAX_CLUSTER = 2**31 - 1

# The query parameters, each with its type and range.
RunNumber = Annotated[int, Query(ge=0, le=MAX_RUNS)]
OtherRun = Annotated[int | None, Query(ge=0, le=MAX_RUNS)]
PageNumber = Annotated[int, Query(ge=0, le=MAX_PAGE_NUMBER)]
PageSize = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Cluster = Annotated[int | None, Query(ge=-1, le=MAX_CLUSTER)]
Confidence = Annotated[float, Query(ge=0.0, le=1.0, allow_inf_nan=False)]
Filters = Annotated[str | None, Query(max_length=200)]
Predicate = Annotated[str | None, Query(max_length=1_000)]
Search = Annotated[str | None, Query(max_length=200)]
FactId = Annotated[str, Query(min_length=1, max_length=1_000)]


def _asset(name: str) -> str:
    return resources.files("kgcheck.view").joinpath("static", name).read_text(encoding="utf-8")


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def create_app(explorer: Explorer, token: str, hosts: set[str], *,
               studio: str = DEFAULT_STUDIO, review: str | None = None) -> FastAPI:
    """Build the explorer app; ``hosts`` are the ``Host`` values it answers.

    ``studio`` is where ``kgcheck studio`` serves; ``review`` the address a running
    ``kgcheck review`` printed (the fact page links to both).
    """
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    Guard(token, frozenset(hosts), TOKEN_HEADER, STALE).install(app)
    page = _asset("view.html").replace("__TOKEN__", html.escape(token, quote=True))
    figures = Figures(explorer)

    def answer(build: Callable[[], Any]) -> Response:
        try:
            return JSONResponse(build())
        except ExplorerError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

    @app.get("/")
    def index() -> Response:
        return Response(page, media_type="text/html; charset=utf-8")

    @app.get("/static/{name}")
    def asset(name: str) -> Response:
        if name not in ASSETS:
            return PlainTextResponse("not found", status_code=404)
        return Response(_asset(name), media_type=f"{ASSETS[name]}; charset=utf-8")

    @app.get("/figure/{figure_id}.png")
    def figure(figure_id: str) -> Response:
        png = figures.png(figure_id)
        if png is None:
            return PlainTextResponse("no such figure", status_code=404)
        return Response(png, media_type="image/png")

    @app.get("/api/runs")
    def runs() -> Response:
        return answer(lambda: {"runs": explorer.runs_json(), "figures": figures.available(),
                               "studio": STUDIO_PAGE + studio})

    @app.get("/api/predicates")
    def predicates(run: RunNumber = 0) -> Response:
        return answer(lambda: {"predicates": explorer.predicates(run),
                               "clusters": explorer.clusters(run)})

    @app.get("/api/facts")
    def facts(run: RunNumber = 0, filters: Filters = None, predicate: Predicate = None,
              cluster: Cluster = None, other: OtherRun = None, q: Search = None,
              low: Confidence = 0.6, page: PageNumber = 0, size: PageSize = 50) -> Response:
        query = FactQuery(run=run, filters=_split(filters), predicate=predicate or None,
                          cluster=cluster, disagree_with=other, search=q or None, low=low,
                          page=page, size=size)
        return answer(lambda: explorer.facts(query))

    @app.get("/api/fact")
    def fact(id: FactId, run: RunNumber = 0) -> Response:  # noqa: A002
        def build() -> dict[str, Any]:
            found = explorer.fact(run, id)
            found["studio"] = STUDIO_PAGE + studio
            found["review_url"] = review if review and review.startswith("http") else None
            # Quoted as a shell reads it: a folder with a space or a $ pastes as printed.
            found["review_command"] = shlex.join(
                ["kgcheck", "review", str(explorer.run(run).folder),
                 "--only", str(found["record"].get("label"))])
            return found
        return answer(build)

    @app.get("/api/diff")
    def diff(a: RunNumber = 0, b: RunNumber = 1, all: bool = False,  # noqa: A002
             page: PageNumber = 0, size: PageSize = 50) -> Response:
        return answer(lambda: explorer.diff(a, b, only_disagree=not all, page=page,
                                            size=size))

    return app


async def serve(explorer: Explorer, *, host: str = "127.0.0.1", port: int = 8766,
                studio: str = DEFAULT_STUDIO, review: str | None = None,
                on_ready: Callable[[Served], None] | None = None) -> None:
    """Serve the explorer until the server is stopped (Ctrl-C)."""
    await serve_app(lambda token, hosts: create_app(explorer, token, hosts, studio=studio,
                                                    review=review),
                    host=host, port=port, on_ready=on_ready)
