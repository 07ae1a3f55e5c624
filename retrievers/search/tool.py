"""A LangChain tool that searches a fact's evidence, over a local corpus or the search API."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from kgcheck.retrievers.evidence import Retriever, get_retriever


class EvidenceSearchInput(BaseModel):
    """What the tool is asked: a query about one fact of one dataset."""

    query: str = Field(description="What to look for, e.g. a sentence stating the fact.")
    dataset: str = Field(description="Dataset of the fact: factbench, yago or dbpedia.")
    fact_id: str = Field(description="Id of the fact whose stored search results to search.")
    k: int = Field(default=5, ge=1, le=100, description="How many results to return.")


class EvidenceSearchTool(BaseTool):
    """Search the stored web results of a fact, best match first."""

    name: str = "evidence_search"
    description: str = (
        "Search the stored web search results about one fact of a knowledge graph. "
        "Returns JSON: a list of documents (doc_id, url, title, score, snippet), best first."
    )
    args_schema: type[BaseModel] = EvidenceSearchInput
    retriever: Any = Field(exclude=True)

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @classmethod
    def from_settings(cls, corpus: str = "", *, api_key: str = "", embedding: str = "minilm",
                      index: str = "memory", **kwargs: Any) -> EvidenceSearchTool:
        """Build the tool over a corpus folder, tarball, store, or search API URL."""
        retriever: Retriever = get_retriever(corpus, api_key=api_key, embedding=embedding,
                                             index=index)
        return cls(retriever=retriever, **kwargs)

    def _search(self, query: str, dataset: str, fact_id: str, k: int) -> str:
        hits = self.retriever.search(query, dataset, fact_id, k)
        return json.dumps([
            {"doc_id": h.doc_id, "url": h.url, "title": h.title, "score": round(h.score, 5),
             "snippet": h.snippet} for h in hits
        ], ensure_ascii=False)

    def _run(self, query: str, dataset: str, fact_id: str, k: int = 5, **_: Any) -> str:
        return self._search(query, dataset, fact_id, k)

    async def _arun(self, query: str, dataset: str, fact_id: str, k: int = 5, **_: Any) -> str:
        # Search reads the corpus and runs the embedder: keep it off the event loop.
        return await asyncio.to_thread(self._search, query, dataset, fact_id, k)
