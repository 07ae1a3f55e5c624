"""GIV through the graph with the study's recorded answers, the batch runner and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.data.datasets import load_facts
from kgcheck.data.facts import Fact
from kgcheck.evals.metrics import classification_report
from kgcheck.graphs.registry import get_strategy
from kgcheck.runs.runner import RECURSION_LIMIT, RunInfo, check_facts


async def _run_strategy(name: str, dataset: str, model: str, out_dir: Path,
                        facts: list[Fact] | None = None) -> list[dict]:
    strategy = get_strategy(name)
    facts = facts if facts is not None else load_facts(dataset)
    context = strategy.make_context(model=model)
    graph = strategy.compile()

    async def invoke(fact: Fact) -> dict:
        return await graph.ainvoke({"fact": fact.as_input()}, context=context,
                                   config={"recursion_limit": RECURSION_LIMIT})

    info = RunInfo(dataset=dataset, strategy=strategy.name, method=strategy.label, models=[model])
    result = await check_facts(facts, invoke, info, out_dir, concurrency=16, show_progress=False)
    assert result.aborted is None
    assert len(result.records) == len(facts)
    return result.records


def _f1(records: list[dict]) -> tuple[float, float]:
    report = classification_report([r["gold"] == "T" for r in records],
                                   [r["label"] for r in records])
    return round(report["f1_true"], 2), round(report["f1_false"], 2)


async def test_replayed_judge_that_never_complies_ends_na_after_three_calls(tmp_path) -> None:
    # qwen2.5:14b answered "NA" as the GIV-F tie-break judge of YAGO fact 10185; replay
    # answers every re-prompt the same way, so the loop runs out of attempts.
    fact = next(f for f in load_facts("YAGO") if f.id == "10185")
    records = await _run_strategy("giv-f", "YAGO", "replay:qwen2.5:14b", tmp_path, [fact])
    (verdict,) = records
    assert verdict["label"] == "NA" and verdict["error"] is None
    assert verdict["attempts"] == 3 and verdict["raws"] == ["NA"] * 3
    assert verdict["details"]["compliant"] is False


async def test_replayed_judge_with_a_labelled_answer_complies_at_once(tmp_path) -> None:
    # gemma2:27b answered "Judgment: T \n" for this FactBench fact as a GIV-F judge.
    fact = next(f for f in load_facts("FactBench") if f.id == "correct_award_00086")
    records = await _run_strategy("giv-f", "FactBench", "replay:gemma2:27b", tmp_path, [fact])
    (verdict,) = records
    assert (verdict["label"], verdict["attempts"], verdict["raw"]) == ("T", 1, "Judgment: T \n")


@pytest.mark.parametrize(("method", "recorded"), [("giv-z", "GIV-Z"), ("giv-f", "GIV-F")])
def test_cli_runs_giv(tmp_path, method: str, recorded: str) -> None:
    from kgcheck.cli import app

    out = tmp_path / method
    result = CliRunner().invoke(app, ["run", "--method", method, "--dataset", "yago",
                                      "--limit", "20", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    lines = (out / "verdicts.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 20
    assert {r["method"] for r in records} == {recorded}
    assert all(r["label"] in ("T", "F") for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 20 and summary["method"] == recorded


def test_cli_passes_the_attempts_cap(tmp_path) -> None:
    from kgcheck.cli import app

    out = tmp_path / "cap"
    result = CliRunner().invoke(app, ["run", "--method", "giv-z", "--dataset", "yago",
                                      "--limit", "2", "--out", str(out), "--no-progress",
                                      "--set", "max_attempts=5"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert {r["details"]["max_attempts"] for r in records} == {5}
    bad = CliRunner().invoke(app, ["run", "--method", "giv-z", "--dataset", "yago", "--limit",
                                   "2", "--out", str(tmp_path / "bad"), "--no-progress",
                                   "--set", "max_attempts=0"])
    assert bad.exit_code == 2
    assert "max_attempts 0" in bad.output
