"""The mock search HTTP API, compatible with FactCheck's hosted one (same paths and fields).

Auth is an ``X-API-Key`` header or an ``api_key`` query parameter; a wrong or missing key
gets 401 ``{"error": "Invalid API key"}``. Unknown datasets, facts, question ranks and URLs
get 404 with a JSON ``error`` (upstream answers 500 for an unknown fact). Long lists (facts,
a question's URLs) are paginated with ``page`` and ``page_size``; ``count``/``total_urls``
stay the full totals, as upstream reports them, and ``next`` links the following page.
A query or path value of the wrong type (``page=abc``) gets 400 with the same ``error`` shape.

Per fact, question rank 0 is the fact itself and ranks 1-3 are template questions; each
question's ``available_urls`` are the fact's stored documents, ranked for that question by
the mock search engine. Documents without a source URL are addressed as ``corpus://...``.
"""

from __future__ import annotations

import asyncio
import hmac
import math
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.protocols.http.h11_impl import H11Protocol

from kgcheck.retrievers.questions import FactStatements, template_questions
from kgcheck.retrievers.search.engine import MockSearch
from kgcheck.retrievers.store import DocumentSource

FETCHABLE_RANKS = 3
# Seconds a client may take to send a request's headers (also between keep-alive requests).
HEADER_TIMEOUT = 10.0
# Connections held at once; more are answered 503 rather than queued without bound.
MAX_CONNECTIONS = 256
MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 100
DESCRIPTIONS = {
    "factbench": "FactBench: 2,800 facts of 10 relations, true and corrupted.",
    "yago": "YAGO: 1,386 facts, nearly all true.",
    "dbpedia": "DBpedia: 9,344 facts over 1,092 predicates.",
}


class ApiError(Exception):
    """An error answer: its HTTP status and JSON body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("error", ""))
        self.status = status
        self.body = body


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _page(request: Request, items: list[Any], page: int, page_size: int) -> dict[str, Any]:
    if page < 1 or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ApiError(400, {"error": f"page must be >= 1 and page_size 1..{MAX_PAGE_SIZE}",
                             "page": page, "page_size": page_size})
    pages = max(1, math.ceil(len(items) / page_size))
    start = (page - 1) * page_size
    nxt = None
    if page < pages:
        query = {k: v for k, v in request.query_params.items() if k != "api_key"}
        query.update(page=str(page + 1), page_size=str(page_size))
        nxt = f"{request.url.path}?{urlencode(query)}"
    return {"items": items[start:start + page_size], "page": page, "page_size": page_size,
            "total_pages": pages, "next": nxt}


def create_app(source: DocumentSource, search: MockSearch, *, api_key: str,
               data: str | None = None) -> FastAPI:
    """Build the API over a document source and the mock search engine."""
    app = FastAPI(title="kgcheck mock search API", version="1")
    statements = FactStatements(data)
    started = _now()

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid_input(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = exc.errors()
        first = problems[0] if problems else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "request"
        body: dict[str, Any] = {"error": f"{where}: {first.get('msg', 'invalid value')}"}
        if "input" in first:
            body[where] = first["input"]
        return JSONResponse(body, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    @app.middleware("http")
    async def check_key(request: Request, call_next: Any) -> Any:
        given = request.headers.get("x-api-key") or request.query_params.get("api_key") or ""
        if not hmac.compare_digest(given.encode(), api_key.encode()):
            return JSONResponse({"error": "Invalid API key"}, status_code=401)
        return await call_next(request)

    def dataset_of(name: str) -> str:
        known = source.datasets()
        if name.lower() not in known:
            raise ApiError(404, {"error": "Dataset not found", "dataset": name,
                                 "known": known})
        return name.lower()

    def fact_of(dataset: str, fact_id: str) -> list[Any]:
        docs = source.documents(dataset, fact_id)
        if not docs:
            raise ApiError(404, {"error": "Fact not found", "dataset": dataset,
                                 "fact_id": fact_id})
        return docs

    def questions_of(dataset: str, fact_id: str) -> list[dict[str, Any]]:
        statement, subject, obj = statements.get(dataset, fact_id)
        texts = [statement, *template_questions(subject, obj, statement)[:FETCHABLE_RANKS]]
        scores = [1.0]
        if search.embedder is not None and len(texts) > 1:
            vectors = search.embedder.embed(texts)
            scores += [round(float(s), 4) for s in vectors[1:] @ vectors[0]]
        else:
            scores += [round(1.0 - 0.1 * n, 4) for n in range(1, len(texts))]
        return [{"fetch_id": n, "text": t, "score": s, "is_fetchable": n <= FETCHABLE_RANKS}
                for n, (t, s) in enumerate(zip(texts, scores, strict=True))]

    @app.get("/api/datasets/")
    def datasets() -> dict[str, Any]:
        rows = [{"name": d, "description": DESCRIPTIONS.get(d, f"Evidence for {d} facts."),
                 "created_at": started} for d in source.datasets()]
        return {"datasets": rows, "count": len(rows)}

    @app.get("/api/datasets/{name}/facts/")
    def facts(request: Request, name: str, page: int = 1,
              page_size: int = DEFAULT_PAGE_SIZE) -> dict[str, Any]:
        dataset = dataset_of(name)
        rows = [{"fact_id": f, "created_at": started} for f in source.fact_ids(dataset)]
        paged = _page(request, rows, page, page_size)
        return {"dataset": dataset, "facts": paged.pop("items"), "count": len(rows), **paged}

    @app.get("/api/datasets/{name}/facts/{fact_id}/questions/")
    def questions(name: str, fact_id: str) -> dict[str, Any]:
        dataset = dataset_of(name)
        fact_of(dataset, fact_id)
        rows = questions_of(dataset, fact_id)
        return {"success": True, "dataset": dataset, "fact_id": fact_id,
                "questions": sorted(rows, key=lambda q: -q["score"]), "count": len(rows)}

    @app.get("/api/datasets/{name}/facts/{fact_id}/questions/{rank}/")
    def question(request: Request, name: str, fact_id: str, rank: int, page: int = 1,
                 page_size: int = DEFAULT_PAGE_SIZE) -> dict[str, Any]:
        dataset = dataset_of(name)
        fact_of(dataset, fact_id)
        rows = questions_of(dataset, fact_id)
        if not 0 <= rank < len(rows):
            raise ApiError(404, {"error": "Question not found", "dataset": dataset,
                                 "fact_id": fact_id, "question_rank": rank})
        chosen = rows[rank]
        hits = search.search(chosen["text"], dataset, fact_id)
        urls = [{"url": h.url, "domain": h.domain, "title": h.title, "description": h.snippet,
                 "rank": h.rank, "score": round(h.score, 6), "doc_id": h.doc_id} for h in hits]
        paged = _page(request, urls, page, page_size)
        return {
            "success": True, "dataset": dataset, "fact_id": fact_id, "question_rank": rank,
            "question": {k: chosen[k] for k in ("text", "score", "is_fetchable")},
            "html_content": {"content": ""},
            "available_urls": paged.pop("items"), "total_urls": len(urls), **paged,
        }

    @app.get("/api/serp-content/")
    def serp_content(url: str = "", fields: str = "title,text") -> dict[str, Any]:
        doc = source.by_link(url) if url else None
        if doc is None:
            raise ApiError(404, {"error": "URL not found", "url": url})
        wanted = [f.strip() for f in fields.split(",") if f.strip()]
        full: dict[str, Any] = {"title": doc.title, "text": doc.text, "authors": [],
                                "publish_date": None, "doc_id": doc.doc_id}
        return {"success": True, "url": url, "fields_requested": wanted, "scraped_at": started,
                "data": {k: v for k, v in full.items() if not wanted or k in wanted}}

    return app


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers do not arrive in time.

    uvicorn times out only idle keep-alive connections, and only after a response; a client
    that opens a connection and sends half a request would hold it for ever.
    """

    header_timeout = HEADER_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # noqa: D102
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._arm_header_timer()

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._waiting_after = self.cycle  # the request a new one must follow
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _cancel_header_timer(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
        self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:  # noqa: D102
        super().data_received(data)
        # A new request cycle starts once its headers are complete.
        if self._header_timer is not None and self.cycle is not self._waiting_after:
            self._cancel_header_timer()

    def on_response_complete(self) -> None:  # noqa: D102
        # Armed first: the call below may already start a pipelined request's cycle.
        self._arm_header_timer()
        super().on_response_complete()
        if self.transport.is_closing() or self.cycle is not self._waiting_after:
            self._cancel_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: D102
        self._cancel_header_timer()
        super().connection_lost(exc)


def server_config(app: FastAPI, host: str, port: int, *,
                  header_timeout: float = HEADER_TIMEOUT,
                  max_connections: int = MAX_CONNECTIONS) -> uvicorn.Config:
    """Configure uvicorn for the API: a header-read timeout and a bound on connections."""
    protocol = type("BoundedHeaderProtocol", (HeaderTimeoutProtocol,),
                    {"header_timeout": header_timeout})
    return uvicorn.Config(app, host=host, port=port, log_level="warning", http=protocol,
                          timeout_keep_alive=int(max(1, header_timeout)),
                          limit_concurrency=max_connections)
