"""Consensus on the study's recorded answers, on slices of FactBench.

The published ties, CA_M and table 7 over all of FactBench: tests/e2e/test_paper_figures.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.datasets import load_facts
from kgcheck.data.upstream import resolve_data_dir
from kgcheck.evals.metrics import classification_report
from kgcheck.graphs.parsing import parse_verdict
from kgcheck.providers.replay import lookup

MEMBERS = ["replay:gemma2:9b", "replay:qwen2.5:7b", "replay:llama3.1:8b", "replay:mistral:7b"]
# PAPER_TARGETS.md, FactBench DKA: table 6 (ties, CA_M) and table 7 (judge on ties).
PAPER_TIES = 16
PAPER_ALIGNMENT = {"replay:gemma2:9b": 0.919, "replay:qwen2.5:7b": 0.861,
                   "replay:llama3.1:8b": 0.906, "replay:mistral:7b": 0.938}
PAPER_CONS_UP = (0.68, 0.75)
runner = CliRunner()


@pytest.fixture(scope="module")
def factbench() -> list[Any]:
    """FactBench's 2,800 facts."""
    return load_facts("factbench")


def recorded_votes(fact_id: str) -> list[dict[str, Any]]:
    """The four members' recorded DKA answers on one fact, as the graph's votes."""
    data_dir = str(resolve_data_dir(None))
    votes = []
    for index, spec in enumerate(MEMBERS):
        text = lookup(data_dir, spec.split(":", 1)[1], "FactBench", "DKA", fact_id)["text"]
        votes.append({"index": index, "model": spec, "label": parse_verdict(text), "raw": text,
                      "raws": [text], "attempts": 1, "seconds": 0.0, "tokens_in": None,
                      "tokens_out": None, "error": None, "error_type": None})
    return votes


def expected_labels(facts: list[Any], judge_model: str) -> dict[str, str]:
    """Majority per fact from the recordings, the judge's recorded answer on ties."""
    data_dir = str(resolve_data_dir(None))
    out = {}
    for fact in facts:
        labels = [v["label"] for v in recorded_votes(fact.id)]
        t, f = labels.count("T"), labels.count("F")
        if t != f:
            out[fact.id] = "T" if t > f else "F"
        else:
            raw = lookup(data_dir, judge_model, "FactBench", "DKA", fact.id)["text"]
            out[fact.id] = parse_verdict(raw)
    return out


def test_cli_cons_down_on_a_slice_resumes(factbench, tmp_path) -> None:
    args = ["run", "--dataset", "factbench", "--method", "dka", "--consensus", ",".join(MEMBERS),
            "--judge", "cons-down", "--limit", "200", "--out", str(tmp_path), "--no-progress",
            "--concurrency", "8"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "ties:" in text and "CA_M" in text and "judge replay:mistral-nemo:12b asked" in text
    summary = json.loads((tmp_path / "summary.json").read_text())
    # On the first 200 facts mistral:7b is the least aligned member.
    assert summary["judge_model"] == "replay:mistral-nemo:12b"
    assert min(summary["alignment"], key=summary["alignment"].get) == "replay:mistral:7b"
    expected = expected_labels(factbench[:200], "mistral-nemo:12b")
    records = [json.loads(line) for line in (tmp_path / "verdicts.jsonl").read_text().splitlines()]
    assert {r["fact_id"]: r["label"] for r in records} == expected
    assert summary["judge_calls"] == summary["ties"] == sum(
        1 for r in records if r["details"]["decision"] == "tie") > 0
    report = classification_report([f.label for f in factbench[:200]],
                                   [expected[f.id] for f in factbench[:200]])
    assert summary["f1_true"] == pytest.approx(report["f1_true"])

    again = runner.invoke(app, [*args, "--resume"])
    assert again.exit_code == 0, again.output
    resumed = json.loads((tmp_path / "summary.json").read_text())
    assert resumed["ran_this_time"] == 0 and resumed["votes_phase"]["ran_this_time"] == 0
    assert resumed["f1_true"] == summary["f1_true"]


def test_cli_replay_judge_without_recordings_is_one_clear_line(tmp_path) -> None:
    result = runner.invoke(app, ["run", "--dataset", "factbench", "--consensus", ",".join(MEMBERS),
                                 "--judge", "replay:gemma2:27b", "--limit", "5", "--out",
                                 str(tmp_path), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "no recorded DKA tie-breaks for FactBench" in " ".join(result.output.split())
    assert not (tmp_path / "verdicts.jsonl").exists()
