"""``kgcheck errors``: why models fail: explain, cluster, name and count the wrong verdicts.

Argument parsing and presentation only: the analysis is done by ``kgcheck.api.analyse_errors``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from kgcheck.cli.app import Command, app, console, user_errors


def errors(
    run_dirs: Annotated[list[Path], typer.Argument(
        metavar="RUN...", help="Folders written by `kgcheck run`, with gold labels or a "
        "review (labels.csv).")],
    out: Annotated[Path, typer.Option(help="Folder for errors.jsonl, clusters.json, the "
                                           "tables and the UMAP plot.")],
    model: Annotated[str | None, typer.Option(
        help="Model that explains the errors (default: each run's own), e.g. "
        "ollama:gemma2:9b or local:smollm2-135m.")] = None,
    embedder: Annotated[str, typer.Option(
        help="Embedder of the explanations (minilm offline; hf:<model>, ollama:<model>, "
        "openai:<model>).")] = "minilm",
    max_errors: Annotated[int | None, typer.Option(
        help="Analyse at most this many errors per run (a seeded sample).")] = 500,
    seed: Annotated[int, typer.Option(help="Seed of the sample, UMAP and so of the "
                                           "clusters.")] = 0,
    taxonomy: Annotated[bool, typer.Option(
        help="Also sort each explanation into a category (Table 9).")] = False,
    taxonomy_prompt: Annotated[str, typer.Option(
        help="Taxonomy prompt file: its '- CODE (Name): ...' lines are the categories.")]
    = "errors_taxonomy.txt",
    name_with_model: Annotated[bool, typer.Option(
        help="Name the clusters by the model instead of by their c-TF-IDF keywords.")]
    = False,
    min_cluster_size: Annotated[int, typer.Option(help="HDBSCAN's smallest cluster.")] = 5,
    concurrency: Annotated[int, typer.Option(help="Model calls at once.")] = 4,
    max_tokens: Annotated[int, typer.Option(help="Most tokens per model reply.")] = 160,
    temperature: Annotated[float | None, typer.Option(
        help="Sampling temperature of the model (default: the model settings').")] = None,
    base_url: str | None = None, settings: list[str] | None = None,
) -> None:
    """Explain each wrong verdict with a model, cluster the explanations, write the tables."""
    from kgcheck.api import analyse_errors

    if max_errors is not None and max_errors < 1:
        raise ValueError(f"--max-errors {max_errors}: expected 1 or more")
    done = analyse_errors(run_dirs, out, model=model, embedder=embedder, seed=seed,
                          cap=max_errors, taxonomy=taxonomy, taxonomy_prompt=taxonomy_prompt,
                          name_with_model=name_with_model, min_cluster_size=min_cluster_size,
                          concurrency=concurrency, base_url=base_url,
                          settings=[*(settings or []), f"max_tokens={max_tokens}",
                                    *([f"temperature={temperature}"] if temperature is not None
                                      else [])])
    s = done.summary
    for run in s["runs"]:
        console.print(f"{run['run']}: {run['wrong']} wrong of {run['scored']} labelled "
                      f"({run['truth']}), {run['analysed']} analysed, "
                      f"{run['reused_explanations']} explanations reused", highlight=False)
    console.print(f"{s['errors']} explanations in {s['clusters']} clusters "
                  f"({s['noise']} noise), named by {s['named_by']}", highlight=False)
    for row in s["cluster_rows"]:
        console.print(f"  {row['cluster']:>3}  {row['size']:>5}  {row['label']}",
                      highlight=False)
    if s["unexplained"]:
        console.print(f"{len(s['unexplained'])} errors not explained (first: "
                      f"{s['unexplained'][0]['problem']}); run again to retry them",
                      highlight=False)
    console.print(f"wrote {out / 'errors.jsonl'}, {out / 'tables.md'}, {out / 'umap.png'}",
                  highlight=False)


def _register() -> None:
    """Register ``errors`` with the model options every command that asks a model shares."""
    from kgcheck.cli.options import command_of, option_parameters
    from kgcheck.options import ModelOptions

    # Its own --model (default: each run's own); the rest of the model group as run's.
    names = ["base_url", "settings"]
    own = [p for p in inspect.signature(errors, eval_str=True).parameters.values()
           if p.name not in names]
    shared = option_parameters(ModelOptions, names)
    made: Any = command_of(errors, [*own, *shared], errors.__doc__ or "")
    app.command("errors", cls=Command)(user_errors(made))


_register()
