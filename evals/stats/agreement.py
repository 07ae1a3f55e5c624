"""Agreement between people who labelled the same run, and of the model with each.

Each labels file (``labels.csv`` of ``kgcheck review``, one per annotator) is one rater;
``skip`` decisions are no label. Figures, from the libraries made for them:

- ``cohen_kappa`` (exactly two files): statsmodels' ``cohens_kappa`` over the facts both
  labelled;
- ``fleiss_kappa`` (three or more): statsmodels' ``fleiss_kappa`` over the facts every
  file labelled;
- ``krippendorff_alpha`` (any number, any overlap, missing labels allowed): the
  ``krippendorff`` package, nominal level, over every fact at least two files labelled;
- ``model``: per person, the share of facts where the run's T/F verdict matches the
  person's label, and Cohen's kappa between them (model NA verdicts are counted apart);
- ``disagreements``: facts the people labelled differently, the adjudication queue.

A kappa or alpha that is undefined (every label the same class) is None with a note.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from kgcheck.data.runfolder import (
    RUN_INFO,
    LabelsError,
    read_labels,
    read_run_info,
    read_verdicts,
)
from kgcheck.evals.stats.errors import StatsInputError, missing_extra

__all__ = ["Annotations", "agreement", "cohen_kappa", "disagreements", "read_annotations"]

CLASSES = ("T", "F")


@dataclass
class Annotations:
    """One person's labels (T/F only, by fact id), from one file."""

    path: Path
    annotator: str
    labels: dict[str, str]
    run_dir: Path | None
    run_id: str | None


def _run_of(path: Path) -> tuple[Path | None, str | None, set[str] | None]:
    folder = path.parent
    if not (folder / RUN_INFO).is_file():
        return None, None, None
    info = read_run_info(folder, StatsInputError)
    facts = set(read_verdicts(folder))
    return folder, str(info.get("run_id") or folder.resolve()), facts


def read_annotations(path: str | Path) -> Annotations:
    """Read one labels file; a file in a run folder must label that run's facts only."""
    path = Path(path)
    run_dir, run_id, facts = _run_of(path)
    try:
        rows = read_labels(path, facts)
    except LabelsError as exc:
        raise StatsInputError(str(exc)) from None
    labels = {fid: r["label"] for fid, r in rows.items() if r["label"] in CLASSES}
    if not labels:
        raise StatsInputError(f"{path}: no T or F labels in it (empty, or every fact skipped)")
    names = {r.get("annotator") or r.get("reviewer") for r in rows.values()} - {None, ""}
    annotator = sorted(names)[0] if len(names) == 1 else path.stem
    return Annotations(path, annotator, labels, run_dir, run_id)


def _nan_to_none(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def cohen_kappa(a: Mapping[str, str], b: Mapping[str, str],
                classes: Sequence[str] = CLASSES) -> tuple[float | None, int]:
    """Return Cohen's kappa (statsmodels) of two raters over the facts both rated, and n."""
    try:
        # Imported on use: statsmodels is part of the optional `stats` extra.
        from statsmodels.stats.inter_rater import cohens_kappa
    except ImportError:
        raise missing_extra("statsmodels") from None
    common = [f for f in a if f in b]
    if not common:
        return None, 0
    index = {c: i for i, c in enumerate(classes)}
    table = np.zeros((len(classes), len(classes)))
    for f in common:
        table[index[a[f]], index[b[f]]] += 1
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        kappa = float(cohens_kappa(table).kappa)
    return _nan_to_none(kappa), len(common)


def _fleiss(sets: Sequence[Annotations]) -> tuple[float | None, int]:
    try:
        from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa
    except ImportError:
        raise missing_extra("statsmodels") from None
    common = [f for f in sets[0].labels if all(f in s.labels for s in sets[1:])]
    if not common:
        return None, 0
    data = np.array([[CLASSES.index(s.labels[f]) for s in sets] for f in common])
    table, _ = aggregate_raters(data, n_cat=len(CLASSES))
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        kappa = float(fleiss_kappa(table, method="fleiss"))
    return _nan_to_none(kappa), len(common)


def _krippendorff(sets: Sequence[Annotations]) -> tuple[float | None, int]:
    try:
        # Imported on use: krippendorff is part of the optional `stats` extra.
        import krippendorff
    except ImportError:
        raise missing_extra("krippendorff") from None
    facts = list(dict.fromkeys(f for s in sets for f in s.labels))
    shared = [f for f in facts if sum(f in s.labels for s in sets) >= 2]
    if not shared:
        return None, 0
    data = np.array([[CLASSES.index(s.labels[f]) if f in s.labels else np.nan
                      for f in shared] for s in sets], dtype=float)
    if len(np.unique(data[~np.isnan(data)])) < 2:
        return None, len(shared)  # one value only: alpha is undefined
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        alpha = float(krippendorff.alpha(reliability_data=data,
                                         level_of_measurement="nominal"))
    return _nan_to_none(alpha), len(shared)


def disagreements(sets: Sequence[Annotations]) -> list[dict[str, Any]]:
    """Return the facts labelled T by someone and F by someone else, with every label."""
    facts = list(dict.fromkeys(f for s in sets for f in s.labels))
    rows = []
    for fid in facts:
        given = {s.annotator: s.labels[fid] for s in sets if fid in s.labels}
        if len(set(given.values())) > 1:
            rows.append({"fact_id": fid, "labels": given})
    return rows


def _check(sets: Sequence[Annotations]) -> None:
    if len(sets) < 2:
        only = f": {sets[0].path} ({sets[0].annotator})" if sets else ""
        raise StatsInputError(f"agreement needs the labels of two or more annotators, got one "
                              f"file{only}; give one labels file per person")
    names = [s.annotator for s in sets]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        files = ", ".join(str(s.path) for s in sets if s.annotator in twice)
        raise StatsInputError(f"the files {files} are all {twice[0]}'s labels: agreement "
                              "needs different people")
    runs = {s.run_id for s in sets if s.run_id is not None}
    if len(runs) > 1:
        where = "; ".join(f"{s.path} labels run {s.run_id}" for s in sets if s.run_id)
        raise StatsInputError(f"the labels files belong to different runs ({where}): compare "
                              "labels of one run")
    if not any(f in b.labels for a, b in combinations(sets, 2) for f in a.labels):
        raise StatsInputError("the labels files share no labelled fact: agreement needs facts "
                              "labelled by two people or more (see kgcheck review --overlap)")


def _model(sets: Sequence[Annotations], run_dir: Path | None) -> dict[str, Any] | None:
    if run_dir is None:
        return None
    verdicts = {fid: str(r.get("label", "NA")) for fid, r in
                read_verdicts(run_dir).items()}
    found = {}
    for s in sets:
        labelled = [f for f in s.labels if f in verdicts]
        decided = {f: verdicts[f] for f in labelled if verdicts[f] in CLASSES}
        kappa, n = cohen_kappa(decided, s.labels)
        agree = sum(1 for f in decided if decided[f] == s.labels[f])
        found[s.annotator] = {"facts": n, "agreement": agree / n if n else None,
                              "cohen_kappa": kappa, "model_na": len(labelled) - len(decided)}
    return found


def agreement(paths: Sequence[str | Path], *, run: str | Path | None = None) -> dict[str, Any]:
    """Compute the agreement of the labels files (see the module docstring) as JSON."""
    sets = [read_annotations(p) for p in paths]
    _check(sets)
    run_dir = Path(run) if run is not None else next((s.run_dir for s in sets if s.run_dir),
                                                     None)
    if run is not None:
        read_run_info(Path(run), StatsInputError)
    result: dict[str, Any] = {
        "files": [str(s.path) for s in sets], "annotators": [s.annotator for s in sets],
        "facts": len({f for s in sets for f in s.labels}),
        "cohen_kappa": None, "fleiss_kappa": None, "krippendorff_alpha": None,
        "notes": [],
    }
    if len(sets) == 2:
        result["cohen_kappa"], result["cohen_facts"] = cohen_kappa(sets[0].labels,
                                                                   sets[1].labels)
    else:
        result["fleiss_kappa"], result["fleiss_facts"] = _fleiss(sets)
        if result["fleiss_facts"] == 0:
            result["notes"].append("no fact was labelled by every file: no Fleiss' kappa")
    result["krippendorff_alpha"], result["alpha_facts"] = _krippendorff(sets)
    result["pairs"] = [{"a": a.annotator, "b": b.annotator,
                        **dict(zip(("cohen_kappa", "facts"), cohen_kappa(a.labels, b.labels),
                                   strict=True))} for a, b in combinations(sets, 2)]
    for key in ("cohen_kappa", "fleiss_kappa", "krippendorff_alpha"):
        facts = result.get({"cohen_kappa": "cohen_facts", "fleiss_kappa": "fleiss_facts",
                            "krippendorff_alpha": "alpha_facts"}[key])
        if result[key] is None and facts:
            result["notes"].append(f"{key} is undefined: the labels hold one class only")
    result["model"] = _model(sets, run_dir)
    result["disagreements"] = disagreements(sets)
    return result
