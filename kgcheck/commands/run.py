"""``kgcheck run``: a strategy over a dataset or a user's triples, resumable."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from graphs.context import DEFAULT_MODEL
from kgcheck.app import app, console, err_console, user_errors

Opt = typer.Option


def parse_settings(pairs: list[str], context_cls: type) -> dict[str, Any]:
    """Turn ``--set key=value`` pairs into typed Context values."""
    fields = {f.name: f for f in dataclasses.fields(context_cls)}
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise ValueError(f"--set {pair!r}: expected key=value")
        if key not in fields:
            raise ValueError(
                f"--set {key}: unknown setting; known: {', '.join(sorted(fields))}"
            )
        default = fields[key].default
        try:
            if isinstance(default, bool):
                value: Any = raw.strip().lower() in ("1", "true", "yes", "on")
            elif isinstance(default, int):
                value = int(raw)
            elif isinstance(default, float):
                value = float(raw)
            elif isinstance(default, list | tuple):
                value = [item.strip() for item in raw.split(",") if item.strip()]
            else:
                value = raw
        except ValueError:
            raise ValueError(f"--set {key}={raw!r}: expected a {type(default).__name__}") from None
        values[key] = value
    return values


def default_out_dir(source: str, method: str, models: list[str]) -> Path:
    """``runs/<source>-<method>-<model>``, with characters unsafe in file names replaced."""
    label = models[0] if len(models) == 1 else f"consensus{len(models)}"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{source}-{method}-{label}").strip("-")
    return Path("runs") / slug.lower()


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_summary(summary: dict[str, Any]) -> None:
    """Print the run's scores as a table."""
    table = Table(title=f"{summary['method']} on {summary['dataset']}")
    table.add_column("model", overflow="fold", max_width=36)
    for column in ("n", "F1(T)", "F1(F)", "invalid", "errors", "s/call", "facts/s"):
        table.add_column(column, justify="right", no_wrap=True)
    mean = summary.get("mean_model_seconds")
    table.add_row(
        "\n".join(summary["models"]),
        str(summary["n"]),
        _score(summary["f1_true"]),
        _score(summary["f1_false"]),
        str(summary["invalid"]),
        str(summary["errors"]),
        "-" if mean is None else f"{mean:.2f}",
        "-" if summary.get("facts_per_second") is None else f"{summary['facts_per_second']:.1f}",
    )
    console.print(table)
    counts = summary.get("verdicts") or {}
    if counts:
        console.print("verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for key in ("tie_rate", "judge_calls", "judge_model", "alignment"):
        if key in summary:
            console.print(f"{key}: {summary[key]}")


@app.command("run")
@user_errors
def run(
    dataset: Annotated[str | None, Opt(help="Dataset name (see `kgcheck datasets`).")] = None,
    triples: Annotated[Path | None, Opt(help="Your own facts: .csv, .tsv or .jsonl with "
                                        "subject, predicate, object[, id, label].")] = None,
    method: Annotated[str, Opt(help="Strategy: dka, giv-z, giv-f, rag, ...")] = "dka",
    model: Annotated[str, Opt(help="provider:model, e.g. ollama:gemma2:9b.")] = DEFAULT_MODEL,
    data: Annotated[str | None, Opt(help="FactCheck data in the upstream layout.")] = None,
    limit: Annotated[int | None, Opt(help="Check only the first N facts.")] = None,
    concurrency: Annotated[int, Opt(help="Facts checked at once.")] = 4,
    out: Annotated[Path | None, Opt(help="Run folder (default runs/<data>-<method>-<model>)")] = (
        None
    ),
    resume: Annotated[bool, Opt(help="Continue the run in --out.")] = False,
    fresh: Annotated[bool, Opt(help="Discard what --out holds and start over.")] = False,
    prompt: Annotated[str | None, Opt(help="Prompt file (name in prompts/ or a path).")] = None,
    base_url: Annotated[str | None, Opt(help="Server URL for ollama/openai-compatible.")] = None,
    replay_latency: Annotated[float, Opt(help="Replay: sleep this x the recorded time.")] = 0.0,
    consensus: Annotated[str | None, Opt(help="Member models, comma-separated: multi-model "
                                         "consensus over --method.")] = None,
    judge: Annotated[str, Opt(help="Tie-break: model spec, cons-up, cons-down, none")] = "none",
    settings: Annotated[list[str] | None, Opt("--set", help="Context setting key=value "
                                              "(repeatable), e.g. --set max_attempts=5.")] = None,
    trace: Annotated[bool, Opt(help="Send OpenLIT traces (OTEL_EXPORTER_OTLP_ENDPOINT).")] = False,
    progress: Annotated[bool, Opt(help="Show a progress bar.")] = True,
) -> None:
    """Check facts with a strategy; verdicts go to OUT/verdicts.jsonl, scores to summary.json."""
    from evals.datasets import load_facts
    from evals.runner import RECURSION_LIMIT, RunInfo, run_facts
    from graphs.models import ModelOptions, resolve_model, split_spec
    from graphs.registry import get_strategy
    from graphs.upstream import as_source, canonical_dataset
    from kgcheck.triples import read_triples

    if (dataset is None) == (triples is None):
        raise ValueError("give exactly one of --dataset NAME or --triples FILE")
    if resume and fresh:
        raise ValueError("--resume and --fresh contradict each other; pick one")
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be at least 1, got {limit}")
    if replay_latency < 0:
        raise ValueError(f"--replay-latency must be 0 or more, got {replay_latency}")
    if judge != "none" and not consensus:
        raise ValueError(f"--judge {judge} needs --consensus MODEL,MODEL,... (the members "
                         "whose ties it breaks)")
    if trace:
        from kgcheck.tracing import setup_tracing

        setup_tracing(force=True)
    strategy = get_strategy(method)
    members = [m.strip() for m in consensus.split(",") if m.strip()] if consensus else [model]
    for spec in members + ([judge] if judge not in ("none", "cons-up", "cons-down") else []):
        split_spec(spec)

    if triples is not None:
        facts = read_triples(triples)
        source_name = facts[0].dataset
        source = str(triples.resolve())
    else:
        src = as_source(data)
        source_name = canonical_dataset(src, dataset or "")
        facts = load_facts(source_name, src)
        source = src.location
    if limit is not None:
        facts = facts[:limit]
    _check_replay(members, data, source_name, strategy.method, bool(triples))

    values: dict[str, Any] = {"model": members[0], "data_dir": data or ""}
    if prompt:
        values["prompt"] = prompt
    if base_url:
        values["base_url"] = base_url
    if replay_latency:
        values["replay_latency"] = replay_latency
    context_cls = strategy.context
    if consensus:
        from graphs.consensus import settings_class

        context_cls = settings_class(strategy.context)
    values.update(parse_settings(settings or [], context_cls))
    # Build every model once now, so a missing key or URL stops the run before it starts.
    for spec in members + ([judge] if judge not in ("none", "cons-up", "cons-down") else []):
        resolve_model(spec, ModelOptions.from_context(strategy.make_context(**values)))
    _check_prompt_files(strategy.make_context(**values))
    if strategy.preflight:
        for warning in strategy.preflight(facts, strategy.make_context(**values)):
            err_console.print(f"[bold yellow]warning:[/] {warning}")
    out_dir = out or default_out_dir(source_name, strategy.name, members)
    if resume and not (out_dir / "verdicts.jsonl").exists():
        err_console.print(f"note: nothing to resume in {out_dir}; starting a new run")
    info = RunInfo(dataset=source_name, method=strategy.method, models=members,
                   judge=judge if consensus else None, source=source,
                   settings=_recordable(values))

    if consensus:
        from evals.consensus_run import run_consensus

        job = run_consensus(
            facts, strategy=strategy, members=members, judge=judge, values=values, info=info,
            out_dir=out_dir, concurrency=concurrency, resume=resume, fresh=fresh,
            show_progress=progress,
        )
    else:
        ctx = strategy.make_context(**values)
        graph = strategy.compile()

        async def invoke(fact: Any) -> dict[str, Any]:
            return await graph.ainvoke(
                {"fact": fact.as_input()}, context=ctx,
                config={"recursion_limit": RECURSION_LIMIT,
                        "metadata": {"kgcheck_run_id": info.run_id}},
            )

        job = run_facts(facts, invoke, info, out_dir, concurrency=concurrency, resume=resume,
                        fresh=fresh, show_progress=progress)
    try:
        result = asyncio.run(job)
    except KeyboardInterrupt:
        from evals.runner import VERDICTS, read_verdicts

        kept = len(read_verdicts(out_dir / VERDICTS))
        err_console.print(f"interrupted: {kept} verdicts are kept in {out_dir / VERDICTS}; "
                          f"continue with --resume --out {out_dir}")
        raise typer.Exit(130) from None
    print_summary(result.summary)
    console.print(f"verdicts: {out_dir / 'verdicts.jsonl'}  summary: {out_dir / 'summary.json'}")
    if result.aborted:
        advice = (f"fix the setting and start again with --fresh --out {out_dir}"
                  if result.summary.get("aborted_because") == "configuration" else
                  f"the verdicts written so far are kept: rerun with --resume --out {out_dir}")
        err_console.print(f"[bold red]error:[/] {result.aborted}; {advice}")
        raise typer.Exit(1)
    _report_errors(result.records, out_dir)


def _report_errors(records: list[dict[str, Any]], out_dir: Path) -> None:
    """Say why facts failed (the commonest error); fail the command when every fact did."""
    errors = [str(r["error"]) for r in records if r.get("error")]
    if not errors:
        return
    commonest, count = Counter(errors).most_common(1)[0]
    if len(errors) == len(records):
        err_console.print(f"[bold red]error:[/] every fact failed, e.g. {commonest}; rerun "
                          f"with --resume --out {out_dir} once the cause is fixed")
        raise typer.Exit(1)
    err_console.print(f"[bold yellow]warning:[/] {len(errors)} of {len(records)} facts failed "
                      f"({count} with: {commonest}); --resume --out {out_dir} retries them")


def _check_prompt_files(ctx: Any) -> None:
    """Fail before the run starts when a prompt file setting names no file."""
    from prompts import prompt_path

    for item in dataclasses.fields(ctx):
        value = getattr(ctx, item.name)
        if (item.name == "prompt" or item.name.endswith("_prompt")) and value:
            prompt_path(value)


def _recordable(values: dict[str, Any]) -> dict[str, Any]:
    """Return the settings to write into run.json: no data path, no credentials in URLs."""
    from graphs.models import redact_url

    kept = {k: v for k, v in values.items() if k != "data_dir"}
    if kept.get("base_url"):
        kept["base_url"] = redact_url(kept["base_url"])
    return kept


def _check_replay(models: list[str], data: str | None, dataset: str, method: str,
                  own_triples: bool) -> None:
    """Fail early, with the alternatives, when a replay model has nothing recorded."""
    from graphs.replay import has_recordings, recorded_models

    for spec in models:
        provider, _, name = spec.partition(":")
        if provider != "replay":
            continue
        if own_triples:
            raise ValueError(f"{spec} only answers facts of a recorded dataset, not --triples; "
                             "pick a live model (ollama:..., openai:...)")
        if not has_recordings(data, name, dataset, method):
            raise ValueError(
                f"{spec} has no recorded {method} answers for {dataset}; recorded models: "
                + ", ".join(recorded_models(data))
            )
