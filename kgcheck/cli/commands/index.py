"""``kgcheck index``: embed a dataset's evidence chunks into Chroma ahead of runs (resumable)."""

from __future__ import annotations

from typing import Annotated

import typer

from kgcheck.cli.app import app, console, user_errors


@app.command("index")
@user_errors
def index(
    dataset: Annotated[str, typer.Option(help="Dataset whose evidence to index.")],
    corpus: Annotated[str, typer.Option(help="Folder, .tar.gz, .sqlite store or search API "
                                        "URL; default: the imported store.")] = "",
    data: Annotated[str | None, typer.Option(help="FactCheck data (for the facts' "
                                             "sentences); default: vendored.")] = None,
    embedding: Annotated[str, typer.Option(help="Embedder: minilm, ollama:<m>, openai:<m>, "
                                           "hf:<m>.")] = "minilm",
    chroma_path: Annotated[str, typer.Option(help="Chroma folder (default .kgcheck/chroma).")] = "",
    chroma_url: Annotated[str, typer.Option(help="Chroma server URL, e.g. "
                                            "http://127.0.0.1:8000.")] = "",
    candidates: Annotated[int, typer.Option(help="Sentences BM25 preselects per fact.")] = 24,
    retrieval: Annotated[str, typer.Option(help="hybrid (preselected sentences) or dense "
                                           "(every sentence).")] = "hybrid",
    limit: Annotated[int | None, typer.Option(help="Index only the first N facts.")] = None,
    revisit: Annotated[bool, typer.Option(help="Revisit facts already indexed (after changing "
                                          "--candidates); only missing vectors are "
                                          "embedded.")] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Embed the chunks that RAG runs will need into a Chroma collection per dataset."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from kgcheck.api import index_evidence

    with Progress(TextColumn("[bold]index"), BarColumn(), MofNCompleteColumn(),
                  disable=not progress, console=console) as bar:
        task = bar.add_task("index", total=None)
        done = index_evidence(dataset, corpus=corpus, data=data, embedding=embedding,
                              chroma_path=chroma_path, chroma_url=chroma_url,
                              candidates=candidates, retrieval=retrieval, limit=limit,
                              revisit=revisit,
                              on_start=lambda n: bar.update(task, total=n),
                              on_fact=lambda _: bar.advance(task))
    console.print(f"indexed {done.facts:,} facts ({done.done_before:,} already done), "
                  f"{done.documents:,} documents, {done.chunks:,} chunks embedded in "
                  f"{done.seconds:.1f} s into {done.location}")
