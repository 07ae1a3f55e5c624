"""``kgcheck sample``: draw the facts a person should label, as an annotators' CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgcheck.cli.app import app, console, user_errors

Opt = typer.Option


@app.command("sample")
@user_errors
def sample(
    n: Annotated[int, Opt("--n", help="How many facts to draw.")],
    out: Annotated[Path, Opt(help="The CSV to write (fact_id, triple, text, empty label, "
                             "weight, stratum, cluster, design).")],
    dataset: Annotated[str | None, Opt(help="Dataset name (see `kgcheck datasets`).")] = None,
    triples: Annotated[Path | None, Opt(help="Your own facts: .csv, .tsv or .jsonl.")] = None,
    run: Annotated[Path | None, Opt(help="A run folder: the facts it checked.")] = None,
    design: Annotated[str, Opt(help="srs (simple random), stratified, or twcs (clusters "
                               "by subject).")] = "srs",
    stratify: Annotated[str | None, Opt(help="Stratum key: predicate, subject, object, or "
                                        "verdict (with --run).")] = None,
    cluster_size: Annotated[int, Opt(help="TWCS: facts labelled per drawn cluster.")] = 3,
    seed: Annotated[int, Opt(help="Random seed: the same seed draws the same facts.")] = 0,
    data: Annotated[str | None, Opt(help="FactCheck data in the upstream layout.")] = None,
) -> None:
    """Draw facts to label (seeded), with each fact's design weight."""
    from kgcheck import api

    if design == "srs" and stratify:
        design = "stratified"
    drawn = api.sample(n=n, out=out, dataset=dataset, triples=triples, run=run, design=design,
                       stratify=stratify, cluster_size=cluster_size, seed=seed, data=data)
    strata = len({d.stratum for d in drawn.draws if d.stratum})
    clusters = len({d.cluster for d in drawn.draws if d.cluster})
    extra = (f", {strata} strata" if strata else "") + (f", {clusters} cluster draws"
                                                        if clusters else "")
    console.print(f"{len(drawn.draws)} of {drawn.population} facts drawn ({drawn.design}"
                  f"{extra}, seed {seed}): {drawn.path}")
    console.print("fill the label column with T or F (idk when unsure), then: kgcheck "
                  f"estimate RUN --labels {drawn.path}")
