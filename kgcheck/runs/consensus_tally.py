"""The consensus section of a run's summary, counted one record at a time and mergeable.

``ConsensusTally`` takes consensus verdict records one by one and gives what
``consensus.consensus_summary`` computes from all of them at once: ties and the tie rate,
CA_M per member (``evals.metrics.consensus_alignment``), each member's F1(T), F1(F), votes,
NA votes and errors, the judge's calls, decisions and errors. It keeps counts only, so its
memory does not grow with the records; tallies of parts of a run (the shards of a sharded
run) merge into the tally of the run (``merge``; ``state`` and ``from_state`` carry one as
JSON), whatever order the records came in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kgcheck.evals.metrics import confusion_of, f1
from kgcheck.graphs.votes import TIE, tally

__all__ = ["ConsensusTally", "merged_consensus"]

# Counts of the judge and the members' failures, by the summary's key.
_JUDGE_KEYS = ("ties", "judge_calls", "judge_decided", "member_errors", "judge_errors")


class ConsensusTally:
    """Counts of consensus records: what the summary's consensus figures are made from."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(_JUDGE_KEYS, 0)
        # Records with votes, those whose votes split evenly, and those with a majority.
        self.voted = self.split = self.decided = 0
        # Per model: decided facts where it voted with the majority (CA_M's numerator).
        self.agree: Counter[str] = Counter()
        # Per model: its votes by (gold mark, label), and its votes that failed.
        self.pairs: Counter[tuple[str, Any, str]] = Counter()
        self.errors: Counter[str] = Counter()

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]]) -> ConsensusTally:
        """Count ``records`` (read once, as a stream)."""
        found = cls()
        for record in records:
            found.add(record)
        return found

    def add(self, record: Mapping[str, Any]) -> None:
        """Take one consensus verdict record into the counts."""
        details = record.get("details") or {}
        counts = self.counts
        counts["ties"] += details.get("decision") == "tie"
        counts["judge_calls"] += bool(details.get("judge_called"))
        counts["judge_decided"] += bool(details.get("judge_decided"))
        counts["member_errors"] += int(details.get("member_errors") or 0)
        counts["judge_errors"] += bool(details.get("judge_error"))
        votes = details.get("votes") or []
        if not votes:
            return
        # One label per model, the last one given, as ``consensus.vote_maps`` reads them.
        labels = {vote["model"]: vote["label"] for vote in votes}
        self.voted += 1
        majority = tally(labels.values())["decision"]
        if majority == TIE:
            self.split += 1
        else:
            self.decided += 1
            for model, label in labels.items():
                self.agree[model] += label == majority
        gold = record.get("gold")
        for vote in votes:
            model = vote.get("model")
            self.pairs[(model, gold, vote["label"])] += 1
            self.errors[model] += bool(vote.get("error"))

    def merge(self, other: ConsensusTally) -> None:
        """Take another tally's records into this one (another part of the run)."""
        for key, count in other.counts.items():
            self.counts[key] += count
        self.voted += other.voted
        self.split += other.split
        self.decided += other.decided
        self.agree.update(other.agree)
        self.pairs.update(other.pairs)
        self.errors.update(other.errors)

    def state(self) -> dict[str, Any]:
        """Return the tally as JSON-plain data (``from_state`` reads it back)."""
        return {"counts": self.counts, "votes": [self.voted, self.split, self.decided],
                "agree": dict(self.agree),
                "pairs": [[m, g, label, n] for (m, g, label), n in self.pairs.items()],
                "errors": dict(self.errors)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ConsensusTally:
        """Rebuild a tally from ``state``'s data."""
        found = cls()
        found.counts.update({k: int(v) for k, v in state["counts"].items()})
        found.voted, found.split, found.decided = (int(n) for n in state["votes"])
        found.agree = Counter({str(m): int(n) for m, n in state["agree"].items()})
        found.pairs = Counter({(m, g, str(label)): int(n) for m, g, label, n in state["pairs"]})
        found.errors = Counter({str(m): int(n) for m, n in state["errors"].items()})
        return found

    def alignment(self, members: Sequence[str]) -> dict[str, float]:
        """CA_M of each member: its share of the decided facts where it voted with the majority.

        A member that never voted on a decided fact scores 0, as in ``consensus_alignment``.
        """
        return {m: self.agree.get(m, 0) / self.decided if self.decided else 0.0
                for m in members}

    def member_scores(self, members: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each member's F1(T), F1(F) (None without gold labels), votes, NA votes and errors."""
        scores: dict[str, dict[str, Any]] = {}
        for member in members:
            mine = {(g, label): n for (m, g, label), n in self.pairs.items() if m == member}
            # F1 over the votes on labelled facts, as ``f1_true_false`` scores them.
            scored: Counter[tuple[Any, str]] = Counter()
            for (gold, label), n in mine.items():
                if gold in ("T", "F"):
                    scored[(gold == "T", label)] += n
            f1_t, f1_f = (_f1_of(scored, "T"), _f1_of(scored, "F")) if scored else (None, None)
            scores[member] = {"f1_true": f1_t, "f1_false": f1_f, "votes": sum(mine.values()),
                              "na": sum(n for (_, label), n in mine.items() if label == "NA"),
                              "errors": self.errors.get(member, 0)}
        return scores

    def summary(self, members: Sequence[str], **extra: Any) -> dict[str, Any]:
        """Return the consensus figures ``consensus_summary`` gives over the same records."""
        counts = self.counts
        return {
            "tie_rate": round(self.split / self.voted if self.voted else 0.0, 4),
            "ties": counts["ties"],
            "alignment": {m: round(v, 4) for m, v in self.alignment(members).items()},
            "member_scores": self.member_scores(members),
            "judge_calls": counts["judge_calls"],
            "judge_decided": counts["judge_decided"],
            "member_errors": counts["member_errors"],
            "judge_errors": counts["judge_errors"],
            **extra,
        }


def merged_consensus(results: Iterable[Mapping[str, Any]]) -> ConsensusTally:
    """Merge the consensus tallies of a sharded run's shards (their markers' ``consensus``)."""
    found = ConsensusTally()
    for result in results:
        if result.get("consensus") is not None:
            found.merge(ConsensusTally.from_state(result["consensus"]))
    return found


def _f1_of(pairs: Mapping[tuple[Any, str], int], cls: str) -> float | None:
    """F1 of one class from (gold, label) counts; None when the class is absent from gold."""
    tp, fp, fn = confusion_of(pairs, cls)
    return None if tp + fn == 0 else f1(tp, fp, fn)
