"""``kgcheck corpus``: import evidence documents (the upstream ``rag_dataset`` layout)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import app, console, user_errors

corpus_app = typer.Typer(help="Evidence corpora for RAG: import and list.", no_args_is_help=True)
app.add_typer(corpus_app, name="corpus")

StoreOption = Annotated[
    Path | None,
    typer.Option("--store", help="SQLite store (default .kgcheck/corpus.sqlite; "
                 "$KGCHECK_HOME moves .kgcheck)."),
]


@corpus_app.command("import")
@user_errors
def import_(
    dataset: Annotated[str, typer.Option(help="Dataset folder to import (yago, factbench, ...).")],
    source: Annotated[Path, typer.Option("--from", help="Folder or .tar.gz holding "
                                         "rag_dataset/<dataset>/<fact id>/<n>.txt.")],
    store: StoreOption = None,
    replace: Annotated[bool, typer.Option(help="Delete the dataset's stored documents "
                                          "first.")] = False,
) -> None:
    """Import a dataset's evidence documents from a folder or tarball (read as a stream)."""
    from kgcheck.api import default_store_path, import_corpus

    started = time.perf_counter()
    target, count = import_corpus(source, dataset, store or default_store_path(), replace=replace)
    facts, docs = target.counts().get(dataset.lower(), (0, 0))
    seconds = time.perf_counter() - started
    console.print(f"imported {count:,} documents of {dataset.lower()} in {seconds:.1f} s; "
                  f"the store holds {docs:,} documents for {facts:,} facts: {target.location}")


@corpus_app.command("list")
@user_errors
def list_(
    store: StoreOption = None,
    fetched: Annotated[bool, typer.Option("--fetched", help="List every fetched result and "
                                          "page (URL, title, fetch time, source).")] = False,
    source: Annotated[str, typer.Option(help="With --fetched: only this source.")] = "",
    limit: Annotated[int, typer.Option(help="With --fetched: at most this many rows.")] = 200,
) -> None:
    """List the imported datasets and what the evidence sources fetched (the cache)."""
    from rich.table import Table

    from kgcheck.api import corpus_counts, default_store_path, fetched_evidence

    path = store or default_store_path()
    if not path.is_file():
        # Nothing imported is a state, not an error: RAG then reads the sample corpus.
        console.print(f"no corpus imported in {path}; RAG uses the sample corpus "
                      "(vendored/sample-corpus) until you run `kgcheck corpus import --dataset "
                      "NAME --from FOLDER_OR_TARBALL` (or a RAG run with --set sources=...)",
                      highlight=False)
        return
    counts = corpus_counts(path)
    if counts:
        table = Table(title=f"Evidence in {path}")
        for column in ("dataset", "facts", "documents"):
            table.add_column(column, justify="left" if column == "dataset" else "right")
        for name, (facts, docs) in counts.items():
            table.add_row(name, f"{facts:,}", f"{docs:,}")
        console.print(table)
    evidence = fetched_evidence(path, source=source, limit=limit)
    if evidence.counts:
        table = Table(title="Fetched by evidence sources (cached)")
        for column in ("source", "requests", "results", "last fetched"):
            table.add_column(column, justify="left" if column in ("source", "last fetched")
                             else "right")
        for name, (asked, results, last) in evidence.counts.items():
            table.add_row(name, f"{asked:,}", f"{results:,}", last)
        console.print(table)
    elif not counts:
        console.print(f"no corpus imported in {path}: it holds no documents and no fetched "
                      "evidence; run `kgcheck corpus import --dataset NAME --from "
                      "FOLDER_OR_TARBALL`", highlight=False)
    if fetched:
        # One line per item, never wrapped: URLs stay whole for copying and grepping.
        for item in evidence.items:
            console.print(f"{item.source}\t{item.fetched_at}\t{item.url}\t{item.title[:80]}",
                          markup=False, highlight=False, soft_wrap=True)
