"""``kgcheck estimate``: the KG's accuracy from a run's verdicts and a few human labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kgcheck.cli.app import Command, app, console, err_console, user_errors

Opt = typer.Option


def print_estimate(report: dict[str, Any]) -> None:
    """Print the three estimates as a table, then the cost lines."""
    truth = report.get("true_accuracy")
    from rich.table import Table

    table = Table(title=f"accuracy of {report['run']} ({report['confidence']:.0%} intervals, "
                        f"{report['design']})")
    for column in ("estimator", "accuracy", "ci_low", "ci_high", "width", "labels", "verdicts"):
        table.add_column(column, justify="left" if column == "estimator" else "right",
                         no_wrap=True)
    if truth is not None:
        table.add_column("covers truth", justify="center")
    for item in report["estimates"]:
        name = item["estimator"] + (" (biased)" if item["biased"] else "") + (
            " *" if item.get("fallback") else "")
        row = [name, f"{item['accuracy']:.3f}", f"{item['ci_low']:.3f}",
               f"{item['ci_high']:.3f}", f"{item['width']:.3f}", str(item["n_labeled"]),
               str(item["n_unlabeled"])]
        if truth is not None:
            row.append("yes" if item["covers_truth"] else "no")
        table.add_row(*row)
    console.print(table)
    for item in report["estimates"]:
        if item.get("fallback"):
            console.print(f"* {item['estimator']}: {item['fallback']}")
    if truth is not None:
        console.print(f"true accuracy (every gold label known): {truth:.3f}")
    cost = report["cost"]
    money = "" if cost["usd"] is None else f", ${cost['usd']:.4f}"
    tokens = "" if not cost["tokens_in"] else (f", {cost['tokens_in']:,} tokens in, "
                                               f"{cost['tokens_out'] or 0:,} out")
    console.print(f"cost: {cost['facts_checked']:,} facts checked, {cost['model_seconds']:,.0f} "
                  f"model seconds{tokens}{money}; {cost['human_labels']} human labels")
    if cost["labels_to_halve_ppi"]:
        console.print(f"halving the ppi interval takes about {cost['labels_to_halve_ppi']} more "
                      "labels (width goes as 1/sqrt(labels))")


@app.command("estimate", cls=Command)
@user_errors
def estimate(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="A run folder (kgcheck run or "
                                        "kgcheck import).")],
    labels: Annotated[Path | None, Opt(help="Human labels: kgcheck sample's CSV filled in, "
                                       "or a review's labels.csv.")] = None,
    gold_sample: Annotated[int | None, Opt(help="Draw N facts with known gold labels as if a "
                                           "person had labelled them.")] = None,
    seed: Annotated[int, Opt(help="Seed of the --gold-sample draw.")] = 0,
    confidence: Annotated[float, Opt(help="Confidence level of the intervals.")] = 0.95,
    stratify: Annotated[str | None, Opt(help="Strata: predicate, subject, object or "
                                        "verdict.")] = None,
    design: Annotated[str, Opt(help="--gold-sample design: srs, stratified or twcs.")] = "srs",
    cluster_size: Annotated[int, Opt(help="TWCS: facts per drawn cluster.")] = 3,
    data: Annotated[str | None, Opt(help="FactCheck data in the upstream layout.")] = None,
    plots: Annotated[bool, Opt(help="Draw the figures into RUN/plots.")] = True,
) -> None:
    """Estimate the KG's accuracy three ways; write RUN/estimate.json."""
    from kgcheck import api

    result = api.estimate(run, labels=labels, gold_sample=gold_sample, seed=seed,
                          confidence=confidence, stratify=stratify, design=design,
                          cluster_size=cluster_size, data=data, plots=plots)
    for warning in result.warnings:
        err_console.print(f"[bold yellow]warning:[/] {warning}")
    print_estimate(result.report)
    console.print(f"estimated: the accuracy of {result.report['population']['text']}",
                  highlight=False)
    console.print(f"estimate: {result.path}" + (f"  plots: {result.plots[0].parent}"
                                                 if result.plots else ""))
