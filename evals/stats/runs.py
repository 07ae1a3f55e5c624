"""Read the verdicts of run folders for the statistics (through ``kgcheck.data.runfolder``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgcheck.data.labels import LabelsError
from kgcheck.data.runfolder import VERDICTS, read_run_info, read_verdicts
from kgcheck.data.truths import Truths, run_truths
from kgcheck.evals.stats.errors import StatsInputError

__all__ = ["ScoredRun", "read_scored_run", "shared_facts", "shared_truths"]


@dataclass
class ScoredRun:
    """A run's identity, its verdicts by fact id, and its facts' truths (review, else gold)."""

    path: Path
    dataset: str
    name: str
    records: dict[str, dict[str, Any]]
    truth: Truths

    def labels(self) -> dict[str, str]:
        """Return each fact's verdict label."""
        return {fid: str(r.get("label", "NA")) for fid, r in self.records.items()}

    def truths(self) -> dict[str, str]:
        """Return the truth ("T"/"F") of each fact that has one (``kgcheck.data.truths``)."""
        return self.truth.labels


def read_scored_run(path: str | Path, warn: Callable[[str], None] | None = None) -> ScoredRun:
    """Read a run folder's identity and verdicts; one clear error when it has none."""
    folder = Path(path)
    info = read_run_info(folder, StatsInputError)
    records = read_verdicts(folder, warn)
    if not records:
        raise StatsInputError(f"{folder}: no verdicts in {VERDICTS}; the run has not checked "
                              "any fact yet")
    models = ", ".join(map(str, info.get("models") or [])) or "?"
    name = f"{folder.name} ({info.get('method', '?')} {models})"
    try:
        truth = run_truths(folder, records.values())
    except LabelsError as exc:
        raise StatsInputError(str(exc)) from None
    return ScoredRun(folder, str(info.get("dataset") or ""), name, records, truth)


def shared_truths(a: ScoredRun, b: ScoredRun) -> dict[str, str]:
    """Return the truth of each fact both runs checked and either knows the truth of.

    A run's truths are its review decisions, else its gold labels (``kgcheck.data.truths``);
    a fact only one run knows takes that run's truth.

    Raises:
        StatsInputError: the runs hold different truths for a fact.

    """
    truths_a, truths_b = a.truths(), b.truths()
    shared = {fid: truths_a.get(fid) or truths_b[fid] for fid in a.records
              if fid in b.records and (fid in truths_a or fid in truths_b)}
    clash = [fid for fid in shared if fid in truths_a and fid in truths_b
             and truths_a[fid] != truths_b[fid]]
    if clash:
        fid = clash[0]
        raise StatsInputError(
            f"{a.path} and {b.path} hold different truths for {len(clash)} shared facts (e.g. "
            f"{fid}: {truths_a[fid]} from {a.path.name}'s {a.truth.sources[fid]} label, "
            f"{truths_b[fid]} from {b.path.name}'s {b.truth.sources[fid]} label): they checked "
            "different data, or their reviews disagree")
    return shared


def shared_facts(a: ScoredRun, b: ScoredRun) -> list[str]:
    """Return the ids of the facts both runs checked with a truth, in A's order.

    Raises:
        StatsInputError: the runs checked different datasets, share no fact with a truth
            (a review decision or a gold label), or hold different truths for a fact.

    """
    if a.dataset and b.dataset and a.dataset.lower() != b.dataset.lower():
        raise StatsInputError(f"{a.path} checked {a.dataset} but {b.path} checked {b.dataset}: "
                              "they share no facts")
    common = [fid for fid in a.records if fid in b.records]
    if not common:
        raise StatsInputError(f"{a.path} and {b.path} share no facts: compare runs over the "
                              "same dataset or sample")
    scored = list(shared_truths(a, b))
    if not scored:
        raise StatsInputError(
            f"{a.path} and {b.path} share {len(common)} facts but none has a gold label or a "
            "review decision: run them with --labels FILE, or review one with "
            f"`kgcheck review {a.path}`")
    return scored
