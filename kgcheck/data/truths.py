"""A run's truths: what each checked fact is taken to be, read one way by every command.

A verdict is scored against its fact's truth. Two things say what a fact is, in this order:

1. a person's review decision, ``T`` or ``F`` in the run's ``labels.csv`` (``kgcheck
   review``; after several annotators, the adjudicated file). A decision of ``skip`` says
   nothing and leaves the next source;
2. the fact's gold label, ``T`` or ``F``, stored in its verdict record (from the dataset or
   from ``--labels`` when the run was made).

Annotators' own files (``labels-<name>.csv``) are raters for agreement statistics, not
truths: their disagreements are settled by adjudication into ``labels.csv`` first. Every
command that scores a run folder (``compare``, ``errors``, ``view``, ``report``'s confidence
section, ``calibration``) reads truths here, so they agree on which verdicts are wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kgcheck.data.runfolder import LABELS_FILE, read_labels

__all__ = ["TRUTH_LABELS", "Truths", "review_decisions", "run_truths"]

TRUTH_LABELS = ("T", "F")
Source = Literal["review", "gold"]


@dataclass(frozen=True)
class Truths:
    """Each fact's truth (``T``/``F``) and where it came from (``review`` or ``gold``)."""

    labels: dict[str, str] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)

    def get(self, fact_id: str) -> str | None:
        """Return a fact's truth, or None when nothing says what the fact is."""
        return self.labels.get(fact_id)

    def describe(self) -> str:
        """Say where the truths come from, for a report's heading."""
        found = set(self.sources.values())
        if found == {"review", "gold"}:
            return "review labels, else gold"
        if found == {"review"}:
            return "review labels"
        return "gold"


def review_decisions(folder: str | Path, run_fact_ids: Iterable[str] | None = None
                     ) -> dict[str, str]:
    """Return the T/F decisions of a run's review (``labels.csv``); empty when not reviewed.

    Raises:
        LabelsError: the labels file is malformed or (given ``run_fact_ids``) labels facts
            the run did not check.

    """
    path = Path(folder) / LABELS_FILE
    if not path.is_file():
        return {}
    ids = None if run_fact_ids is None else set(run_fact_ids)
    return {fid: row["label"] for fid, row in read_labels(path, ids).items()
            if row["label"] in TRUTH_LABELS}


def run_truths(folder: str | Path | None, records: Iterable[Mapping[str, Any]],
               review: Mapping[str, str] | None = None) -> Truths:
    """Return the truths of a run's facts: review decisions first, then gold labels.

    ``records`` are the run's verdict records (their ``fact_id`` and ``gold``); ``review``
    gives the decisions when the caller has read them already, else they are read from
    ``folder`` (None: no review).
    """
    if review is None:
        review = review_decisions(folder) if folder is not None else {}
    labels: dict[str, str] = {}
    sources: dict[str, Source] = {}
    for record in records:
        fid = str(record.get("fact_id"))
        if fid in review:
            labels[fid], sources[fid] = review[fid], "review"
        elif record.get("gold") in TRUTH_LABELS:
            labels[fid], sources[fid] = str(record["gold"]), "gold"
    return Truths(labels, sources)
