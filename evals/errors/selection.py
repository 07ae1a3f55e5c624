"""Find the wrong verdicts of runs against their truths (``kgcheck.data.truths``).

A fact's truth is a person's review decision, else its gold label.

A verdict is wrong when it says T or F and the truth says the other (an NA verdict is
not an error of judgement: the report counts it apart). Each run folder is read once as
a stream (``scan_folder``), keeping a few fields per fact; with ``cap`` a run's errors
are a seeded uniform sample, so the same seed analyses the same errors.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgcheck.data.runfolder import (
    LABELS_FILE,
    VERDICTS,
    LabelsError,
    has_verdicts,
    read_run_info,
    scan_folder,
)
from kgcheck.data.truths import review_decisions, run_truths
from kgcheck.evals.errors.graph import ErrorCase
from kgcheck.evals.errors.outputs import ErrorsInputError

__all__ = ["RunErrors", "explanation_of", "read_run_errors"]


def explanation_of(record: dict[str, Any]) -> str | None:
    """Return the explanation a verdict already carries (top level or in its details)."""
    details = record.get("details") if isinstance(record.get("details"), dict) else {}
    for value in (record.get("explanation"), (details or {}).get("explanation")):
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


@dataclass
class RunErrors:
    """One run's verdicts as the analysis needs them, and its wrong ones."""

    folder: Path
    name: str
    info: dict[str, Any]
    # Per scored fact (a T/F truth): its predicate, subject, verdict and whether it is wrong.
    scored: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ErrorCase] = field(default_factory=list)
    # Explanations the verdicts carry, by fact id: reused without a call.
    carried: dict[str, str] = field(default_factory=dict)
    total_errors: int = 0
    na: int = 0
    truth_from: str = "gold"

    @property
    def model(self) -> str:
        """The run's own model (a consensus run's first member)."""
        models = self.info.get("models") or []
        return str(models[0]) if models else ""

    @property
    def dataset(self) -> str:
        """The run's dataset name."""
        return str(self.info.get("dataset") or "")


def _name(folder: Path, taken: set[str]) -> str:
    name, base, n = folder.resolve().name, folder.resolve().name, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def read_run_errors(folders: Sequence[Path], *, cap: int | None = None,
                    seed: int = 0) -> list[RunErrors]:
    """Read each run's wrong verdicts (a seeded sample of ``cap`` per run when given).

    Raises:
        ErrorsInputError: a folder that is not a run, or a run with neither gold labels
            nor review labels.

    """
    taken: set[str] = set()
    runs = []
    for folder in folders:
        folder = Path(folder)
        info = read_run_info(folder, ErrorsInputError)
        if not has_verdicts(folder):
            raise ErrorsInputError(f"{folder}: no {VERDICTS}; the run has not started")
        try:
            reviews = review_decisions(folder)
        except LabelsError as exc:
            raise ErrorsInputError(str(exc)) from None
        run = RunErrors(folder, _name(folder, taken), info)
        latest: dict[str, dict[str, Any]] = {}
        for _, _, _, record in scan_folder(folder):
            latest[str(record["fact_id"])] = {
                "label": record["label"], "gold": record.get("gold"),
                "subject": str(record.get("subject") or ""),
                "predicate": str(record.get("predicate") or ""),
                "object": str(record.get("object") or ""),
                "dataset": str(record.get("dataset") or info.get("dataset") or ""),
                "raw": record.get("raw") if isinstance(record.get("raw"), str) else None,
                "explanation": explanation_of(record)}
        if not latest:
            raise ErrorsInputError(f"{folder / VERDICTS}: no verdicts")
        truths = run_truths(folder, ({"fact_id": fid, "gold": rec["gold"]}
                                     for fid, rec in latest.items()), review=reviews)
        run.truth_from = truths.describe()
        wrong: list[ErrorCase] = []
        for fid, rec in latest.items():
            truth = truths.get(fid)
            if truth is None:
                continue
            is_wrong = rec["label"] in ("T", "F") and rec["label"] != truth
            run.na += rec["label"] == "NA"
            run.scored.append({"fact_id": fid, "predicate": rec["predicate"],
                               "subject": rec["subject"], "wrong": is_wrong,
                               "label": rec["label"]})
            if is_wrong:
                wrong.append(ErrorCase(run=run.name, fact_id=fid, dataset=rec["dataset"],
                                       subject=rec["subject"], predicate=rec["predicate"],
                                       object=rec["object"], label=rec["label"], truth=truth,
                                       raw=rec["raw"]))
                if rec["explanation"]:
                    run.carried[fid] = rec["explanation"]
        if not run.scored:
            raise ErrorsInputError(
                f"{folder}: no gold labels and no review labels ({LABELS_FILE}): nothing "
                f"says which verdicts are wrong; label them with `kgcheck review {folder}` "
                "(its labels are read from there), or check the facts again with gold "
                "labels (the --labels option of kgcheck run)")
        run.total_errors = len(wrong)
        if cap is not None and len(wrong) > cap:
            keep = set(random.Random(seed).sample(range(len(wrong)), cap))
            wrong = [e for i, e in enumerate(wrong) if i in keep]
        run.errors = wrong
        runs.append(run)
    return runs
