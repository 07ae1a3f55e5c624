"""``kgcheck run``: a strategy over a dataset or a user's triples, resumable.

Argument parsing and presentation only: the run itself, and the checks of its arguments,
are ``kgcheck.api``'s.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from kgcheck.cli.app import app, console, err_console, say_error, say_warning, user_errors
from kgcheck.cli.flags import spell

Opt = typer.Option
# The API's default model (kgcheck.api.DEFAULT_MODEL; a test holds them equal): the
# command's module stays light, so that `kgcheck run --help` needs no model code.
DEFAULT_MODEL = "replay:gemma2:9b"
# Predicates shown after a run (all of them are in summary.json, `by_predicate`).
PREDICATE_ROWS = 10


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"


def _seconds(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_summary(summary: dict[str, Any]) -> None:
    """Print the run's scores as a table that fits 80 columns, the confusion matrix and cost.

    The model goes into the title (a long name wraps there at its own width, never inside a
    column); a consensus run adds one row per member, scored from that member's own votes.
    """
    from rich.table import Table

    members = list(summary.get("models") or [])
    consensus = "alignment" in summary
    who = f"consensus of {len(members)} models" if consensus else ", ".join(members)
    table = Table(title=f"{summary['method']} on {summary['dataset']}: {who}")
    for column in ("n", "F1(T)", "F1(F)", "acc", "macro-F1", "invalid", "errors", "s/call",
                   "facts/s"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_row(
        str(summary["n"]), _score(summary["f1_true"]), _score(summary["f1_false"]),
        _score(summary.get("accuracy")), _score(summary.get("macro_f1")),
        str(summary["invalid"]), str(summary["errors"]),
        _seconds(summary.get("mean_model_seconds")),
        _seconds(summary.get("facts_per_second"), 1),
    )
    console.print(table)
    console.print(f"cost {_usd(summary.get('cost_usd'))}"
                  + (f", tokens in {summary['tokens_in']:,}" if summary.get("tokens_in") else "")
                  + (f", out {summary['tokens_out']:,}" if summary.get("tokens_out") else ""),
                  highlight=False)
    intervals = summary.get("intervals")
    if intervals:
        names = {"accuracy": "acc", "f1_true": "F1(T)", "f1_false": "F1(F)",
                 "macro_f1": "macro-F1"}
        cells = [f"{name} [{intervals[k]['low']:.3f}, {intervals[k]['high']:.3f}]"
                 for k, name in names.items() if intervals[k]["low"] is not None]
        console.print(f"{intervals['confidence']:.0%} bootstrap intervals: " + ", ".join(cells),
                      highlight=False)
    repeats = summary.get("repeats")
    if repeats:
        macro = repeats["scores"]["macro_f1"]
        spread = ("" if macro["mean"] is None else f"; macro-F1 {macro['mean']:.3f} mean, "
                  f"{macro['min']:.3f} to {macro['max']:.3f}")
        console.print(f"{repeats['count']} repeats: {repeats['flipped_facts']} of "
                      f"{repeats['facts']} facts flipped, mean flip rate "
                      f"{repeats['mean_flip_rate']:.3f}, mean entropy "
                      f"{repeats['mean_entropy']:.3f} bits{spread} (verdicts: the majority)",
                      highlight=False)
    counts = summary.get("verdicts") or {}
    if counts:
        console.print("verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    _print_explained(summary)
    others = _other_columns(summary)
    matrix = summary.get("confusion")
    if matrix:
        console.print("confusion matrix (rows: gold, columns: verdict)")
        grid = Table()
        grid.add_column("gold")
        # The matrix's third column counts every verdict neither T nor F.
        for label in ("T", "F", " or ".join(others) or "NA"):
            grid.add_column(label, justify="right")
        for gold in ("T", "F"):
            grid.add_row(gold, *(str(matrix[gold][label]) for label in ("T", "F", "NA")))
        console.print(grid)
    cost = summary.get("cost") or {}
    if cost.get("unpriced"):
        console.print(f"cost: no price for {', '.join(cost['unpriced'])} in {cost['pricing']} "
                      "(give one with --pricing FILE)", highlight=False)
    screened = summary.get("prefilter")
    if screened:
        console.print(f"prefilter {screened['name']}: {screened['refuted']} of "
                      f"{screened['facts']} facts refuted by the rules, {screened['calls_saved']}"
                      f" model calls saved; {screened['sent_to_model']} sent to the model")
    cached = summary.get("cache")
    if cached and (cached.get("hits") or cached.get("misses")):
        console.print(f"answer cache: {_cached_verdicts(summary)}; {cached['hits']} answers "
                      f"reused, {cached['misses']} calls made ({cached['path']})",
                      highlight=False)
    level = summary.get("concurrency")
    if level:
        console.print(f"concurrency auto: ended at {level['final']}, peak {level['peak']}, "
                      f"{level['backoffs']} back-offs")
    _print_predicates(summary.get("by_predicate") or [], others)
    if consensus:
        _print_consensus(summary, members)


def _cached_verdicts(summary: dict[str, Any]) -> str:
    """Say how many verdicts the answer cache served (no model ran for them) of how many."""
    served = int(summary.get("cached_verdicts") or 0)
    total = int(summary.get("n") or 0)
    if not served:
        return f"no verdict of {total} came from the cache"
    return (f"{served} of {total} verdicts came from the cache, not from a model call now "
            "(their times are the original calls')")


def _print_explained(summary: dict[str, Any]) -> None:
    """Print coverage (with NEI verdicts), confidence scores and answer problems, if any."""
    if summary.get("nei"):
        console.print(f"coverage {_score(summary.get('coverage'))} (NEI {summary['nei']}), "
                      f"accuracy over covered facts {_score(summary.get('accuracy_covered'))}",
                      highlight=False)
    scores = (summary.get("calibration") or {}).get("scores")
    if scores:
        console.print(f"confidence over {scores['n']} labelled verdicts: AUROC "
                      f"{_score(scores['auroc'])}, AUPRC {_score(scores['auprc'])}, Brier "
                      f"{_score(scores['brier'])}, ECE {_score(scores['ece'])}",
                      highlight=False)
    problems = summary.get("answer_problems") or {}
    if problems:
        console.print("answer problems: " + "; ".join(f"{k} ({v})" for k, v in problems.items()),
                      highlight=False, markup=False)


def _other_columns(summary: dict[str, Any]) -> list[str]:
    """Return the labels besides T and F the run's tables give a column each."""
    if "label_columns" in summary:
        return list(summary["label_columns"])
    # A summary of an older kgcheck: NA, and NEI when its verdicts hold some.
    held = summary.get("verdicts") or {}
    return [label for label in ("NEI", "NA") if label == "NA" or held.get(label)]


def _print_predicates(rows: list[dict[str, Any]], others: list[str]) -> None:
    """Print the predicates, the ones most often judged false first (at most ``PREDICATE_ROWS``).

    ``others``: the labels besides T and F, a column each (NEI and NA counted apart).
    """
    from rich.table import Table

    if len(rows) < 2:
        return  # one predicate: the run's own figures above say it all
    shown = sorted(rows, key=lambda r: (-float(r.get("judged_false") or 0), -int(r["n"]),
                                        str(r["predicate"])))
    more = len(shown) - PREDICATE_ROWS
    table = Table(title="per predicate, most often judged false first"
                  + (f" (top {PREDICATE_ROWS} of {len(shown)})" if more > 0 else ""))
    table.add_column("predicate", overflow="fold")
    for column in ("n", "false", "true", *others, "acc"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in shown[:PREDICATE_ROWS]:
        false = row.get("judged_false")
        # A row counts NEI apart ("nei") and every answer neither T nor F ("na").
        counts = {"NEI": row.get("nei") or 0, "NA": row["na"] - (row.get("nei") or 0)}
        table.add_row(str(row["predicate"]), str(row["n"]),
                      "-" if false is None else f"{false:.0%}", f"{row['judged_true']:.0%}",
                      *(str(counts[label]) for label in others), _score(row.get("accuracy")))
    console.print(table)


def _print_consensus(summary: dict[str, Any], members: list[str]) -> None:
    """Print the members' own scores and alignment, the ties and the judge."""
    from rich.table import Table

    scores = summary.get("member_scores") or {}
    alignment = summary.get("alignment") or {}
    table = Table(title="members (each scored on its own votes)")
    table.add_column("member", overflow="fold")
    for column in ("F1(T)", "F1(F)", "NA votes", "failed", "CA_M"):
        table.add_column(column, justify="right", no_wrap=True)
    for member in members:
        own = scores.get(member) or {}
        ca = alignment.get(member)
        table.add_row(member, _score(own.get("f1_true")), _score(own.get("f1_false")),
                      str(own.get("na", "-")), str(own.get("errors", "-")),
                      "-" if ca is None else f"{ca:.3f}")
    console.print(table)
    ties = summary.get("ties", 0)
    n = summary.get("n") or 0
    share = f" ({100 * ties / n:.1f} %)" if n else ""
    judge = summary.get("judge_model") or "none"
    if judge == "none":
        console.print(f"ties: {ties} of {n}{share}, left NA (no judge)", highlight=False)
    else:
        console.print(f"ties: {ties} of {n}{share}; judge {judge} asked "
                      f"{summary.get('judge_calls', 0)} times, decided "
                      f"{summary.get('judge_decided', 0)}", highlight=False)
    console.print("CA_M: how often a member agrees with the majority where there is one",
                  highlight=False)


def print_estimate(found: Any, out_dir: Path) -> None:
    """Print a dry run's estimate: facts, calls, tokens and cost per model."""
    from rich.table import Table

    console.print(f"dry run: {found.facts:,} facts to check"
                  + (f" ({found.skipped:,} unsendable, skipped)" if found.skipped else "")
                  + f"; run folder {out_dir}", highlight=False)
    screened = found.prefilter
    if screened:
        console.print(f"prefilter {screened['name']}: {screened['refuted']:,} of "
                      f"{screened['facts']:,} facts refuted by the rules without a model call, "
                      f"{screened['calls_saved']:,} calls saved; {screened['sent_to_model']:,} "
                      "go to the model", highlight=False)
    table = Table(title="estimate before any call")
    table.add_column("model", overflow="fold", min_width=12, max_width=36)
    for column in ("calls", "at most", "tokens in", "cost in", "cost, at most"):
        table.add_column(column, justify="right", no_wrap=True)
    for model, row in found.by_model.items():
        most = None if row["usd_in"] is None else row["usd_in"] + row["max_usd_out"]
        table.add_row(model, f"{row['calls']:,}", f"{row['max_calls']:,}",
                      f"{row['tokens_in']:,}", _usd(row["usd_in"]), _usd(most))
    console.print(table)
    console.print(f"total: {found.calls:,} calls (at most {found.max_calls:,}), "
                  f"{found.tokens_in:,} input tokens, at most {found.max_tokens_out:,} output "
                  f"tokens (max_tokens per call); cost {_usd(found.cost_in_usd)} for input, at "
                  f"most {_usd(found.max_cost_usd)} in all",
                  highlight=False)
    console.print(f"tokens counted with {found.tokenizer}", highlight=False)
    if found.unpriced:
        console.print(f"no price for {', '.join(found.unpriced)} (give one with --pricing FILE)",
                      highlight=False)
    for note in found.notes:
        console.print(f"note: {note}", highlight=False)


# The command's own flags besides the RunSpec fields: how this process runs, not the run.
COMMAND_FLAGS: dict[str, tuple[Any, Any]] = {
    "no_cache": (bool, Opt("--no-cache", help="Ask the model every time; neither read nor "
                           "write the answer cache.", rich_help_panel="Engine options")),
    "trace": (bool, Opt(help="Send OpenLIT traces (OTEL_EXPORTER_OTLP_ENDPOINT).",
                        rich_help_panel="Output options")),
    "dry_run": (bool, Opt(help="Print how many facts and calls the run will make and the "
                          "estimated tokens and cost, then exit.",
                          rich_help_panel="Output options")),
}


def _parameters() -> list[inspect.Parameter]:
    """Return the command's options: every RunSpec field it is offered, then its own flags."""
    from kgcheck.cli.options import option_parameters
    from kgcheck.options import RunSpec

    # The context says which options were given (a resume from the folder takes the rest).
    context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=typer.Context)
    own = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=False,
                             annotation=Annotated[kind, flag])
           for name, (kind, flag) in COMMAND_FLAGS.items()]
    return [context, *option_parameters(RunSpec), *own]


def run(ctx: typer.Context, *, no_cache: bool = False, trace: bool = False,
        dry_run: bool = False, **options: Any) -> None:
    """Check facts with a strategy; verdicts go to OUT/verdicts.jsonl, scores to summary.json."""
    from kgcheck import api

    # httpx and the model clients log request URLs: mask their credentials first.
    api.redact_logs()
    # Before any graph is built, so that OpenLIT wraps every node; with --trace, or
    # whenever OTEL_EXPORTER_OTLP_ENDPOINT is set.
    api.setup_tracing(force=trace)
    # The command reports failed evidence sources itself, once, after the run.
    logging.getLogger("kgcheck.evidence").addHandler(logging.NullHandler())
    # An option left at None takes the field's default (the cache's is the default file).
    given = {name: value for name, value in options.items() if value is not None}
    if no_cache:
        given["cache"] = False
    if (given.get("resume") or given.get("fresh")) and given.get("out") is not None:
        given = _from_folder(given, _explicit(ctx))
    elif given.get("settings"):
        # --set KEY=VALUE, read by the type of the strategy's (or consensus's) settings.
        given["settings"] = api.parse_setting_pairs(
            given["settings"], given.get("strategy", "dka"),
            consensus=bool(given.get("consensus")))
    spec = api.RunSpec(**given)
    if dry_run:
        plan, found = api.dry_run_spec(spec, warn=_warn)
        print_estimate(found, plan.out_dir)
        return
    _run(spec)


# The options a run folder's run.json records (``arguments``): a resume or a fresh start
# given only --out takes those it is not given from there (kgcheck.runs.resume_from).
FOLDER_OPTIONS = ("dataset", "triples", "sparql", "graph", "where", "strategy", "model",
                  "consensus", "judge", "data", "limit", "sample", "seed", "stratify",
                  "per_stratum", "ids", "labels", "settings", "as_dataset", "pricing",
                  "predicates", "exclude_predicates", "ci", "repeats", "prefilter", "rules",
                  "shards_uri", "base_iri")
# Options that are settings of the strategy (or its rules) with a flag of their own.
SETTING_OPTIONS = ("prompt", "base_url", "replay_latency")
RULE_OPTIONS = ("ontology", "shapes")


def _from_folder(given: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
    """Return the options of a resume (or fresh start) in --out.

    They are the folder's run's, with the ones given in their place.
    """
    from kgcheck import api
    from kgcheck.options import RunSpec

    resume, fresh, out = given.get("resume"), given.get("fresh"), given["out"]
    restarted = fresh and not resume and explicit & {"dataset", "triples", "sparql"}
    stored = None if restarted else api.stored_arguments(out)
    strategy = given.get("strategy", "dka")
    members = given.get("consensus")
    members = members.split(",") if isinstance(members, str) else members
    if stored:
        # The settings are read against the folder's strategy, unless another is given.
        strategy = strategy if "strategy" in explicit else stored.get("strategy", strategy)
        members = members if "consensus" in explicit else stored.get("consensus")
    values = api.parse_setting_pairs(given.get("settings") or [], strategy,
                                     consensus=bool(members))
    values.update({k: given[k] for k in SETTING_OPTIONS if given.get(k)})
    rules = {k: given[k] for k in RULE_OPTIONS if given.get(k)}
    if strategy == "schema" and not given.get("prefilter"):
        values.update(rules)
        rules = {}
    defaults = {name: RunSpec.model_fields[name].default for name in FOLDER_OPTIONS}
    arguments = {**defaults, **{k: given[k] for k in FOLDER_OPTIONS if k in given},
                 "strategy": strategy, "consensus": members, "settings": values,
                 "rules": rules or None,
                 "ids": api.parse_ids(given["ids"]) if given.get("ids") else None}
    chosen = {name for name in explicit if name in arguments}
    if rules and explicit & set(RULE_OPTIONS):
        chosen.add("rules")
    # --resume and --fresh together are refused by the spec, in the API's words.
    take = api.fresh_arguments if fresh and not resume else api.resume_arguments
    merged = take(out, arguments, explicit=chosen)
    rest = {k: v for k, v in given.items()
            if k not in FOLDER_OPTIONS and k not in SETTING_OPTIONS + RULE_OPTIONS}
    return {**rest, **{k: v for k, v in merged.items() if k in FOLDER_OPTIONS}}


def _run(spec: Any) -> None:
    """Run a spec, saying where answers are cached; report its outcome."""
    from kgcheck import api

    planned: list[Any] = []

    def announce(plan: Any) -> None:
        planned.append(plan)
        if spec.cache is not False:
            # Said once: answers are kept across runs, which a user may not expect.
            err_console.print(f"answer cache: {api.cache_path(spec.cache)} (--no-cache asks "
                              "the model every time)", soft_wrap=True, markup=False,
                              highlight=False)
        if spec.resume and not api.has_verdicts(plan.out_dir):
            err_console.print(f"note: nothing to resume in {plan.out_dir}; starting a new run",
                              markup=False, highlight=False)

    try:
        result = api.run_coroutine(api.run_spec(spec, warn=_warn, on_plan=announce))
    except KeyboardInterrupt:
        if not planned:
            raise typer.Exit(130) from None
        out_dir = planned[0].out_dir
        kept = len(api.read_verdicts(out_dir))
        err_console.print(f"interrupted: {kept} verdicts are kept in "
                          f"{api.verdicts_location(out_dir)}; "
                          f"continue with {_resume_flags(out_dir)}", markup=False,
                          highlight=False)
        raise typer.Exit(130) from None
    plan = planned[0]
    out_dir = plan.out_dir
    print_summary(result.summary)
    # One line each, never wrapped: paths stay whole for copying.
    console.print(f"verdicts: {api.verdicts_location(out_dir)}", soft_wrap=True, markup=False,
                  highlight=False)
    console.print(f"summary: {out_dir / 'summary.json'}", soft_wrap=True, markup=False,
                  highlight=False)
    if result.summary["n"] > result.summary.get("asked", result.summary["n"]):
        err_console.print(f"note: the summary covers all {result.summary['n']} verdicts in "
                          f"{out_dir}; this run asked for {result.summary['asked']} facts "
                          "(--limit)", markup=False, highlight=False)
    outcomes = result.outcome_counts()
    _report_source_failures(outcomes)
    retry = _resumable(plan)
    if result.aborted:
        if result.summary.get("aborted_because") == "configuration":
            advice = f"fix the setting and start again with --fresh --out {out_dir}"
        elif retry:
            advice = ("the verdicts written so far are kept: rerun with "
                      f"{_resume_flags(out_dir)}")
        else:
            advice = retry_advice(plan)
        say_error(f"{result.aborted}; {advice}")
        raise typer.Exit(1)
    _report_errors(outcomes, out_dir, retry=retry, advice=retry_advice(plan))


def _explicit(ctx: typer.Context) -> set[str]:
    """Return the names of the options given on the command line (or the environment)."""
    # By name: typer may bring its own copy of click, with its own ParameterSource.
    given = {"COMMANDLINE", "ENVIRONMENT", "PROMPT"}
    return {name for name in ctx.params
            if getattr(ctx.get_parameter_source(name), "name", None) in given}


def _resume_flags(out_dir: Path) -> str:
    return f"{spell('resume', True)} {spell('out', out_dir)}"


def _resumable(plan: Any) -> bool:
    """Tell whether running the same facts again can change their failed verdicts.

    Recorded answers are fixed: a replay model that failed a fact fails it every time.
    """
    return not all(str(m).startswith("replay:") for m in plan.members)


def retry_advice(plan: Any) -> str:
    """Say what can help when running again cannot: replay answers only recorded facts."""
    return (f"a rerun cannot help: {', '.join(plan.members)} replays the same recorded "
            "answers every time")


def _warn(message: str) -> None:
    say_warning(message)


def _report_source_failures(outcomes: Any) -> None:
    """Say once per evidence source that it failed, for how many facts, and why."""
    for source, reasons in outcomes.sources.items():
        reason, _ = reasons.most_common(1)[0]
        say_warning(f"evidence source {source} failed for {sum(reasons.values())} of "
                    f"{outcomes.facts} facts: {reason}")


def _report_errors(outcomes: Any, out_dir: Path, *, retry: bool = True,
                   advice: str = "") -> None:
    """Say why facts failed (the commonest error); fail the command when every fact did.

    Defective input (a triple that cannot be sent to a model) is reported as skipped: no
    retry can change it, so the advice is to fix the input, not to resume. ``outcomes`` is
    the run's ``RunOutcomes``.
    """
    if outcomes.skipped:
        shown = "; ".join(outcomes.examples)
        more = (f" and {outcomes.skipped - len(outcomes.examples)} more"
                if outcomes.skipped > len(outcomes.examples) else "")
        err_console.print(f"note: {outcomes.skipped} fact(s) skipped as invalid input ({shown}"
                          f"{more}); they cannot be checked as they are: fix them in the "
                          "input", highlight=False)
    if not outcomes.failed:
        return
    commonest, count = outcomes.errors.most_common(1)[0]
    if outcomes.failed == outcomes.facts - outcomes.skipped:
        then = (f"rerun with {_resume_flags(out_dir)} once the cause is fixed" if retry
                else advice)
        say_error(f"every fact failed, e.g. {commonest}; {then}")
        raise typer.Exit(1)
    then = f"{_resume_flags(out_dir)} retries them" if retry else advice
    say_warning(f"{outcomes.failed} of {outcomes.facts} facts failed ({count} with: "
                f"{commonest}); {then}")


def _register() -> None:
    """Register ``run`` with the options made from the RunSpec fields."""
    from kgcheck.cli.options import command_of

    app.command("run")(user_errors(command_of(run, _parameters(), run.__doc__ or "")))


_register()
