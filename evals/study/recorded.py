r"""The study's recorded answers as ``MethodResults``, for any dataset in the upstream layout.

Reads ``results/paper_results/<METHOD>/<Dataset>_open-source_<model>_<method>.json``, the
judges' answers on ties and the RAG token/time file through ``graphs.upstream``, so the
same code serves the vendored copy and a full upstream folder. Only two dataset rules
apply, both upstream's: the FactBench subset (``evals.datasets``) and the ``<dataset>_``
prefix of judge ids.

Answers are read strictly (``graphs.parsing.parse_verdict``): the recorded ``response`` of
each model (already T/F upstream) and the judges' raw answers (``"T \\n"``,
``"Judgment: F"``; anything else, such as ``"NA"``, is NA and counts as a miss).
Records for facts outside the benchmark are ignored; facts a model has no record for stay
unanswered for that model (see ``evals.tables`` for how they are scored).

Nothing unreadable turns into a score of zero: a dataset without gold labels, an answers
file that cannot be read (a folder where the file belongs, malformed JSON, a record without
``id``) or whose records lack their answer is left out with a warning, or raises when no
``warn`` callback is given.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kgcheck.data.datasets import load_facts
from kgcheck.data.upstream import (
    JUDGE_MODES,
    JUDGES_PATH,
    TOKENS_PATH,
    DataError,
    DataSource,
    as_source,
    canonical_dataset,
    dataset_names,
    dataset_path,
    iter_records,
    judge_fact_id,
    recorded_files,
)
from kgcheck.evals.metrics import iqr_mean
from kgcheck.evals.study.tables import Consensus, MethodResults, ModelAnswers, method_rank
from kgcheck.graphs.parsing import parse_verdict

Warn = Callable[[str], None]

# The judges' file says which member was most ("high") or least ("low") consistent.
JUDGE_NAMES = {"high": "cons-up", "low": "cons-down"}
METHOD_OF_MODE = {mode: method for method, mode in JUDGE_MODES.items()}


def recorded_datasets(src: DataSource) -> list[str]:
    """Datasets that have both facts and recorded answers in ``src``, in folder order."""
    with_answers = {r.dataset.lower() for r in recorded_files(src)}
    return [name for name in dataset_names(src) if name.lower() in with_answers]


def _label(value: Any) -> str:
    return parse_verdict(value if isinstance(value, str) else None)


def _seconds(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _model_answers(src: DataSource, relpath: str, model: str,
                   scope: dict[str, bool | None], warn: Warn) -> ModelAnswers | None:
    """Read one model's answers over ``scope``; None (with a warning) when none is usable."""
    labels: dict[str, str] = {}
    seconds: dict[str, float] = {}
    where = f"{src.location}/{relpath}"
    lacking = total = 0
    try:
        for row in iter_records(src, relpath):
            fid = str(row["id"])
            if fid not in scope:
                continue
            total += 1
            if not isinstance(row.get("response"), str):
                lacking += 1
            labels[fid] = _label(row.get("response"))
            took = _seconds(row.get("response_time"))
            if took is not None:
                seconds[fid] = took
    except DataError as exc:
        warn(f"left out {model}: {exc}")
        return None
    if total and lacking == total:
        warn(f"left out {model}: {where}: none of its {total} records has a 'response'")
        return None
    if lacking:
        warn(f"{where}: {lacking} of {total} records have no 'response'; they count as NA")
    return ModelAnswers(model=model, labels=labels, seconds=seconds)


def judge_answers(src: DataSource, dataset: str) -> dict[str, list[Consensus]]:
    """Read the judges' answers on ties for one dataset, by method, one entry per judge."""
    if not src.exists(JUDGES_PATH):
        return {}
    rows = src.read_json(JUDGES_PATH)
    if not isinstance(rows, list):
        raise DataError(f"{src.location}/{JUDGES_PATH}: expected a JSON list of answers")
    found: dict[tuple[str, str], Consensus] = {}
    for n, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"{src.location}/{JUDGES_PATH}: answer {n} is not an object")
        if str(row.get("Dataset", "")).lower() != dataset.lower():
            continue
        method = METHOD_OF_MODE.get(str(row.get("Mode")))
        judge = JUDGE_NAMES.get(str(row.get("consistency")))
        if method is None or judge is None or "Custom_id" not in row:
            continue
        entry = found.setdefault(
            (method, judge), Consensus(judge=judge, judge_model=row.get("Model"), labels={})
        )
        entry.labels[judge_fact_id(dataset, str(row["Custom_id"]))] = _label(row.get("Answer"))
    out: dict[str, list[Consensus]] = defaultdict(list)
    order = list(JUDGE_NAMES.values())  # cons-up first, as in the study's table
    for method, judge in sorted(found, key=lambda k: (k[0], order.index(k[1]))):
        out[method].append(found[(method, judge)])
    return dict(out)


def _strict(message: str) -> None:
    raise DataError(message)


def load_recorded(data: str | Path | DataSource | None = None,
                  datasets: Sequence[str] | None = None,
                  methods: Sequence[str] | None = None, *,
                  warn: Warn | None = None) -> list[MethodResults]:
    """Read the study's answers per dataset and method (all recorded datasets by default).

    What cannot be scored (see the module docstring) goes to ``warn`` and is left out;
    without ``warn`` it raises ``DataError``.
    """
    warn = warn or _strict
    src = as_source(data)
    names = ([canonical_dataset(src, d) for d in datasets] if datasets
             else recorded_datasets(src))
    files = recorded_files(src)
    wanted = {m.upper() for m in methods} if methods else None
    results = []
    for name in names:
        mine = [f for f in files if f.dataset.lower() == name.lower()
                and (wanted is None or f.method.upper() in wanted)]
        if not mine:
            continue
        try:
            gold = {f.id: f.label for f in load_facts(name, src)}
        except DataError as exc:
            warn(f"left out {name}: {exc}")
            continue
        labelled = sum(1 for g in gold.values() if g is not None)
        if not labelled:
            warn(f"left out {name}: no gold labels ({src.location}/"
                 f"{dataset_path(name, 'gt.json')} is missing, empty or not a file), so its "
                 "answers cannot be scored")
            continue
        if labelled < len(gold):
            warn(f"{name}: {len(gold) - labelled:,} of {len(gold):,} facts have no gold label "
                 "and are not scored")
        judges = judge_answers(src, name)
        for method in sorted({f.method for f in mine}, key=method_rank):
            members = [m for f in sorted(mine, key=lambda f: f.model) if f.method == method
                       if (m := _model_answers(src, f.relpath, f.model, gold, warn)) is not None]
            if not members:
                continue
            results.append(MethodResults(dataset=name, method=method, gold=gold,
                                         members=members, consensus=judges.get(method, [])))
    return results


def token_usage(data: str | Path | DataSource | None = None,
                datasets: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Sum the RAG calls' tokens and average their duration, per dataset and model."""
    src = as_source(data)
    if not src.exists(TOKENS_PATH):
        return []
    usage = src.read_json(TOKENS_PATH)
    if not isinstance(usage, dict):
        raise DataError(f"{src.location}/{TOKENS_PATH}: expected an object by dataset")
    # Calls filed under no dataset ("null" upstream) cannot be attributed, so they are left out.
    names = ([canonical_dataset(src, d) for d in datasets] if datasets
             else recorded_datasets(src))
    rows = []
    for name in names:
        for model, arrays in sorted((usage.get(name) or {}).items()):
            tokens_in = arrays.get("input_tokens") or []
            tokens_out = arrays.get("output_tokens") or []
            rows.append({
                "dataset": name, "model": model, "calls": len(tokens_in),
                "tokens_in": int(sum(tokens_in)), "tokens_out": int(sum(tokens_out)),
                "mean_seconds": iqr_mean(arrays.get("duration") or []),
            })
    return rows


def token_section(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown for the RAG token/time rows (empty when there are none)."""
    if not rows:
        return ""
    lines = [
        "## RAG calls: tokens and time (tokens-time.json)",
        "",
        "Model names as in the file; the arrays carry no fact ids, so these are totals over "
        "every recorded call (judges' calls included under their own names).",
        "",
        "| dataset | model | calls | input tokens | output tokens | mean s (IQR) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        mean = "-" if r["mean_seconds"] is None else f"{r['mean_seconds']:.2f}"
        lines.append(f"| {r['dataset']} | {r['model']} | {r['calls']:,} | {r['tokens_in']:,} | "
                     f"{r['tokens_out']:,} | {mean} |")
    return "\n".join(lines)
