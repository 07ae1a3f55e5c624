"""The repeats of a sharded run combined shard by shard, as a Ray worker combines them.

No Ray here: random verdicts of three repeats (labels, gold, tokens, failed checks, facts a
stopped repeat never reached) are written into each repeat's shard store, split unevenly
across shards (one of them empty), and each shard is combined in this process. The
combined records, the merged tally's summary and the merged ``repeats`` section must be
those ``combine_repeats`` gives over the whole run, whatever the split. A combined shard is
not made again while its repeats' markers stay; it is when one changes, and it gets no
marker while a repeat's shard has none.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kgcheck.data.runfolder import scan_verdicts, shard_name
from kgcheck.data.shard_store import ShardStore
from kgcheck.evals.metrics import score_summary
from kgcheck.evals.stats.repeats import fact_stability
from kgcheck.runs import repeats as repeat_runs
from kgcheck.runs.outcomes import RunOutcomes
from kgcheck.runs.pipeline_repeats import CombineJob, RepeatsPart, combine_shard
from kgcheck.runs.repeats import combine_repeats
from kgcheck.runs.runner import RunInfo, RunResult, SummaryTally, summarize, summary_of

MODELS = ["ollama:m"]
REPEATS = 3


def _record(rng: random.Random, fid: str, repeat: int) -> dict[str, Any]:
    label = rng.choice(["T", "T", "F", "F", "NA"])
    failed = label == "NA" and rng.random() < 0.3
    return {"fact_id": fid, "subject": f"s{fid}", "predicate": f"p{int(fid) % 3}",
            "object": "o", "gold": rng.choice(["T", "F", None]), "label": label,
            "raw": f"answer {repeat}", "method": "DKA", "model": MODELS[0],
            "tokens_in": rng.randint(10, 40), "tokens_out": rng.randint(1, 3),
            "seconds": rng.choice([0.5, 1.25, None]),
            "error": "the model failed" if failed else None}


def _repeats(seed: int, facts: int) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    runs = [[_record(rng, str(n), r) for n in range(facts)] for r in range(REPEATS)]
    # The last repeat stopped early: the facts of its end have no verdict in it.
    del runs[-1][facts - 7:]
    return runs


def _split(facts: int, rng: random.Random) -> list[range]:
    cuts = sorted(rng.sample(range(1, facts), 4))
    bounds = [0, *cuts[:2], cuts[1], *cuts[2:], facts]  # one shard is empty
    return [range(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


def _write_repeat(store: ShardStore, records: list[dict[str, Any]], shards: list[range]) -> None:
    for index, part in enumerate(shards):
        mine = [r for r in records if int(r["fact_id"]) in part]
        if mine or index == 0:
            store.write_text(shard_name(index, ".jsonl"),
                             "".join(json.dumps(r) + "\n" for r in mine))
        if len(mine) == len(part):  # a shard the repeat finished
            store.write_text(shard_name(index, ".done"),
                             json.dumps({"shard": index, "facts": len(mine)}) + "\n")


def _combined(where: Callable[[str], str], runs: list[list[dict[str, Any]]],
              shards: list[range]) -> tuple[CombineJob, list[dict[str, Any]]]:
    # OUT's store, and the repeats' under it, as a run at a URI lays them out.
    stores = [ShardStore(where(f"repeats/{n + 1}")) for n in range(len(runs))]
    for store, records in zip(stores, runs, strict=True):
        _write_repeat(store, records, shards)
    job = CombineJob(where(""), [s.where for s in stores], MODELS)
    return job, [combine_shard(job, index) for index in range(len(shards))]


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """Where OUT's shards and its repeats' go: folders, or a fresh S3 prefix."""
    if request.param == "local":
        return lambda sub: str(tmp_path / "out" / sub)
    s3 = request.getfixturevalue("s3")
    return lambda sub: s3.uri(f"{tmp_path.name}/out/{sub}".rstrip("/"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_combined_shards_give_what_combine_repeats_gives(tmp_path: Path, seed: int,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    # A short flipped list, so that each shard's top and their merge are put to the test.
    monkeypatch.setattr(repeat_runs, "MAX_LISTED", 9)
    facts = 120
    runs = _repeats(seed, facts)
    job, markers = _combined(lambda sub: str(tmp_path / "out" / sub), runs,
                             _split(facts, random.Random(seed)))
    results = [RunResult(tmp_path, records, {}) for records in runs]
    want_records, want_section = combine_repeats(results)

    out = ShardStore(job.out)
    got = [r for index in range(len(markers))
           for _, _, r in scan_verdicts(Path(out.where) / shard_name(index, ".jsonl"))]
    assert sorted(got, key=lambda r: int(r["fact_id"])) == sorted(
        want_records, key=lambda r: int(r["fact_id"]))

    tally, outcomes, part = SummaryTally(MODELS), RunOutcomes(), RepeatsPart()
    for marker in markers:
        tally.merge(SummaryTally.from_state(MODELS, marker["tally"]))
        outcomes.merge(RunOutcomes.from_state(marker["outcomes"]))
        part.merge(RepeatsPart.from_state(marker["repeats"]))
    section = part.section([score_summary(records) for records in runs])
    assert section == want_section
    assert len(section["flipped"]) == 9 and section["count"] == REPEATS
    info = RunInfo(dataset="kg", strategy="dka", method="DKA", models=MODELS)
    assert summary_of(tally, info, seconds=1.0, ran=0) == summarize(want_records, info,
                                                                   seconds=1.0, ran=0)
    assert outcomes.state() == RunOutcomes.of(want_records).state()

    # The figures themselves, from each fact's labels with numpy.
    labels: dict[str, list[str]] = {}
    for records in runs:
        for r in records:
            labels.setdefault(r["fact_id"], []).append(r["label"])
    stable = [fact_stability(v) for v in labels.values()]
    assert section["facts"] == facts
    assert section["mean_flip_rate"] == pytest.approx(np.mean([s["flip_rate"] for s in stable]))
    assert section["mean_entropy"] == pytest.approx(np.mean([s["entropy"] for s in stable]))
    assert section["flipped_facts"] == sum(1 for s in stable if s["flip_rate"] > 0)


def test_a_combined_shard_is_made_again_only_when_a_repeat_changed(
        where: Callable[[str], str]) -> None:
    facts = 40
    runs = _repeats(7, facts)
    shards = [range(0, 20), range(20, 40)]
    job, first = _combined(where, runs, shards)
    out = ShardStore(job.out)
    assert sorted(out.names()) == ["00000.done", "00000.jsonl", "00001.jsonl"]
    # Shard 1's facts of the last repeat are missing (it stopped): no marker yet.
    combined = out.read_text(shard_name(0, ".jsonl"))
    # Not made again while the repeats' markers stay (a repeat's verdicts gone unseen).
    ShardStore(job.repeats[0]).remove(shard_name(0, ".jsonl"))
    assert combine_shard(job, 0) == first[0]
    assert out.read_text(shard_name(0, ".jsonl")) == combined

    # The last repeat resumed: shard 1 has all its verdicts and a marker now.
    rng = random.Random(8)
    done = [*runs[-1], *(_record(rng, str(n), 2) for n in range(facts - 7, facts))]
    _write_repeat(ShardStore(job.repeats[-1]), done, shards)
    again = combine_shard(job, 1)
    assert again["facts"] == 20 and out.read_text(shard_name(1, ".done")) is not None
    assert [fact["labels"] for fact in _details(out, 1)] == [
        [r["label"] for r in (runs[0][n], runs[1][n], done[n])] for n in range(20, 40)]
    # Repeat 1's shard 0 ran again (its marker changed): shard 0 is combined anew, from the
    # verdicts the repeats hold now.
    _write_repeat(ShardStore(job.repeats[0]), runs[0][:10], [range(0, 10)])
    remade = combine_shard(job, 0)
    assert remade["sources"] != first[0]["sources"] and remade["facts"] == 20
    assert [fact["labels"] for fact in _details(out, 0)][:10] == [
        [r["label"] for r in (runs[0][n], runs[1][n], runs[2][n])] for n in range(10)]
    assert all(len(fact["labels"]) == 2 for fact in _details(out, 0)[10:])


def _details(store: ShardStore, index: int) -> list[dict[str, Any]]:
    text = store.read_text(shard_name(index, ".jsonl")) or ""
    return [json.loads(line)["details"]["repeats"] for line in text.splitlines()]
