"""How RAG finds its evidence: the retrieval settings, declared once.

The RAG strategy's Context inherits ``RetrievalSettings`` (so Studio and ``--set`` reach
every field); ``retriever_for`` opens the retriever those settings describe. The defaults
are the study's where it fixed one (REFERENCE.md section 5).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

SEARCH_API_KEY_ENV = "KGCHECK_SEARCH_API_KEY"


@dataclass(kw_only=True)
class RetrievalSettings:
    """Where evidence comes from and how documents and chunks are chosen."""

    corpus: str = field(
        default="",
        metadata={"description": "Evidence: a folder or .tar.gz in the rag_dataset layout, a "
                  ".sqlite store, or a search API URL; empty = $KGCHECK_CORPUS, else the "
                  "imported store (.kgcheck/corpus.sqlite), else the sample corpus."},
    )
    sources: str = field(
        default="corpus",
        metadata={"description": "Where evidence comes from, in order, comma separated: "
                  "corpus (the stored corpus), searxng (web search), web (fetch the "
                  "result pages), wikipedia (MediaWiki API), sparql (a reference KG)."},
    )
    searxng_url: str = field(
        default="",
        metadata={"description": "SearxNG base URL (its JSON API); empty = $SEARXNG_URL."},
    )
    wikipedia_url: str = field(
        default="https://en.wikipedia.org/w/api.php",
        metadata={"description": "MediaWiki API endpoint of the wikipedia source."},
    )
    sparql_url: str = field(
        default="",
        metadata={"description": "SPARQL endpoint of the sparql source (a reference KG); "
                  "empty = $KGCHECK_SPARQL_URL."},
    )
    allow_private_urls: str = field(
        default="false",
        metadata={"description": "Let the web source fetch private or loopback addresses: "
                  "false, true, or a comma list of networks (127.0.0.0/8)."},
    )
    source_results: int = field(
        default=5, metadata={"description": "Results kept per search of a web source."})
    fetch_timeout: float = field(
        default=10.0, metadata={"description": "Seconds a request may take, body included."})
    max_page_bytes: int = field(
        default=2_000_000, metadata={"description": "Bytes read of a page at most."})
    host_interval: float = field(
        default=1.0, metadata={"description": "Seconds between two requests to one host."})
    fetch_retries: int = field(
        default=2, metadata={"description": "Retries of a failed request (connection, 5xx)."})
    evidence_store: str = field(
        default="",
        metadata={"description": "SQLite cache of fetched evidence; empty = the corpus store "
                  "(.kgcheck/corpus.sqlite)."},
    )
    search_api_key: str = field(
        default="",
        metadata={"description": "Key of the search API (X-API-Key); empty = "
                  "$KGCHECK_SEARCH_API_KEY."},
    )
    search_k: int = field(
        default=100, metadata={"description": "Results per search query (study: 100)."})
    exclude_domains: str = field(
        default="auto",
        metadata={"description": "Drop documents from these domains: auto = the KG's own "
                  "source (wikipedia.org for DBpedia and FactBench), none, or a comma list."},
    )
    k_d: int = field(
        default=10, metadata={"description": "Documents kept after selection (study: 10)."})
    reranker: str = field(
        default="fusion",
        metadata={"description": "Document selector: fusion (BM25 + dense, offline) or "
                  "cross-encoder:<model or path> (sentence-transformers)."},
    )
    top_chunks: int = field(
        default=6, metadata={"description": "Evidence chunks given to the model (study: 6)."})
    cutoff: float = field(
        default=0.3,
        metadata={"description": "Least cosine similarity of a chunk to the sentence (0.3)."})
    window: int = field(
        default=3,
        metadata={"description": "Sentences on each side that replace a chunk (study: 3)."})
    retrieval: str = field(
        default="hybrid",
        metadata={"description": "hybrid: embed only the sentences BM25 preselects and add a "
                  "lexical bonus; dense: embed every sentence, rank by similarity (study)."},
    )
    candidates: int = field(
        default=24, metadata={"description": "Hybrid: sentences preselected by BM25."})
    lexical_weight: float = field(
        default=0.3,
        metadata={"description": "Hybrid: weight of the normalised BM25 score in the ranking."})
    embedding: str = field(
        default="minilm",
        metadata={"description": "Embedder: minilm (offline all-MiniLM-L6-v2), "
                  "ollama:<model>, openai:<model>, hf:<model> (e.g. BAAI/bge-small-en-v1.5)."},
    )
    index: str = field(
        default="chroma",
        metadata={"description": "Where chunk vectors are kept: chroma or memory."},
    )
    chroma_path: str = field(
        default="",
        metadata={"description": "Chroma folder; empty = .kgcheck/chroma ($KGCHECK_HOME)."},
    )
    chroma_url: str = field(
        default="", metadata={"description": "Chroma server URL; overrides chroma_path."})

    def api_key(self) -> str:
        """Return the search API key: the setting, else ``$KGCHECK_SEARCH_API_KEY``."""
        return self.search_api_key or os.environ.get(SEARCH_API_KEY_ENV, "")
