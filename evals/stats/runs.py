"""Read the verdicts of run folders for the statistics (through ``kgcheck.data.runfolder``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgcheck.data.runfolder import VERDICTS, read_run_info, read_verdicts
from kgcheck.evals.stats.errors import StatsInputError

__all__ = ["ScoredRun", "read_scored_run", "shared_facts"]


@dataclass
class ScoredRun:
    """A run's identity and its verdicts, by fact id."""

    path: Path
    dataset: str
    name: str
    records: dict[str, dict[str, Any]]

    def labels(self) -> dict[str, str]:
        """Return each fact's verdict label."""
        return {fid: str(r.get("label", "NA")) for fid, r in self.records.items()}

    def gold(self) -> dict[str, str]:
        """Return the gold label ("T"/"F") of each fact that has one."""
        return {fid: r["gold"] for fid, r in self.records.items() if r.get("gold") in ("T", "F")}


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
    return ScoredRun(folder, str(info.get("dataset") or ""), name, records)


def shared_facts(a: ScoredRun, b: ScoredRun) -> list[str]:
    """Return the ids of the facts both runs checked with a gold label, in A's order.

    Raises:
        StatsInputError: the runs checked different datasets, share no fact with a gold
            label, or hold different gold labels for a fact.

    """
    if a.dataset and b.dataset and a.dataset.lower() != b.dataset.lower():
        raise StatsInputError(f"{a.path} checked {a.dataset} but {b.path} checked {b.dataset}: "
                              "they share no facts")
    common = [fid for fid in a.records if fid in b.records]
    if not common:
        raise StatsInputError(f"{a.path} and {b.path} share no facts: compare runs over the "
                              "same dataset or sample")
    gold_a, gold_b = a.gold(), b.gold()
    clash = [fid for fid in common if fid in gold_a and fid in gold_b
             and gold_a[fid] != gold_b[fid]]
    if clash:
        raise StatsInputError(f"{a.path} and {b.path} hold different gold labels for "
                              f"{len(clash)} shared facts (e.g. {clash[0]}): they checked "
                              "different data")
    scored = [fid for fid in common if fid in gold_a and fid in gold_b]
    if not scored:
        raise StatsInputError(f"{a.path} and {b.path} share {len(common)} facts but none has "
                              "a gold label: give the runs --labels to compare them")
    return scored
