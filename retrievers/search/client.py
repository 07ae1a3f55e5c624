"""Talk to a FactCheck-style search API (this project's mock or the hosted one).

``SearchClient`` wraps the endpoints; ``RemoteSource`` turns them into a document source,
so the mock search engine, the RAG graph and the tool work over HTTP exactly as over a
local corpus: a fact's documents are the pages listed for its fetchable questions.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import httpx

from kgcheck.data import safe_json
from kgcheck.data.httpbody import ACCEPT_ENCODING, BodyDecodeError, read_capped
from kgcheck.retrievers.corpus import Document, parse_corpus_link

API_KEY_ENV = "KGCHECK_SEARCH_API_KEY"
# The page text and title, plus the stored document id that this project's API adds.
CONTENT_FIELDS = "title,text,doc_id"
# The largest answer read (decoded): a page of 1,000 fact ids or one document is far less.
MAX_BYTES = 32 * 2**20


class SearchAPIError(ValueError):
    """The API refused a request or answered something unexpected."""

    def __init__(self, message: str, status: int | None = None,
                 body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class SearchClient:
    """The search API's endpoints by base URL and key."""

    def __init__(self, base_url: str, api_key: str = "", *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None,
                 max_bytes: int = MAX_BYTES) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise SearchAPIError(f"search API URL {base_url!r}: expected http(s)://HOST[:PORT]")
        self.base_url = base_url.rstrip("/")
        key = api_key or os.environ.get(API_KEY_ENV, "")
        self.max_bytes = max_bytes
        headers = {"Accept-Encoding": ACCEPT_ENCODING, **({"X-API-Key": key} if key else {})}
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport,
                                  headers=headers)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        """GET a path; errors become ``SearchAPIError`` with the API's message."""
        try:
            with self._http.stream("GET", path, params={k: v for k, v in params.items()
                                                        if v is not None}) as response:
                # Decoded and capped as it arrives: a compressed bomb costs max_bytes.
                read = read_capped(response, self.max_bytes)
        except httpx.HTTPError as exc:
            raise SearchAPIError(f"{self.base_url}{path}: {type(exc).__name__}: {exc}") from None
        except BodyDecodeError as exc:
            raise SearchAPIError(f"{self.base_url}{path}: {exc}") from None
        if read.over:
            raise SearchAPIError(f"{self.base_url}{path}: the answer is larger than "
                                 f"{self.max_bytes:,} bytes (decoded)", response.status_code)
        try:
            body = safe_json.parse(read.body())
        except ValueError:
            body = {"error": read.body()[:200].decode("utf-8", "replace")}
        if response.status_code != 200:
            message = body.get("error") if isinstance(body, dict) else None
            raise SearchAPIError(f"{self.base_url}{path}: HTTP {response.status_code}: "
                                 f"{message or body}", response.status_code, body)
        return body

    def datasets(self) -> list[dict[str, Any]]:
        """Datasets the API serves."""
        return list(self.get("/api/datasets/")["datasets"])

    def facts(self, dataset: str, page_size: int = 1000) -> list[str]:
        """Every fact id of a dataset, following pagination."""
        ids: list[str] = []
        page = 1
        while True:
            body = self.get(f"/api/datasets/{dataset}/facts/", page=page, page_size=page_size)
            ids += [str(f["fact_id"]) for f in body["facts"]]
            if not body.get("next"):
                return ids
            page += 1

    def questions(self, dataset: str, fact_id: str) -> list[dict[str, Any]]:
        """List a fact's questions, best score first."""
        return list(self.get(f"/api/datasets/{dataset}/facts/{fact_id}/questions/")["questions"])

    def question(self, dataset: str, fact_id: str, rank: int) -> dict[str, Any]:
        """One question with every URL listed for it (all pages)."""
        path = f"/api/datasets/{dataset}/facts/{fact_id}/questions/{rank}/"
        body = self.get(path)
        urls = list(body.get("available_urls", []))
        page = 1
        while body.get("next"):
            page += 1
            body = self.get(path, page=page, page_size=body.get("page_size"))
            urls += body.get("available_urls", [])
        return {**body, "available_urls": urls}

    def serp_content(self, url: str, fields: str = "title,text") -> dict[str, Any]:
        """Fetch the stored content of a URL."""
        return dict(self.get("/api/serp-content/", url=url, fields=fields)["data"])


class RemoteSource:
    """A document source over the search API (a fact's pages, fetched once and cached)."""

    def __init__(self, base_url: str, api_key: str = "", *, cache_size: int = 256,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.client = SearchClient(base_url, api_key, transport=transport)
        self.location = self.client.base_url
        self._cache: OrderedDict[tuple[str, str], list[Document]] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()

    def datasets(self) -> list[str]:
        """Datasets of the API, lower-case."""
        return sorted(str(d["name"]).lower() for d in self.client.datasets())

    def fact_ids(self, dataset: str) -> list[str]:
        """Facts of a dataset."""
        return sorted(self.client.facts(dataset.lower()))

    def _document(self, dataset: str, fact_id: str, n: int, url: str,
                  data: dict[str, Any]) -> Document:
        parts = parse_corpus_link(url)
        # This project's API also reports the stored document id; keep its number when given.
        number = str(data.get("doc_id") or "").rpartition("/")[2]
        doc_no = parts[2] if parts else int(number) if number.isdigit() else n
        return Document(dataset=dataset.lower(), fact_id=fact_id, doc_no=doc_no,
                        text=str(data.get("text") or ""), url="" if parts else url,
                        title=str(data.get("title") or ""))

    def documents(self, dataset: str, fact_id: str) -> list[Document]:
        """Fetch the pages listed for the fact's fetchable questions, in first-seen order."""
        key = (dataset.lower(), fact_id)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        try:
            questions = self.client.questions(key[0], fact_id)
        except SearchAPIError as exc:
            # The hosted API answers 500 for an unknown fact, the mock 404: both mean none.
            if exc.status in (404, 500):
                return []
            raise
        urls: dict[str, None] = {}
        for q in questions:
            if q.get("is_fetchable"):
                for row in self.client.question(key[0], fact_id, int(q["fetch_id"]))[
                        "available_urls"]:
                    urls.setdefault(str(row["url"]), None)
        docs = [self._document(dataset, fact_id, n, url,
                               self.client.serp_content(url, CONTENT_FIELDS))
                for n, url in enumerate(urls)]
        docs.sort(key=lambda d: d.doc_no)
        with self._lock:
            self._cache[key] = docs
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return docs

    def by_link(self, link: str) -> Document | None:
        """Fetch one page by URL (None when the API does not have it)."""
        try:
            data = self.client.serp_content(link)
        except SearchAPIError as exc:
            if exc.status == 404:
                return None
            raise
        parts = parse_corpus_link(link)
        dataset, fact_id = (parts[0], parts[1]) if parts else ("", "")
        return self._document(dataset, fact_id, 0, link, data)


__all__ = ["SearchClient", "RemoteSource", "SearchAPIError"]
