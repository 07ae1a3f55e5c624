"""The study's published figures, reproduced from its recorded answers over whole datasets.

Each test replays every fact of a dataset (2,800 for FactBench) through a strategy's graph
or the CLI and compares F1, ties and alignment with the paper: whole study runs, so they
run with the e2e lane; the same code paths on slices run in tests/unit
(test_dka.py, test_giv_replay.py, test_consensus_replay.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kgcheck.cli import app
from kgcheck.data.datasets import load_facts
from kgcheck.data.facts import Fact
from kgcheck.evals.metrics import classification_report, consensus_alignment, tie_rate
from kgcheck.graphs.consensus.graph import ConsensusContext, graph
from kgcheck.graphs.registry import get_strategy
from kgcheck.graphs.strategies.dka import DKAContext, builder
from kgcheck.runs.runner import RECURSION_LIMIT
from tests.unit.test_consensus_replay import (
    MEMBERS,
    PAPER_ALIGNMENT,
    PAPER_CONS_UP,
    PAPER_TIES,
    factbench,  # noqa: F401 - fixture
    recorded_votes,
    runner,
)
from tests.unit.test_giv_replay import _f1, _run_strategy


async def test_replay_reproduces_published_factbench_f1() -> None:
    facts = load_facts("factbench")
    graph = builder.compile()
    context = DKAContext(model="replay:gemma2:9b")
    semaphore = asyncio.Semaphore(16)

    async def one(fact: Fact) -> str:
        async with semaphore:
            out = await graph.ainvoke({"fact": fact.as_input()}, context=context)
            return out["verdict"]["label"]

    labels = await asyncio.gather(*(one(f) for f in facts))
    report = classification_report([f.label for f in facts], labels)
    assert (round(report["f1_true"], 2), round(report["f1_false"], 2)) == (0.75, 0.74)
    assert report["invalid"] == 0


@pytest.mark.slow
async def test_giv_f_on_yago_with_mistral_matches_the_paper(tmp_path) -> None:
    records = await _run_strategy("giv-f", "YAGO", "replay:mistral:7b", tmp_path)
    assert _f1(records) == (0.90, 0.01)
    assert {r["method"] for r in records} == {"GIV-F"}
    assert all(r["attempts"] == 1 and r["label"] != "NA" for r in records)
    assert {r["details"]["examples"] for r in records} == {"yago.json"}


@pytest.mark.slow
async def test_giv_z_on_factbench_with_gemma_matches_the_paper() -> None:
    strategy = get_strategy("giv-z")
    graph = strategy.compile()
    context = strategy.make_context(model="replay:gemma2:9b")
    facts = load_facts("FactBench")
    semaphore = asyncio.Semaphore(16)

    async def one(fact: Fact) -> dict:
        async with semaphore:
            out = await graph.ainvoke({"fact": fact.as_input()}, context=context,
                                      config={"recursion_limit": RECURSION_LIMIT})
            return out["verdict"]

    verdicts = await asyncio.gather(*(one(f) for f in facts))
    records = [{**v, "gold": "T" if f.label else "F"} for f, v in zip(facts, verdicts, strict=True)]
    assert _f1(records) == (0.73, 0.73)
    assert {r["method"] for r in records} == {"GIV-Z"}
    assert all(r["attempts"] == 1 and r["label"] != "NA" for r in records)


async def test_recorded_votes_and_cons_up_judge_give_table_7(factbench) -> None:  # noqa: F811
    votes = {f.id: recorded_votes(f.id) for f in factbench}
    maps = [{v["model"]: v["label"] for v in votes[f.id]} for f in factbench]
    alignment = consensus_alignment(maps)
    assert round(100 * tie_rate(maps)) == PAPER_TIES
    ctx = ConsensusContext(members=MEMBERS, judge="cons-up",
                           alignment=",".join(f"{m}={alignment[m]!r}" for m in MEMBERS))
    limit = asyncio.Semaphore(8)

    async def check(fact: Any) -> dict[str, Any]:
        async with limit:
            out = await graph.ainvoke({"fact": fact.as_input(), "votes": votes[fact.id]},
                                      context=ctx)
            return out["verdict"]

    verdicts = await asyncio.gather(*(check(f) for f in factbench))
    report = classification_report([f.label for f in factbench], [v["label"] for v in verdicts])
    assert (round(report["f1_true"], 2), round(report["f1_false"], 2)) == PAPER_CONS_UP
    judged = [v for v in verdicts if v["details"]["judge_called"]]
    assert len(judged) == sum(1 for v in verdicts if v["details"]["decision"] == "tie")
    assert {v["details"]["judge"] for v in judged} == {"replay:mistral-nemo:12b"}
    assert all(v["details"]["judge_decided"] for v in judged)


@pytest.mark.slow
def test_cli_full_factbench_dka_cons_up_reproduces_the_paper(tmp_path) -> None:
    result = runner.invoke(app, [
        "run", "--dataset", "factbench", "--method", "dka", "--consensus", ",".join(MEMBERS),
        "--judge", "cons-up", "--out", str(tmp_path), "--no-progress", "--concurrency", "8"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n"] == 2800 and summary["errors"] == 0
    assert (round(summary["f1_true"], 2), round(summary["f1_false"], 2)) == PAPER_CONS_UP
    assert round(100 * summary["tie_rate"]) == PAPER_TIES
    for member, target in PAPER_ALIGNMENT.items():
        assert abs(summary["alignment"][member] - target) <= 0.003, member
    assert summary["judge_model"] == "replay:mistral-nemo:12b"
    assert summary["judge_calls"] == summary["ties"] == 444
