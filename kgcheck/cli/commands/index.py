"""``kgcheck index``: embed a dataset's evidence chunks into Chroma ahead of runs (resumable)."""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

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
    from kgcheck.retrievers.evidence import get_retriever
    from kgcheck.retrievers.index import index_lock
    from kgcheck.retrievers.questions import FactStatements, template_questions

    # A Chroma server takes care of its writers; a Chroma folder takes one build at a time.
    with nullcontext() if chroma_url else index_lock(chroma_path):
        retriever = get_retriever(corpus, dataset=dataset, embedding=embedding, index="chroma",
                                  chroma_path=chroma_path, chroma_url=chroma_url)
        fact_ids = retriever.source.fact_ids(dataset)
        if not fact_ids:
            raise ValueError(f"the corpus {retriever.source.location} has no documents for "
                             f"dataset {dataset!r}; import them with `kgcheck corpus import`")
        if limit is not None:
            fact_ids = fact_ids[:limit]
        target = retriever.index(dataset)
        done = set() if revisit else target.indexed_facts(fact_ids)
        todo = [f for f in fact_ids if f not in done]
        statements = FactStatements(data)
        started = time.perf_counter()
        embedded = docs = 0
        with Progress(TextColumn("[bold]index"), BarColumn(), MofNCompleteColumn(),
                      disable=not progress, console=console) as bar:
            task = bar.add_task("index", total=len(todo))
            for fact_id in todo:
                sentence, subject, obj = statements.get(dataset, fact_id)
                embedded += retriever.index_fact(dataset, fact_id, sentence,
                                                 template_questions(subject, obj, sentence),
                                                 candidates=candidates, mode=retrieval)
                docs += len(retriever.corpus(dataset, fact_id).documents)
                bar.advance(task)
        seconds = time.perf_counter() - started
        console.print(f"indexed {len(todo):,} facts ({len(done):,} already done), "
                      f"{docs:,} documents, {embedded:,} chunks embedded in {seconds:.1f} s "
                      f"into {target.location}")
