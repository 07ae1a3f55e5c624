"""The error analysis's tables: error rates by slice, and Table 9 (categories per model).

Slices of each run's error rate (wrong verdicts over facts with a T/F truth):

- by predicate;
- by FactBench corruption type, read from the upstream fact ids (``correct_award_00001``
  is ``correct``, ``wrong_mix_domain_award_00003`` is ``wrong_mix_domain``); facts of
  other datasets have none;
- by the subject's degree in the input KG (how many of the KG's facts have that subject),
  in buckets 1, 2-3, 4-10, 11-100, >100: a proxy for the entity's popularity.

Table 9, in taxonomy mode: per dataset, the count of each category per model, and each
category's *unique ratio*: the number of distinct facts whose errors fall in the
category, over the number of such errors across all models. 1.0 means no two models
made that kind of error on the same fact; 1/M (M models) means they all failed on the
same facts.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["DEGREE_BUCKETS", "category_table", "corruption_type", "degree_bucket",
           "error_slices", "render_markdown"]

DEGREE_BUCKETS = ((1, 1, "1"), (2, 3, "2-3"), (4, 10, "4-10"), (11, 100, "11-100"),
                  (101, None, ">100"))
_FACTBENCH_ID = re.compile(r"^(correct|wrong_[a-z]+(?:_[a-z]+)?)_")


def corruption_type(fact_id: str, predicate: str = "") -> str | None:
    """Return a FactBench fact's corruption type from its id (None for other ids)."""
    stem = re.sub(r"_\d+$", "", fact_id)
    if predicate and stem.endswith(f"_{predicate}"):
        stem = stem[: -len(predicate) - 1]
        return stem if stem == "correct" or stem.startswith("wrong_") else None
    found = _FACTBENCH_ID.match(fact_id)
    return found.group(1) if found else None


def degree_bucket(degree: int) -> str:
    """Name the bucket of a subject's degree."""
    for low, high, name in DEGREE_BUCKETS:
        if degree >= low and (high is None or degree <= high):
            return name
    return "0"


def _rates(rows: Iterable[Mapping[str, Any]], key: str) -> list[dict[str, Any]]:
    counts: dict[Any, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        value = row.get(key)
        if value is None:
            continue
        counts[value][0] += 1
        counts[value][1] += bool(row["wrong"])
    return [{key: k, "facts": n, "errors": e, "error_rate": e / n}
            for k, (n, e) in sorted(counts.items(), key=lambda kv: (-kv[1][0], str(kv[0])))]


def error_slices(run: str, scored: Sequence[Mapping[str, Any]],
                 degrees: Mapping[str, int] | None) -> dict[str, Any]:
    """Return one run's error rates by predicate, corruption type and subject degree."""
    rows = []
    for row in scored:
        degree = degrees.get(str(row["subject"])) if degrees is not None else None
        rows.append({**row, "corruption": corruption_type(row["fact_id"], row["predicate"]),
                     "degree": degree_bucket(degree) if degree else None})
    order = {name: i for i, (_, _, name) in enumerate(DEGREE_BUCKETS)}
    return {"run": run, "facts": len(rows), "errors": sum(r["wrong"] for r in rows),
            "by_predicate": _rates(rows, "predicate"),
            "by_corruption": _rates(rows, "corruption"),
            "by_degree": sorted(_rates(rows, "degree"), key=lambda r: order[r["degree"]]),
            "degree_source": "input KG" if degrees is not None else None}


def category_table(records: Sequence[Mapping[str, Any]], codes: Mapping[str, str]
                   ) -> list[dict[str, Any]]:
    """Build Table 9's rows: per dataset and category, counts per model and unique ratio.

    ``records`` are errors.jsonl records with ``dataset``, ``model``, ``fact_id`` and
    ``category`` (None: the model named no category; counted as ``unassigned``).
    """
    rows = []
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        mine = [r for r in records if r["dataset"] == dataset]
        models = list(dict.fromkeys(r["model"] for r in mine))
        for code in [*codes, None]:
            cat = [r for r in mine if r.get("category") == code]
            if code is None and not cat:
                continue
            per_model = Counter(r["model"] for r in cat)
            total = len(cat)
            distinct = len({r["fact_id"] for r in cat})
            rows.append({"dataset": dataset, "category": code or "unassigned",
                         "name": codes.get(code, "no category named") if code else
                         "no category named",
                         "counts": {m: per_model.get(m, 0) for m in models}, "total": total,
                         "distinct_facts": distinct,
                         "unique_ratio": distinct / total if total else None})
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value).replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(summary: Mapping[str, Any]) -> str:
    """Render the analysis's tables as Markdown."""
    parts = [f"# Error analysis\n\n{summary['errors']} errors analysed of "
             f"{summary['errors_total']} wrong verdicts in {len(summary['runs'])} run(s); "
             f"{summary['clusters']} clusters, {summary['noise']} explanations in noise; "
             f"embedder {summary['embedder']}, seed {summary['seed']}."]
    clusters = summary.get("cluster_rows") or []
    if clusters:
        parts.append("## Clusters\n\n" + _table(
            ["cluster", "name", "errors", "keywords"],
            [[c["cluster"], c["label"], c["size"], ", ".join(c["keywords"])]
             for c in clusters]))
    table9 = summary.get("table9")
    if table9:
        for dataset in dict.fromkeys(r["dataset"] for r in table9):
            mine = [r for r in table9 if r["dataset"] == dataset]
            models = list(mine[0]["counts"])
            parts.append(f"## Table 9: error categories, {dataset}\n\n" + _table(
                ["category", *models, "total", "unique ratio"],
                [[f"{r['category']} {r['name']}", *[r["counts"][m] for m in models],
                  r["total"], r["unique_ratio"]] for r in mine]))
    for run in summary.get("slices") or []:
        for key, title in (("by_predicate", "predicate"), ("by_corruption", "corruption type"),
                           ("by_degree", "subject degree")):
            rows = run[key]
            if not rows:
                continue
            column = key.removeprefix("by_")
            parts.append(f"## {run['run']}: error rate by {title}\n\n" + _table(
                [title, "facts", "errors", "error rate"],
                [[r[column], r["facts"], r["errors"], r["error_rate"]] for r in rows]))
    return "\n\n".join(parts) + "\n"
