"""``kgcheck review``: a person confirms or overturns a run's verdicts in the browser.

Argument parsing and presentation only: the review is ``kgcheck.api.open_review``'s and the
page is ``kgcheck.review.server``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kgcheck.cli.app import Command, app, user_errors
from kgcheck.cli.serving import check_port, host_option, port_option, serve_until_stopped


@app.command("review", cls=Command)
@user_errors
def review(
    run_dir: Annotated[Path, typer.Argument(
        metavar="RUN", help="A folder written by `kgcheck run` (run.json and verdicts.jsonl).")],
    only: Annotated[str | None, typer.Option(
        help="Review only these verdicts, comma-separated: F, T, NA, NEI, ties.")] = None,
    sample: Annotated[int | None, typer.Option(
        help="Review a random sample of this many (of those --only keeps).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of --sample (same seed, same facts).")] = 0,
    order: Annotated[str, typer.Option(
        help="Queue order: run (the run's), or uncertainty (NEI and the least certain "
        "confidences first, verdicts without a confidence last).")] = "run",
    port: Annotated[int, port_option()] = 8765,
    host: Annotated[str, host_option()] = "127.0.0.1",
    reviewer: Annotated[str | None, typer.Option(
        help="Your name or e-mail, kept with each decision.")] = None,
    annotator: Annotated[str | None, typer.Option(
        help="Review as this person, one of several: decisions go to "
        "RUN/labels-NAME.csv (see `kgcheck agreement`).")] = None,
    team: Annotated[str | None, typer.Option(
        help="Everyone reviewing the run, comma-separated: with --annotator, your share of "
        "the facts (see --overlap).")] = None,
    overlap: Annotated[float, typer.Option(
        help="With --team: the share of facts (0 to 1) everyone labels, for agreement; the "
        "rest go to one person each.")] = 0.0,
    adjudicate: Annotated[bool, typer.Option(
        "--adjudicate", help="Queue the facts the annotators labelled differently; "
        "decisions go to RUN/labels.csv.")] = False,
    stratify: Annotated[str | None, typer.Option(
        help="With --sample: draw it per stratum, by predicate or by verdict.")] = None,
    until_moe: Annotated[float | None, typer.Option(
        help="Label in random order until the accuracy estimate's margin of error is this "
        "small (e.g. 0.05); the page and this terminal say when.")] = None,
) -> None:
    """Serve a review page for a run; decisions go to RUN/labels.csv as they are made."""
    # Imported here, as in every command: the CLI starts light, and no graph is built
    # before a command that traces has started tracing.
    from kgcheck.api import Served, open_review
    from kgcheck.api import serve_review as serve

    check_port(port)

    labels: list[Path] = []

    def ready(served: Served) -> None:
        # Plain print: the address must stay on one line, whatever the terminal width.
        print(f"reviewing {run_dir}: open {served.url}", flush=True)
        print(f"decisions go to {labels[0]}; Ctrl-C stops (nothing is lost: "
              "start again to continue)", flush=True)

    def reached(found: dict[str, Any]) -> None:
        which = found.get("margin_from") or "ppi"
        best = found[which]
        print(f"margin of error {found['margin']:.3f} reached (target {until_moe}) after "
              f"{found['labels']} labels: accuracy {best['estimate']:.3f} "
              f"[{best['low']:.3f}, {best['high']:.3f}] ({which}); you may stop", flush=True)

    async def main() -> None:
        async with open_review(run_dir, only=only, sample=sample, seed=seed,
                               reviewer=reviewer, annotator=annotator,
                               team=[t for t in (team or "").split(",") if t.strip()],
                               overlap=overlap, adjudicate=adjudicate, stratify=stratify,
                               until_moe=until_moe, on_reached=reached,
                               order=order) as session:
            labels.append(session.labels_path)
            progress = session.progress()
            print(f"{progress['total']} facts in the queue, {progress['decided']} already "
                  "decided", flush=True)
            await serve(session, host=host, port=port, on_ready=ready)

    serve_until_stopped(main())
