"""The mergeable consensus tally gives ``consensus_summary``'s figures over the same records."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from kgcheck.runs.consensus import alignment_of, consensus_summary
from kgcheck.runs.consensus_tally import ConsensusTally

MEMBERS = ["ollama:a", "ollama:b", "ollama:c", "ollama:d"]


def _record(rng: random.Random, n: int) -> dict[str, Any]:
    """A consensus record as the graph leaves one: votes, a decision, maybe the judge."""
    gold = rng.choice(["T", "F", None])
    if rng.random() < 0.08:
        # A dirty triple or a failed fact: no votes at all.
        return {"fact_id": str(n), "label": "NA", "gold": gold,
                "details": rng.choice([{}, {"member_errors": 4}, None])}
    voters = rng.sample(MEMBERS, rng.randint(1, len(MEMBERS)))
    votes = [{"model": m, "label": rng.choice(["T", "F", "NA", "NEI"]),
              **({"error": "boom"} if rng.random() < 0.1 else {})} for m in voters]
    if rng.random() < 0.05:
        votes.append({"model": voters[0], "label": "T"})  # a member heard twice
    tie = rng.random() < 0.3
    called = tie and rng.random() < 0.7
    return {"fact_id": str(n), "label": rng.choice(["T", "F", "NA"]), "gold": gold,
            "details": {"votes": votes, "decision": "tie" if tie else "majority",
                        "judge_called": called, "judge_decided": called and rng.random() < 0.6,
                        "judge_error": "down" if called and rng.random() < 0.2 else None,
                        "member_errors": sum(1 for v in votes if v.get("error"))}}


def _through_json(tally: ConsensusTally) -> ConsensusTally:
    return ConsensusTally.from_state(json.loads(json.dumps(tally.state())))


@pytest.mark.parametrize("seed", range(8))
def test_the_tally_gives_the_summary_in_any_order_and_split_over_shards(seed: int) -> None:
    rng = random.Random(seed)
    records = [_record(rng, n) for n in range(rng.randint(0, 120))]
    # A member that never voted scores as consensus_summary scores it.
    members = [*MEMBERS, "ollama:absent"]
    expected = consensus_summary(records, members, judge_model="x", judge_source="fixed")
    assert ConsensusTally.of(records).summary(members, judge_model="x",
                                              judge_source="fixed") == expected
    shuffled = records[:]
    rng.shuffle(shuffled)
    cuts = sorted(rng.sample(range(len(shuffled) + 1), min(4, len(shuffled) + 1)))
    merged = ConsensusTally()
    for start, end in zip([0, *cuts], [*cuts, len(shuffled)], strict=True):
        merged.merge(_through_json(ConsensusTally.of(shuffled[start:end])))
    assert merged.summary(members, judge_model="x", judge_source="fixed") == expected
    assert merged.state()["counts"] == ConsensusTally.of(records).state()["counts"]


def test_the_measured_alignment_is_consensus_alignment_unrounded() -> None:
    rng = random.Random(3)
    records = [_record(rng, n) for n in range(60)]
    found = ConsensusTally.of(records).alignment(MEMBERS)
    assert {m: round(v, 4) for m, v in found.items()} == alignment_of(records, MEMBERS)
    assert any(round(v, 4) != v for v in found.values()), "the figures should not be rounded"
