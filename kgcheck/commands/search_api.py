"""``kgcheck search-api``: serve the mock search API (FactCheck-compatible) over a corpus."""

from __future__ import annotations

import os
import secrets
from typing import Annotated

import typer

from kgcheck.app import app, console, user_errors


@app.command("search-api")
@user_errors
def search_api(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8765,
    api_key: Annotated[str, typer.Option(help="Key clients send as X-API-Key; default "
                                         "$KGCHECK_SEARCH_API_KEY, else a random one.")] = "",
    corpus: Annotated[str, typer.Option(help="Folder, .tar.gz or .sqlite store; default: the "
                                        "imported store.")] = "",
    data: Annotated[str | None, typer.Option(help="FactCheck data (for the facts' "
                                             "sentences); default: vendored.")] = None,
    embedding: Annotated[str, typer.Option(help="Embedder for ranking (minilm, ...).")] = "minilm",
    index: Annotated[str, typer.Option(help="Chunk vectors: chroma or memory.")] = "chroma",
    chroma_path: Annotated[str, typer.Option(help="Chroma folder (default .kgcheck/chroma).")] = "",
) -> None:
    """Serve stored search results over HTTP, with the hosted FactCheck API's paths."""
    import uvicorn

    from retrievers.api import create_app
    from retrievers.evidence import get_retriever

    if corpus.startswith(("http://", "https://")):
        raise ValueError("--corpus: serve a local corpus (folder, .tar.gz or .sqlite), not a URL")
    key = api_key or os.environ.get("KGCHECK_SEARCH_API_KEY", "") or secrets.token_urlsafe(16)
    retriever = get_retriever(corpus, embedding=embedding, index=index, chroma_path=chroma_path)
    api = create_app(retriever.source, retriever.engine, api_key=key, data=data)
    shown = key if not api_key else "(as given)"
    console.print(f"mock search API on http://{host}:{port}/api/datasets/  corpus: "
                  f"{retriever.source.location}  X-API-Key: {shown}")
    uvicorn.run(api, host=host, port=port, log_level="warning")
