"""What went wrong in a run, in brief: failed facts, skipped input, failing evidence sources.

What the command line says after a run (the commonest error, how many facts were skipped
as invalid input, which evidence source failed and why), counted from the verdict records
one at a time. Outcomes of parts of a run merge (a sharded run's workers count their shards
and the driver only merges), so no verdict needs to be read again to say it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kgcheck.graphs import verdicts

__all__ = ["RunOutcomes"]

# Distinct error messages counted; past that only their number grows (the commonest of a
# run is among the first messages in practice: one cause fails many facts alike).
MAX_MESSAGES = 1_000
# Errors of skipped input shown as examples.
EXAMPLES = 3


@dataclass
class RunOutcomes:
    """Counts of a run's failed and skipped facts and failing evidence sources."""

    facts: int = 0
    skipped: int = 0
    examples: list[str] = field(default_factory=list)
    failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    sources: dict[str, Counter[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]]) -> RunOutcomes:
        """Count the outcomes of these records."""
        found = cls()
        for record in records:
            found.add(record)
        return found

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one verdict record."""
        self.facts += 1
        if verdicts.is_defect(record):
            self.skipped += 1
            if len(self.examples) < EXAMPLES:
                self.examples.append(str(record["error"]))
        elif record.get("error"):
            self.failed += 1
            message = str(record["error"])
            if message in self.errors or len(self.errors) < MAX_MESSAGES:
                self.errors[message] += 1
        gathering = (record.get("details") or {}).get("gathering") or {}
        for source, reason in (gathering.get("failed") or {}).items():
            self.sources.setdefault(str(source), Counter())[str(reason)] += 1

    def merge(self, other: RunOutcomes) -> None:
        """Take the outcomes of a later part of the run into these."""
        self.facts += other.facts
        self.skipped += other.skipped
        self.examples += other.examples[:max(0, EXAMPLES - len(self.examples))]
        self.failed += other.failed
        for message, count in other.errors.items():
            if message in self.errors or len(self.errors) < MAX_MESSAGES:
                self.errors[message] += count
        for source, reasons in other.sources.items():
            self.sources.setdefault(source, Counter()).update(reasons)

    def state(self) -> dict[str, Any]:
        """Return the outcomes as JSON-plain data (``from_state`` reads them back)."""
        return {"facts": self.facts, "skipped": self.skipped, "examples": self.examples,
                "failed": self.failed, "errors": dict(self.errors),
                "sources": {k: dict(v) for k, v in self.sources.items()}}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> RunOutcomes:
        """Rebuild outcomes from ``state``'s data."""
        return cls(int(state["facts"]), int(state["skipped"]), list(state["examples"]),
                   int(state["failed"]), Counter(state["errors"]),
                   {k: Counter(v) for k, v in state["sources"].items()})
