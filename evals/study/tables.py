"""The study's tables 5 to 8 from per-fact answers: records for JSON, and Markdown.

Input is a list of ``MethodResults``: one dataset and method, the gold labels in scope,
each model's per-fact labels and times, and optionally the judges' answers on ties (or a
finished consensus run's verdicts). ``evals.recorded`` builds them from the study's
recordings, ``evals.report`` from ``kgcheck run`` folders; both go through this module.

Facts a model has no answer for are left out of that model's F1 and time (``n`` says how
many facts were scored, as the study scored RAG over 2,799 FactBench facts); alignment,
ties and consensus use the facts every model of the set answered.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kgcheck.evals.metrics import (
    consensus_alignment,
    f1_true_false,
    invalid_count,
    iqr_mean,
    tie_rate,
)
from kgcheck.graphs.votes import decide

# The study's order of methods; other methods follow, alphabetically.
METHOD_ORDER = ("DKA", "GIV-Z", "GIV-F", "RAG")
# Alignment with fewer voters says nothing: with two, every decided fact is unanimous.
MIN_VOTERS = 3
STUDY = "study"
RECORD_KEYS = {
    "f1": ("table", "dataset", "method", "model", "f1_true", "f1_false", "n", "invalid"),
    "alignment": ("table", "dataset", "method", "model", "ca", "tie_rate"),
    "consensus": ("table", "dataset", "method", "judge", "f1_true", "f1_false"),
    "time": ("table", "dataset", "method", "model", "mean_seconds"),
}


@dataclass
class ModelAnswers:
    """One model's answers for a dataset and method: label and time per fact."""

    model: str
    labels: dict[str, str]
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class Consensus:
    """Consensus verdicts under one judge: given whole, or the judge's answers on ties.

    With ``on_ties_only`` the labels are the judge's answers for tie facts and the rest is
    decided by the members' majority; otherwise ``labels`` are the final verdicts.
    """

    judge: str
    judge_model: str | None
    labels: dict[str, str]
    on_ties_only: bool = True


@dataclass
class MethodResults:
    """Everything the tables need about one dataset and method from one source."""

    dataset: str
    method: str
    gold: dict[str, bool | None]
    members: list[ModelAnswers]
    consensus: list[Consensus] = field(default_factory=list)
    voting: bool = True
    source: str = STUDY

    def common_facts(self) -> list[str]:
        """Facts in scope that every member answered, in gold order."""
        answered = [set(m.labels) for m in self.members]
        return [fid for fid in self.gold if all(fid in a for a in answered)]

    def votes(self, facts: Iterable[str]) -> list[dict[str, str]]:
        """Each fact's votes, model -> label."""
        return [{m.model: m.labels[fid] for m in self.members} for fid in facts]

    def true_share(self) -> float | None:
        """Share of true facts among the labelled ones in scope."""
        labelled = [g for g in self.gold.values() if g is not None]
        return sum(labelled) / len(labelled) if labelled else None


def method_rank(method: str) -> tuple[int, str]:
    """Sort key putting the study's methods first, in its order."""
    return (METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER), method)


def _scores(gold: dict[str, bool | None], labels: dict[str, str],
            facts: Iterable[str]) -> dict[str, Any]:
    facts = [f for f in facts if gold.get(f) is not None and f in labels]
    g = [gold[f] for f in facts]
    p = [labels[f] for f in facts]
    f1_t, f1_f = f1_true_false(g, p)
    return {"f1_true": f1_t, "f1_false": f1_f, "n": len(facts), "invalid": invalid_count(p)}


def _base(res: MethodResults, table: str) -> dict[str, Any]:
    return {"table": table, "dataset": res.dataset, "method": res.method, "source": res.source}


def f1_records(res: MethodResults) -> list[dict[str, Any]]:
    """Table 5: F1(T), F1(F), facts scored and invalid answers, per model."""
    return [{**_base(res, "f1"), "model": m.model, **_scores(res.gold, m.labels, res.gold)}
            for m in res.members]


def alignment_records(res: MethodResults) -> list[dict[str, Any]]:
    """Table 6: CA_M per model and the tie rate, over the facts every model answered."""
    if not res.voting or len(res.members) < MIN_VOTERS:
        return []
    votes = res.votes(res.common_facts())
    if not votes:
        return []
    ties = tie_rate(votes)
    ca = consensus_alignment(votes)
    return [{**_base(res, "alignment"), "model": m.model, "ca": ca[m.model], "tie_rate": ties}
            for m in res.members]


def consensus_verdicts(res: MethodResults, judged: Consensus) -> dict[str, str]:
    """Decide every fact: the majority, the judge's label on a tie, else NA."""
    if not judged.on_ties_only:
        return dict(judged.labels)
    facts = res.common_facts()
    return {fid: decide(v.values(), judged.labels.get(fid))
            for fid, v in zip(facts, res.votes(facts), strict=True)}


def consensus_records(res: MethodResults) -> list[dict[str, Any]]:
    """Table 7: F1 of the consensus with each judge deciding the ties."""
    rows = []
    for judged in res.consensus:
        labels = consensus_verdicts(res, judged)
        scores = _scores(res.gold, labels, res.gold)
        rows.append({**_base(res, "consensus"), "judge": judged.judge,
                     "judge_model": judged.judge_model,
                     "f1_true": scores["f1_true"], "f1_false": scores["f1_false"],
                     "n": scores["n"], "invalid": scores["invalid"]})
    return rows


def time_records(res: MethodResults) -> list[dict[str, Any]]:
    """Table 8: IQR-filtered mean response time per model (models with times only)."""
    rows = []
    for m in res.members:
        mean = iqr_mean(s for fid, s in m.seconds.items() if fid in res.gold and s is not None)
        if mean is not None:
            rows.append({**_base(res, "time"), "model": m.model, "mean_seconds": mean})
    return rows


def build_records(results: Sequence[MethodResults]) -> list[dict[str, Any]]:
    """Every table's records, table by table, in the order of ``results``."""
    records: list[dict[str, Any]] = []
    for build in (f1_records, alignment_records, consensus_records, time_records):
        for res in results:
            records.extend(build(res))
    return records


def public_record(record: dict[str, Any], *, keep_source: bool = False) -> dict[str, Any]:
    """Trim a record to the documented keys of its table (plus ``source`` if asked)."""
    keys = RECORD_KEYS[record["table"]] + (("source",) if keep_source else ())
    return {k: record[k] for k in keys if k in record}


def coverage_notes(results: Sequence[MethodResults]) -> list[str]:
    """Say where a model answered fewer facts than the dataset holds, or answered NA."""
    notes = []
    for res in results:
        total = sum(1 for g in res.gold.values() if g is not None)
        if not total:
            where = f"{res.dataset} {res.method}" + (f" ({res.source})"
                                                      if res.source != STUDY else "")
            notes.append(f"{where}: no gold labels, so no F1 (shown as -)")
            continue
        for m in res.members:
            scores = _scores(res.gold, m.labels, res.gold)
            parts = []
            if scores["n"] < total:
                parts.append(f"answered {scores['n']:,} of {total:,} facts (F1 over those)")
            if scores["invalid"]:
                parts.append(f"{scores['invalid']:,} invalid (NA) answers, counted as misses")
            if parts:
                where = f"{res.dataset} {res.method} {m.model}"
                if res.source != STUDY:
                    where += f" ({res.source})"
                notes.append(f"{where}: {'; '.join(parts)}")
        if res.voting and len(res.members) < MIN_VOTERS and len(res.members) > 1:
            notes.append(f"{res.dataset} {res.method}: only {len(res.members)} models, "
                         f"no alignment (needs {MIN_VOTERS})")
    return notes


# --- Markdown --------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


_Key = TypeVar("_Key", bound=Hashable)


def _ordered(values: Iterable[_Key]) -> list[_Key]:
    return list(dict.fromkeys(values))


def _row_keys(records: list[dict[str, Any]], with_source: bool) -> list[tuple[str, ...]]:
    datasets = _ordered(r["dataset"] for r in records)
    keys = _ordered(
        (r["dataset"], r["method"]) + ((r["source"],) if with_source else ()) for r in records
    )
    return sorted(keys, key=lambda k: (datasets.index(k[0]), method_rank(k[1]), k[2:]))


def _wide(records: list[dict[str, Any]], cell: Any, lead: Sequence[str],
          with_source: bool = False, mark_study: bool = False) -> str:
    models = _ordered(r["model"] for r in records)
    study = {r["model"] for r in records if r.get("source", STUDY) == STUDY}
    names = [f"{m} (study)" if mark_study and m in study else m for m in models]
    header = list(lead) + (["source"] if with_source else []) + names
    rows = []
    for key in _row_keys(records, with_source):
        found = {r["model"]: r for r in records
                 if (r["dataset"], r["method"]) == key[:2]
                 and (not with_source or r["source"] == key[2])}
        rows.append(list(key) + [cell(found[m]) if m in found else "-" for m in models])
    return _table(header, rows)


def render_markdown(records: list[dict[str, Any]], *, title: str, notes: Sequence[str] = (),
                    extra: Sequence[str] = ()) -> str:
    """Lay the records out like the study's tables 5 to 8."""
    by_table = {t: [r for r in records if r["table"] == t] for t in RECORD_KEYS}
    sources = {r.get("source", STUDY) for r in records}
    multi = len(sources) > 1 or sources != {STUDY}
    parts = [f"# {title}", ""]

    parts += ["## F1(T) / F1(F) per model (table 5)", ""]
    if by_table["f1"]:
        parts.append(_wide(by_table["f1"],
                           lambda r: f"{_fmt(r['f1_true'])} / {_fmt(r['f1_false'])}",
                           ("dataset", "method"), mark_study=multi))
    else:
        parts.append("No answers.")
    parts.append("")

    parts += ["## Consensus alignment CA_M and ties (table 6)", ""]
    rows6 = by_table["alignment"]
    if rows6:
        models = _ordered(r["model"] for r in rows6)
        header = ["dataset", "method"] + (["source"] if multi else []) + ["ties"] + models
        rows = []
        for key in _row_keys(rows6, multi):
            found = {r["model"]: r for r in rows6 if (r["dataset"], r["method"]) == key[:2]
                     and (not multi or r["source"] == key[2])}
            ties = next(iter(found.values()))["tie_rate"]
            rows.append(list(key) + [f"{ties:.0%}"]
                        + [_fmt(found[m]["ca"], 3) if m in found else "-" for m in models])
        parts.append(_table(header, rows))
    else:
        parts.append(f"No set of {MIN_VOTERS} or more models voting on the same facts.")
    parts.append("")

    parts += ["## Consensus with a judge on ties, F1(T) / F1(F) (table 7)", ""]
    rows7 = by_table["consensus"]
    if rows7:
        judges = _ordered(r["judge"] for r in rows7)
        header = ["dataset", "method"] + (["source"] if multi else []) + judges
        rows = []
        for key in _row_keys(rows7, multi):
            found = {r["judge"]: r for r in rows7 if (r["dataset"], r["method"]) == key[:2]
                     and (not multi or r["source"] == key[2])}
            cells = []
            for j in judges:
                r = found.get(j)
                if r is None:
                    cells.append("-")
                    continue
                who = f" ({r['judge_model']})" if r.get("judge_model") else ""
                cells.append(f"{_fmt(r['f1_true'])} / {_fmt(r['f1_false'])}{who}")
            rows.append(list(key) + cells)
        parts.append(_table(header, rows))
    else:
        parts.append("No judge answers on ties.")
    parts.append("")

    parts += ["## Mean response time in seconds, IQR-filtered (table 8)", ""]
    if by_table["time"]:
        parts.append(_wide(by_table["time"], lambda r: _fmt(r["mean_seconds"]),
                           ("dataset", "method"), mark_study=multi))
    else:
        parts.append("No response times.")
    parts.append("")

    for section in extra:
        parts += [section, ""]
    if notes:
        parts += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(parts)
