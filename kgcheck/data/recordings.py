"""The FactCheck study's recorded answers, looked up by model, method, dataset and fact.

The replay provider serves them as a chat model; ``lookup`` finds one answer: the raw text
where the study kept one (``full_answer`` for RAG, the judges' raw answers), else the
recorded ``T``/``F``, with the recorded response time.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kgcheck.data.upstream import (
    JUDGE_MODES,
    JUDGES_PATH,
    as_source,
    canonical_dataset,
    dataset_path,
    iter_records,
    judge_fact_id,
    recorded_files,
    resolve_data_dir,
)


class ReplayMissing(LookupError):
    """The recordings hold no answer for this model, method, dataset and fact."""


class Recording(dict[str, Any]):
    """One recorded answer: ``text`` (raw answer) and ``seconds`` (None when not recorded)."""


@cache
def _answers(data_dir: str, method: str, dataset: str, model: str) -> dict[str, Recording]:
    src = as_source(data_dir)
    files = [
        r for r in recorded_files(src)
        if r.method.lower() == method.lower() and r.dataset.lower() == dataset.lower()
        and r.model == model
    ]
    if not files:
        return {}
    out: dict[str, Recording] = {}
    for row in iter_records(src, files[0].relpath):
        text = row.get("full_answer") or row.get("response")
        out[str(row["id"])] = Recording(text=text, seconds=row.get("response_time"))
    return out


@cache
def _judges(data_dir: str, method: str, dataset: str, model: str) -> dict[str, Recording]:
    src = as_source(data_dir)
    mode = JUDGE_MODES.get(method.upper())
    if mode is None or not src.exists(JUDGES_PATH):
        return {}
    out: dict[str, Recording] = {}
    for row in src.read_json(JUDGES_PATH):
        if row.get("Mode") == mode and row.get("Model") == model and (
            str(row.get("Dataset", "")).lower() == dataset.lower()
        ):
            fid = judge_fact_id(dataset, str(row["Custom_id"]))
            out[fid] = Recording(text=row.get("Answer"), seconds=None)
    return out


@cache
def _sentences(data_dir: str, dataset: str) -> dict[str, str]:
    src = as_source(data_dir)
    rel = dataset_path(canonical_dataset(src, dataset), "kg_modified.json")
    return src.read_json(rel) if src.exists(rel) else {}


def lookup(data_dir: str, model: str, dataset: str, method: str, fact_id: str,
           step: str = "verdict") -> Recording:
    """Find the recorded answer of ``model`` for one fact, method and step.

    Steps: ``verdict`` (the method's answer; for a judge model, its tie-break answer) and
    ``sentence`` (RAG's triple-to-sentence step, from ``kg_modified.json``).
    """
    if step == "sentence":
        sentence = _sentences(data_dir, dataset).get(fact_id)
        if sentence is None:
            raise ReplayMissing(f"no recorded sentence for {dataset} fact {fact_id!r}")
        return Recording(text=sentence, seconds=None)
    if step != "verdict":
        raise ReplayMissing(f"the study recorded no {step!r} answers")
    for table in (_answers, _judges):
        found = table(data_dir, method, dataset, model).get(fact_id)
        if found is not None and found.get("text") is not None:
            return found
    raise ReplayMissing(
        f"replay:{model} has no recorded {method} answer for {dataset} fact {fact_id!r}"
    )


def has_recordings(data_dir: str | None, model: str, dataset: str, method: str) -> bool:
    """Tell whether the study recorded ``model``'s answers (or tie-breaks) for a method."""
    resolved = str(resolve_data_dir(data_dir))
    return bool(
        _answers(resolved, method, dataset, model) or _judges(resolved, method, dataset, model)
    )


def recorded_models(data_dir: str | None = None) -> list[str]:
    """Models with recorded answers (members and judges) in a data folder."""
    src = as_source(data_dir)
    models = {r.model for r in recorded_files(src)}
    if src.exists(JUDGES_PATH):
        models |= {str(r["Model"]) for r in src.read_json(JUDGES_PATH)}
    return sorted(models)


