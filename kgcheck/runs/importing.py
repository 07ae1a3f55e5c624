"""Turn verdicts made elsewhere into a run folder that report, export and estimate accept.

Two kinds of file:

- the FactCheck study code's result files, under any name: a JSON list of
  ``{id, response, full_answer?, response_time?, success?}`` (or a majority-vote file,
  ``{"results": [{id, majority_decision, ...}]}``). The name says the dataset, mode, model
  and method when it follows the study's pattern,
  ``<Dataset>_<open-source|commercial>_<model>_<method>[_<YYYYmmdd-HHMMSS>].json``;
- a generic CSV or JSON Lines file with ``fact_id`` and ``label`` columns (``T/F/NA``,
  ``true/false``, ``1/0``, ``correct/incorrect/idk/na``; optional ``model``, ``method``).

Answers are read with the project's strict verdict parser; a failed call (``success:
false``) becomes an NA verdict whose ``error`` says so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgcheck.arguments import ArgumentError
from kgcheck.data.facts import Fact, checked_fact_id
from kgcheck.data.input_limits import NAME_CHARS, TEXT_CHARS, checked_text
from kgcheck.data.labels import LabelsError, iter_rows, label_word
from kgcheck.data.safe_json import load_file
from kgcheck.graphs.parsing import parse_verdict
from kgcheck.runs.runner import RunInfo, RunResult, check_facts

__all__ = ["IMPORT_STRATEGY", "ImportedVerdict", "STUDY_NAME", "VerdictFile",
           "VerdictImportError", "describe_name", "import_run", "read_verdict_file"]

STUDY_NAME = re.compile(
    r"^(?P<dataset>[^_]+)_(?P<mode>open-source|open_source|commercial)_(?P<model>.+?)_"
    r"(?P<method>dka-sc|dka|giv-z|giv-f|rag)(?P<vote>_majority-vote)?"
    r"(?:_(?P<stamp>\d{8}-\d{6}))?$",
    re.IGNORECASE,
)
# The study's consensus script names its output by the dataset alone.
MAJORITY_NAME = re.compile(r"^(?P<dataset>[^_]+)_majority-vote(?:_(?P<stamp>\d{8}-\d{6}))?$",
                           re.IGNORECASE)
IMPORT_STRATEGY = "import"


class VerdictImportError(ArgumentError):
    """A verdicts file that cannot be imported; the message names the file and the row."""


@dataclass
class ImportedVerdict:
    """One verdict read from a file."""

    fact_id: str
    label: str
    where: str
    raw: str | None = None
    seconds: float = 0.0
    error: str | None = None


@dataclass
class VerdictFile:
    """A file of verdicts, read: what its name says and its verdicts in file order."""

    path: Path
    dataset: str | None = None
    model: str | None = None
    method: str | None = None
    verdicts: list[ImportedVerdict] = field(default_factory=list)


def describe_name(path: Path) -> dict[str, str | None]:
    """Read dataset, model and method from a study file name (None when it does not say)."""
    match = STUDY_NAME.match(path.stem)
    if not match:
        vote = MAJORITY_NAME.match(path.stem)
        return {"dataset": vote["dataset"] if vote else None, "model": None,
                "method": "MAJORITY" if vote else None}
    method = match["method"].upper() + ("-MAJORITY" if match["vote"] else "")
    return {"dataset": match["dataset"], "model": match["model"], "method": method}


def _study_label(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "T" if value else "F"
    if isinstance(value, int) and value in (0, 1):
        return "T" if value else "F"
    if value is None or isinstance(value, str):
        return parse_verdict(value)
    raise VerdictImportError(f"{where}: response {value!r} is not a verdict")


def _name(value: Any, what: str, where: str) -> str:
    """Return a model's or method's name as text, refused when longer than the name cap."""
    return checked_text(str(value), NAME_CHARS, what, where, VerdictImportError)


def _answer(value: Any, where: str) -> str:
    """Return an answer's text as stored, refused when longer than the text cap."""
    return checked_text(str(value), TEXT_CHARS, "the answer", where, VerdictImportError)


def _fact_id(value: Any, where: str) -> str:
    return checked_fact_id(str(value).strip(), where, VerdictImportError)


def _seconds(value: Any, where: str) -> float:
    """Return a response time in seconds: a finite number at least 0, else 0 when absent."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return 0.0
    seconds = float(value)  # safe_json bounds the digits, so this cannot overflow
    if not math.isfinite(seconds) or seconds < 0:
        raise VerdictImportError(f"{where}: response_time {value!r} is not a duration")
    return seconds


def _read_study(path: Path, out: VerdictFile) -> None:
    data = load_file(path, VerdictImportError)
    rows = data.get("results") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise VerdictImportError(f"{path}: expected a JSON list of results (or an object with "
                           "'results')")
    if isinstance(data, dict):
        _name_members(rows, out)
    for n, row in enumerate(rows):
        where = f"{path}, record {n}"
        if not isinstance(row, dict) or not ({"id", "fact_id"} & set(row)):
            raise VerdictImportError(f"{where}: has no 'id'")
        fact_id = _fact_id(row.get("id", row.get("fact_id")), where)
        answer = row.get("majority_decision", row.get("response"))
        if isinstance(answer, str):
            _answer(answer, where)
        raw = row.get("full_answer") if isinstance(row.get("full_answer"), str) else answer
        seconds = _seconds(row.get("response_time"), where)
        if row.get("success") is False:
            out.verdicts.append(ImportedVerdict(fact_id, "NA", where, _answer(raw, where),
                                                seconds, "the call failed in the original run"))
            continue
        out.verdicts.append(ImportedVerdict(fact_id, _study_label(answer, where), where,
                                            None if raw is None else _answer(raw, where),
                                            seconds))


def _name_members(rows: list[Any], out: VerdictFile) -> None:
    # A majority-vote file names its members and method in each fact's votes.
    models: dict[str, None] = {}
    methods: dict[str, None] = {}
    for n, row in enumerate(rows):
        where = f"{out.path}, record {n}"
        for vote in (row.get("individual_votes") or []) if isinstance(row, dict) else []:
            if isinstance(vote, dict):
                models.setdefault(_name(vote.get("model_name") or "", "the model name",
                                        where), None)
                methods.setdefault(_name(vote.get("method") or "", "the method",
                                         where).upper(), None)
    models.pop("", None)
    methods.pop("", None)
    if models and not out.model:
        out.model = _name(",".join(models), "the models' names", str(out.path))
    if len(methods) == 1 and out.method in (None, "MAJORITY"):
        out.method = next(iter(methods)) + "-MAJORITY"


def _read_table(path: Path, out: VerdictFile) -> None:
    try:
        _read_table_rows(path, out)
    except LabelsError as exc:  # the labels reader's line or row, as this reader's error
        raise VerdictImportError(str(exc)) from None


def _read_table_rows(path: Path, out: VerdictFile) -> None:
    models, methods = set(), set()
    for where, row in iter_rows(path):
        if "fact_id" not in row or "label" not in row:
            raise VerdictImportError(f"{where}: needs fact_id and label columns (found: "
                               f"{', '.join(sorted(row))})")
        value = label_word(row["label"], where)
        label = "NA" if value is None else ("T" if value else "F")
        out.verdicts.append(ImportedVerdict(_fact_id(row["fact_id"], where), label, where,
                                            _answer(row["label"], where)))
        if row.get("model"):
            models.add(_name(row["model"], "the model name", where))
        if row.get("method"):
            methods.add(_name(row["method"], "the method", where))
    # Many names joined are one name too: run.json and the summary keep it.
    out.model = out.model or (_name(", ".join(sorted(models)), "the models' names",
                                    str(path)) if models else None)
    out.method = out.method or (_name(", ".join(sorted(methods)), "the methods' names",
                                      str(path)) if methods else None)


def read_verdict_file(path: str | Path) -> VerdictFile:
    """Read a study result file (``.json``) or a generic CSV/JSONL of fact_id,label."""
    path = Path(path)
    if not path.is_file():
        raise VerdictImportError(f"{path}: file not found")
    named = describe_name(path)
    out = VerdictFile(path, dataset=named["dataset"], model=named["model"],
                      method=named["method"])
    suffix = path.suffix.lower()
    if suffix == ".json":
        _read_study(path, out)
    elif suffix in (".csv", ".tsv", ".jsonl", ".ndjson"):
        _read_table(path, out)
    else:
        raise VerdictImportError(f"{path}: unsupported format {suffix!r}; use the study's .json "
                           "or a .csv/.jsonl with fact_id,label")
    if not out.verdicts:
        raise VerdictImportError(f"{path}: no verdicts found")
    seen: dict[str, str] = {}
    for verdict in out.verdicts:
        if verdict.fact_id in seen:
            first = seen[verdict.fact_id].rsplit(", ", 1)[-1]
            raise VerdictImportError(f"{verdict.where}: fact {verdict.fact_id!r} has a second "
                                     f"verdict (first at {first})")
        seen[verdict.fact_id] = verdict.where
    return out


async def import_run(found: VerdictFile, facts: list[Fact], out_dir: Path, *, source: str,
                     dataset: str, fresh: bool = False) -> RunResult:
    """Write the verdicts of ``found`` about ``facts`` into a run folder, and score them.

    The batch runner writes the folder, as for any run: the same records, lock, run.json
    and summary.
    """
    by_id = {f.id: f for f in facts}
    for verdict in found.verdicts:
        if verdict.fact_id not in by_id:
            raise VerdictImportError(f"{verdict.where}: fact {verdict.fact_id!r} is not among "
                                     f"the {len(facts)} facts of {dataset}")
    method = (found.method or "IMPORTED").upper()
    model = found.model or "unknown"
    info = RunInfo(dataset=dataset, strategy=IMPORT_STRATEGY, method=method, models=[model],
                   source=source, settings={"imported_from": str(found.path.resolve())})
    answers = {v.fact_id: v for v in found.verdicts}

    async def replay(fact: Fact) -> dict[str, Any]:
        item = answers[fact.id]
        return {"verdict": {
            "fact_id": fact.id, "label": item.label, "method": method, "model": model,
            "raw": item.raw, "raws": [] if item.raw is None else [item.raw], "attempts": 1,
            "seconds": item.seconds, "tokens_in": None, "tokens_out": None,
            "error": item.error, "details": {"imported_from": found.path.name},
        }}

    return await check_facts([by_id[v.fact_id] for v in found.verdicts], replay, info,
                           Path(out_dir), concurrency=1, fresh=fresh, show_progress=False)
