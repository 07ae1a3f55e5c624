"""The one vote tally: consensus members, self-consistency samples and the metrics use it.

A strict majority of the T/F votes decides; an even split (0-0 included) is a tie; NA and
NEI votes are counted (NEI within NA) but take no side. When no voter says T or F and some
say NEI, the outcome is NEI (``undecided``), not a tie to break. With four voters: >= 3 T
is T, <= 1 T is F, 2-2 is a tie.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

from typing_extensions import TypedDict

from kgcheck.data.facts import Label

TIE: Final = "tie"
Decision = Literal["T", "F", "tie"]


class Tally(TypedDict):
    """The vote count and what it decides."""

    counts: dict[str, int]
    decision: Decision


def tally(labels: Iterable[str]) -> Tally:
    """Count T/F/NA votes and decide: the side with more votes wins, an even split ties."""
    counts = {"T": 0, "F": 0, "NA": 0}
    for label in labels:
        counts[label if label in ("T", "F") else "NA"] += 1
    decision: Decision = TIE
    if counts["T"] > counts["F"]:
        decision = "T"
    elif counts["F"] > counts["T"]:
        decision = "F"
    return Tally(counts=counts, decision=decision)


def undecided(labels: Iterable[str]) -> Label:
    """Label a vote without a majority: NEI when no vote says T or F and one says NEI."""
    seen = set(labels)
    return "NEI" if "NEI" in seen and not seen & {"T", "F"} else "NA"


def vote_share(labels: Iterable[str]) -> float | None:
    """Share of the T/F votes that say T: the vote's confidence that the fact is true."""
    counts = tally(labels)["counts"]
    decided = counts["T"] + counts["F"]
    return counts["T"] / decided if decided else None


def decide(labels: Iterable[str], judge: str | None = None) -> Label:
    """Return the majority; on a tie the judge's label when it is T or F, else NA."""
    decision = tally(labels)["decision"]
    if decision != TIE:
        return decision
    return judge if judge in ("T", "F") else "NA"  # type: ignore[return-value]
