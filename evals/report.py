"""Tables and plots from ``kgcheck run`` folders, beside the study's rows, and the writer.

A run folder holds ``run.json`` (dataset, method, models, judge), ``verdicts.jsonl`` (one
Verdict per fact plus ``dataset`` and ``gold``) and ``summary.json``. A single-model run
gives that model's rows; a consensus run (several models) gives its members' rows from the
votes each verdict records, their alignment and ties, and the consensus F1 under its judge.
With the study's rows added, those are computed over the same facts the runs checked, so a
new prompt or model is compared with the study like for like.

A run folder that a person reviewed (``kgcheck review``) also holds ``labels.csv``: the
report then counts, per method and model, the verdicts reviewed and how often the person
overturned the model.

``write_outputs`` writes ``tables.md``, ``tables.json`` and ``plots/`` for both
``kgcheck report`` and ``kgcheck reproduce``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgcheck.arguments import Arg, ArgumentError, literal
from kgcheck.data.atomic import write_text_atomic
from kgcheck.data.runfolder import (
    LABELS_FILE,
    RUN_INFO,
    VERDICTS,
    LabelRow,
    has_verdicts,
    read_labels,
    read_run_info,
    read_summary,
    read_verdicts,
)
from kgcheck.data.truths import run_truths
from kgcheck.data.upstream import DataError, DataSource, open_data
from kgcheck.evals.calibration import run_calibration
from kgcheck.evals.metrics import (
    OTHER_LABELS,
    by_predicate,
    label_columns,
    other_label_counts,
    score_summary,
    token_totals,
)
from kgcheck.evals.stats.report import groups_markdown
from kgcheck.evals.stats.tables import interval_records, intervals_markdown
from kgcheck.evals.study.recorded import load_recorded, token_section, token_usage
from kgcheck.evals.study.tables import (
    STUDY,
    Consensus,
    MethodResults,
    ModelAnswers,
    build_records,
    coverage_notes,
    method_rank,
    public_record,
    render_markdown,
)
from kgcheck.graphs.registry import verdict_labels
from kgcheck.graphs.verdicts import is_defect

TABLES_MD = "tables.md"
TABLES_JSON = "tables.json"
PLOTS_DIR = "plots"
# Predicates listed per run in the report; the rest are counted in a closing line.
MAX_PREDICATES = 30
# A record's gold mark; None (no gold label) is looked up too and maps to nothing.
GOLD_MARKS: dict[str | None, bool] = {"T": True, "F": False}


class ReportInputError(ArgumentError):
    """A run folder that cannot be read; the message names the folder and the problem."""


@dataclass
class RunFolder:
    """What one ``kgcheck run`` left: its identity, verdicts (last per fact) and summary."""

    path: Path
    info: dict[str, Any]
    records: list[dict[str, Any]]
    summary: dict[str, Any] | None
    name: str = ""

    def __post_init__(self) -> None:
        # The folder's name labels the run in the tables.
        self.name = self.name or self.path.resolve().name


def read_run(path: str | Path, warn: Callable[[str], None] | None = None) -> RunFolder:
    """Read a run folder, checking that it holds what ``kgcheck run`` writes.

    ``warn`` hears of lines of ``verdicts.jsonl`` that are not verdicts (they are ignored).
    """
    folder = Path(path)
    info = read_run_info(folder, ReportInputError)
    info_path = folder / RUN_INFO
    missing = [k for k in ("dataset", "method", "models") if not info.get(k)]
    if missing:
        raise ReportInputError(f"{info_path}: missing {', '.join(missing)}")
    if not has_verdicts(folder):
        raise ReportInputError(f"{folder}: no {VERDICTS}; the run has not started")
    records = list(read_verdicts(folder, warn).values())
    if not records:
        raise ReportInputError(f"{folder / VERDICTS}: no verdicts")
    # A summary torn by a crash reads as None: the verdicts are what counts.
    return RunFolder(folder, info, records, read_summary(folder))


def _gold(records: Sequence[dict[str, Any]]) -> dict[str, bool | None]:
    return {str(r["fact_id"]): GOLD_MARKS.get(r.get("gold")) for r in records}


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _votes(record: dict[str, Any]) -> list[dict[str, Any]]:
    votes = (record.get("details") or {}).get("votes") or []
    return [v for v in votes if isinstance(v, dict) and v.get("model")]


def run_results(run: RunFolder) -> MethodResults:
    """Turn one run folder into the tables' input."""
    dataset, method = str(run.info["dataset"]), str(run.info["method"])
    models = [str(m) for m in run.info["models"]]
    gold = _gold(run.records)
    final = {str(r["fact_id"]): r.get("label", "NA") for r in run.records}
    if len(models) == 1:
        seconds = {str(r["fact_id"]): s for r in run.records
                   if (s := _seconds(r.get("seconds"))) is not None}
        member = ModelAnswers(model=models[0], labels=final, seconds=seconds)
        return MethodResults(dataset, method, gold, [member], voting=False, source=run.name)
    members = {m: ModelAnswers(model=m, labels={}, seconds={}) for m in models}
    for record in run.records:
        fid = str(record["fact_id"])
        for vote in _votes(record):
            member = members.setdefault(vote["model"], ModelAnswers(vote["model"], {}, {}))
            member.labels[fid] = vote.get("label") or "NA"
            if (s := _seconds(vote.get("seconds"))) is not None:
                member.seconds[fid] = s
    details = [r.get("details") or {} for r in run.records]
    judge_model = next((d.get("judge") for d in details if d.get("judge_called")), None)
    judge = str(run.info.get("judge") or "none")
    consensus = Consensus(judge=judge, judge_model=judge_model, labels=final, on_ties_only=False)
    return MethodResults(dataset, method, gold, [m for m in members.values() if m.labels],
                         consensus=[consensus], voting=True, source=run.name)


def disambiguate(results: Sequence[MethodResults]) -> None:
    """Give every model column of a dataset and method a distinct name."""
    seen: dict[tuple[str, str, str], int] = {}
    for res in results:
        for m in res.members:
            key = (res.dataset, res.method, m.model)
            seen[key] = seen.get(key, 0) + 1
    for res in results:
        for m in res.members:
            if seen[(res.dataset, res.method, m.model)] > 1 and res.source != STUDY:
                m.model = f"{m.model} [{res.source}]"


def recorded_alongside(results: Sequence[MethodResults],
                       data: str | Path | DataSource | None) -> tuple[list[MethodResults],
                                                                     list[str]]:
    """Load the study's rows for the runs' datasets and methods, over the facts they checked."""
    wanted: dict[tuple[str, str], set[str]] = {}
    for res in results:
        wanted.setdefault((res.dataset, res.method), set()).update(res.gold)
    found, notes = [], []
    for (dataset, method), facts in wanted.items():
        try:
            recorded = load_recorded(data, [dataset], [method],
                                     warn=lambda m: notes.append(f"warning: {m}"))
        except DataError:
            recorded = []
        if not recorded:
            notes.append(f"the study has no recorded {method} answers for {dataset}")
            continue
        for res in recorded:
            res.gold = {f: g for f, g in res.gold.items() if f in facts}
            notes.append(f"study rows for {dataset} {method}: over the {len(res.gold):,} facts "
                         "the runs checked")
            found.append(res)
    return found, notes


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def run_section(runs: Sequence[RunFolder]) -> str:
    """Markdown summarising each run: size, non-T/F verdicts by label, errors, tokens, scores."""
    counted = [_other_counts(run.records) for run in runs]
    # A column per label besides T and F, headed by the label it counts (a schema run's NEI
    # under NEI, not NA).
    others = label_columns({label for run in runs
                            for label in verdict_labels(run.info.get("strategy"))},
                           {k: sum(c[k] for c in counted) for k in OTHER_LABELS})
    lines = ["## Runs", "",
             "| run | dataset | method | models | judge | facts | " + "".join(
                 f"{label} | " for label in others) + "errors | tokens in | "
             "tokens out | accuracy | macro-F1 | cost |",
             "|" + " --- |" * (12 + len(others))]
    for run, counts in zip(runs, counted, strict=True):
        tokens = token_totals(run.records)
        scores = score_summary(run.records)
        cost = (run.summary or {}).get("cost_usd")
        errors = sum(1 for r in run.records if r.get("error") and not is_defect(r))
        cells = [run.name, str(run.info["dataset"]), str(run.info["method"]),
                 ", ".join(map(str, run.info["models"])), str(run.info.get("judge") or "-"),
                 f"{len(run.records):,}", *(str(counts[label]) for label in others),
                 str(errors),
                 "-" if tokens["tokens_in"] is None else f"{tokens['tokens_in']:,}",
                 "-" if tokens["tokens_out"] is None else f"{tokens['tokens_out']:,}",
                 _cell(scores["accuracy"]), _cell(scores["macro_f1"]),
                 "-" if cost is None else f"${cost:,.4f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _other_counts(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Count the verdicts neither T nor F: NEI, and NA for every other one."""
    nei = sum(1 for r in records if r.get("label") == "NEI")
    return {"NEI": nei, "NA": sum(1 for r in records if r.get("label") not in ("T", "F")) - nei}


def repeats_section(runs: Sequence[RunFolder]) -> str:
    """Markdown of the runs made with repeats: flips, entropy, each score's spread."""
    rows: list[tuple[RunFolder, dict[str, Any]]] = []
    for run in runs:
        rep = (run.summary or {}).get("repeats")
        if isinstance(rep, dict) and rep.get("scores"):
            rows.append((run, rep))
    if not rows:
        return ""
    lines = ["## Repeats", "",
             "Each fact checked several times; the verdict is the majority. Flip rate: the "
             "share of a fact's repeats that differ from its most common label; entropy of "
             "its labels in bits. Scores: mean and range across the repeats.", "",
             "| run | repeats | facts flipped | mean flip rate | mean entropy | accuracy | "
             "F1(T) | F1(F) | macro-F1 |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run, rep in rows:
        cells = [run.name, str(rep["count"]), f"{rep['flipped_facts']:,} of {rep['facts']:,}",
                 _cell3(rep.get("mean_flip_rate")), _cell3(rep.get("mean_entropy"))]
        for key in ("accuracy", "f1_true", "f1_false", "macro_f1"):
            score = rep["scores"].get(key) or {}
            cells.append("-" if score.get("mean") is None else
                         f"{score['mean']:.3f} ({score['min']:.3f} to {score['max']:.3f})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell3(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _review_row(run: str, method: str, model: str, labels: dict[str, str],
                decisions: dict[str, LabelRow]) -> dict[str, Any]:
    """Count one model's verdicts reviewed, confirmed and overturned by the person."""
    mine = {fid: d["label"] for fid, d in decisions.items() if fid in labels}
    decided = {fid: lab for fid, lab in mine.items() if lab in ("T", "F")}
    judged = {fid: lab for fid, lab in decided.items() if labels[fid] in ("T", "F")}
    overturned = sum(1 for fid, lab in judged.items() if labels[fid] != lab)
    return {"run": run, "method": method, "model": model, "verdicts": len(labels),
            "reviewed": len(mine), "skipped": len(mine) - len(decided),
            "confirmed": len(judged) - overturned, "overturned": overturned,
            "overturn_rate": overturned / len(judged) if judged else None,
            "na_decided": len(decided) - len(judged)}


def review_rows(runs: Sequence[RunFolder]) -> list[dict[str, Any]]:
    """Per run, method and model: verdicts reviewed and the share the person overturned.

    A consensus run gives a row for its final verdicts and one per member (their votes).
    Overturned counts T/F verdicts the person labelled the other way; NA verdicts the
    person decided are counted apart (there was no answer to overturn).
    """
    rows = []
    for run in runs:
        path = run.path / LABELS_FILE
        if not path.is_file():
            continue
        decisions = read_labels(path, {str(r["fact_id"]) for r in run.records})
        method, models = str(run.info["method"]), [str(m) for m in run.info["models"]]
        final = {str(r["fact_id"]): str(r.get("label", "NA")) for r in run.records}
        label = models[0] if len(models) == 1 else "consensus of " + ", ".join(models)
        rows.append(_review_row(run.name, method, label, final, decisions))
        if len(models) > 1:
            members: dict[str, dict[str, str]] = {}
            for record in run.records:
                for vote in _votes(record):
                    members.setdefault(vote["model"], {})[str(record["fact_id"])] = (
                        vote.get("label") or "NA")
            rows += [_review_row(run.name, method, m, votes, decisions)
                     for m, votes in members.items()]
    return rows


def review_section(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown of ``review_rows``: empty when no run was reviewed."""
    if not rows:
        return ""
    lines = ["## Human review", "",
             "Overturned: T/F verdicts the person labelled the other way (rate over the T/F "
             "verdicts they decided); NA decided: NA verdicts the person labelled T or F.", "",
             "| run | method | model | verdicts | reviewed | skipped | confirmed | overturned "
             "| overturn rate | NA decided |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        rate = "-" if row["overturn_rate"] is None else f"{row['overturn_rate']:.0%}"
        cells = [row["run"], row["method"], row["model"], f"{row['verdicts']:,}",
                 str(row["reviewed"]), str(row["skipped"]), str(row["confirmed"]),
                 str(row["overturned"]), rate, str(row["na_decided"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _truths_of(run: RunFolder) -> dict[str, str]:
    return run_truths(run.path, run.records).labels


def confidence_section(runs: Sequence[RunFolder]) -> str:
    """Markdown of each run's coverage (NEI) and, where verdicts have confidences, their scores.

    Truths are the person's review decisions where given, else the gold labels
    (``kgcheck.data.truths``).
    """
    lines = ["## Coverage and confidence", "",
             "Coverage: share of verdicts that are not NEI (not enough evidence). Confidence "
             "scores: over the verdicts with a confidence and a review or gold label.", "",
             "| run | facts | NEI | coverage | accuracy (covered) | confidence from | scored "
             "| AUROC | AUPRC | Brier | ECE |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run in runs:
        scores = score_summary(run.records)
        calibration = run_calibration(run.records, _truths_of(run))
        figures = calibration["scores"] or {}
        sources = ", ".join(f"{k} {v:,}" for k, v in calibration["sources"].items())
        cells = [run.name, f"{len(run.records):,}", str(scores["nei"]),
                 _cell(scores["coverage"]), _cell(scores["accuracy_covered"]), sources,
                 str(figures.get("n", 0)), *(_cell(figures.get(k)) for k in
                                            ("auroc", "auprc", "brier", "ece"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def confidence_plots(runs: Sequence[RunFolder], out_dir: Path) -> list[Path]:
    """Draw a reliability diagram and a precision-coverage curve per run with scores."""
    from kgcheck.evals.calibration_plots import plot_precision_coverage, plot_reliability

    paths: list[Path] = []
    for run in runs:
        figures = run_calibration(run.records, _truths_of(run))["scores"]
        if not figures:
            continue
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in run.name)
        paths += plot_reliability(figures, out_dir, f"reliability-{stem}", run.name)
        paths += plot_precision_coverage(figures, out_dir, f"precision-coverage-{stem}",
                                         run.name)
    return paths


def predicate_section(runs: Sequence[RunFolder]) -> str:
    """Markdown breaking each run down per predicate: facts, share judged true, scores."""
    parts = ["## Per predicate", ""]
    for run in runs:
        rows = by_predicate(run.records)
        parts += [f"### {run.name}", ""]
        if not rows:
            parts += ["Its verdicts do not record their triples (a run of an older kgcheck).",
                      ""]
            continue
        others = label_columns(verdict_labels(run.info.get("strategy")),
                               _other_counts(run.records))
        parts += ["| predicate | facts | judged T | " + "".join(f"{label} | " for label in others)
                  + "labelled | accuracy | F1(T) | F1(F) |", "|" + " --- |" * (7 + len(others))]
        for row in rows[:MAX_PREDICATES]:
            name = str(row["predicate"]).replace("|", "\\|")
            counts = other_label_counts(row)
            parts.append(f"| {name} | {row['n']:,} | {row['judged_true']:.0%} | "
                         + "".join(f"{counts[label]:,} | " for label in others)
                         + f"{row['scored']:,} | {_cell(row['accuracy'])} | "
                         f"{_cell(row['f1_true'])} | {_cell(row['f1_false'])} |")
        if len(rows) > MAX_PREDICATES:
            rest = sum(r["n"] for r in rows[MAX_PREDICATES:])
            parts.append(f"\n{len(rows) - MAX_PREDICATES:,} more predicates with {rest:,} facts "
                         "(all of them in the run's summary.json, `by_predicate`).")
        parts.append("")
    return "\n".join(parts).rstrip()


@dataclass
class Outputs:
    """What ``write_outputs`` wrote (and, for runs a person reviewed, the review counts)."""

    markdown: Path
    json: Path
    plots: list[Path]
    records: list[dict[str, Any]]
    reviews: list[dict[str, Any]] = field(default_factory=list)


def output_folder(out_dir: str | Path) -> Path:
    """Create the folder for tables and plots, or say in one line why it cannot be."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ReportInputError("{out}: exists and is not a folder; pick another one",
                               out=Arg("out", str(out)))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportInputError(f"{{out}}: cannot create the folder "
                               f"({literal(str(exc.strerror or exc))}); pick another one",
                               out=Arg("out", str(out))) from None
    return out


def write_outputs(results: Sequence[MethodResults], out_dir: str | Path, *, title: str,
                  keep_source: bool, plots: bool = True, notes: Sequence[str] = (),
                  extra: Sequence[str] = (), ci: bool = False) -> Outputs:
    """Write ``tables.md``, ``tables.json`` and (unless ``plots`` is off) ``plots/``.

    With ``ci``, a section and records of bootstrap intervals follow the point values.
    """
    out = output_folder(out_dir)
    ordered = sorted(results, key=lambda r: method_rank(r.method))
    datasets = list(dict.fromkeys(r.dataset for r in results))
    ordered = sorted(ordered, key=lambda r: datasets.index(r.dataset))
    records = build_records(ordered)
    public = [public_record(r, keep_source=keep_source) for r in records]
    if ci:
        intervals = interval_records(ordered)
        extra = [intervals_markdown(intervals), *extra]
        public += [{k: v for k, v in r.items() if keep_source or k != "source"}
                   for r in intervals]
    md = out / TABLES_MD
    write_text_atomic(md, render_markdown(records, title=title,
                                          notes=[*coverage_notes(ordered), *notes],
                                          extra=[e for e in extra if e]))
    js = out / TABLES_JSON
    write_text_atomic(js, json.dumps(public, indent=1) + "\n")
    paths: list[Path] = []
    if plots:
        from kgcheck.evals.study.plots import plot_all

        paths = plot_all(ordered, records, out / PLOTS_DIR)
    return Outputs(md, js, paths, public)


def build_report(run_dirs: Sequence[str | Path], out_dir: str | Path, *,
                 with_recorded: bool = False, data: str | Path | None = None,
                 plots: bool = True, ci: bool = False) -> Outputs:
    """Read run folders (and optionally the study's rows) and write the report.

    ``ci`` adds bootstrap intervals of accuracy, F1(T), F1(F) and macro-F1.
    """
    if not run_dirs:
        raise ReportInputError("give at least one run folder")
    notes: list[str] = []
    runs = [read_run(p, lambda m: notes.append(f"warning: {m}")) for p in run_dirs]
    names = [r.name for r in runs]
    if len(set(names)) < len(names):
        # Two folders with the same name would merge in the tables: label them by path.
        for run in runs:
            run.name = str(run.path)
    results = [run_results(r) for r in runs]
    if with_recorded:
        recorded, found = recorded_alongside(results, data)
        notes += found
        results = recorded + results
    disambiguate(results)
    reviews = review_rows(runs)
    written = write_outputs(results, out_dir, title="kgcheck report", keep_source=True,
                            plots=plots, notes=notes, ci=ci,
                            extra=[run_section(runs),
                                   groups_markdown([(r.name, r.records) for r in runs]),
                                   repeats_section(runs),
                                   predicate_section(runs), confidence_section(runs),
                                   review_section(reviews)])
    written.reviews = reviews
    if plots:
        written.plots += confidence_plots(runs, Path(out_dir) / PLOTS_DIR)
    return written


def reproduce_tables(out_dir: str | Path, *, data: str | Path | None = None,
                     datasets: Sequence[str] | None = None, plots: bool = True,
                     warn: Callable[[str], None] | None = None, ci: bool = False) -> Outputs:
    """Recompute the study's tables and figures from its recorded answers in ``data``.

    The tables hold the study's point values; ``ci`` adds bootstrap intervals after them.

    What cannot be scored (no gold labels, unreadable answer files) is left out with a
    warning, passed to ``warn`` and written into the tables; when nothing at all can be
    scored, ``ReportInputError`` says why.
    """
    output_folder(out_dir)
    src = open_data(data)
    names = list(datasets) if datasets else None
    problems: list[str] = []

    def note(message: str) -> None:
        problems.append(message)
        if warn is not None:
            warn(message)

    results = load_recorded(src, names, warn=note)
    if not results:
        wanted = f" for {', '.join(names)}" if names else ""
        why = f": {'; '.join(problems)}" if problems else ""
        raise ReportInputError(f"{src.location}: nothing could be scored{wanted}"
                               + (why or ": no recorded answers"))
    return write_outputs(
        results, out_dir, title=f"FactCheck study tables, recomputed from {src.location}",
        keep_source=False, plots=plots, notes=[f"warning: {p}" for p in problems], ci=ci,
        extra=[token_section(token_usage(src, names))],
    )
