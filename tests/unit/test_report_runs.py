"""``kgcheck report`` on small runs of the DKA graph with replayed models."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.datasets import load_facts
from kgcheck.data.facts import Fact
from kgcheck.evals.metrics import f1_true_false, iqr_mean
from kgcheck.evals.report import ReportInputError, build_report, read_run
from kgcheck.evals.study.recorded import load_recorded
from kgcheck.graphs.registry import get_strategy
from kgcheck.runs.runner import RECURSION_LIMIT, RunInfo, check_facts

MODELS = ("gemma2:9b", "qwen2.5:7b")


def _facts() -> list[Fact]:
    facts = load_facts("FactBench")
    true = [f for f in facts if f.label][:6]
    false = [f for f in facts if f.label is False][:6]
    return true + false


async def _run(facts: list[Fact], model: str, out: Path) -> None:
    strategy = get_strategy("dka")
    ctx = strategy.make_context(model=f"replay:{model}", data_dir="")
    graph = strategy.compile()

    async def invoke(fact: Fact) -> dict[str, Any]:
        return await graph.ainvoke({"fact": fact.as_input()}, context=ctx,
                                   config={"recursion_limit": RECURSION_LIMIT})

    info = RunInfo(dataset="FactBench", strategy="dka", method="DKA", models=[f"replay:{model}"])
    await check_facts(facts, invoke, info, out, concurrency=4, show_progress=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("runs")
    facts = _facts()
    dirs = [root / model.replace(":", "-") for model in MODELS]
    for model, folder in zip(MODELS, dirs, strict=True):
        asyncio.run(_run(facts, model, folder))
    return {"dirs": dirs, "facts": facts}


def _one(records: list[dict[str, Any]], **keys: Any) -> dict[str, Any]:
    found = [r for r in records if all(r.get(k) == v for k, v in keys.items())]
    assert len(found) == 1, keys
    return found[0]


def test_report_matches_the_study_on_the_same_facts(runs: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["report", *map(str, runs["dirs"]), "--with-recorded",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = json.loads((out / "tables.json").read_text(encoding="utf-8"))
    ids = {f.id for f in runs["facts"]}
    study = {r.method: r for r in load_recorded(None, ["FactBench"], ["DKA"])}["DKA"]
    for model in MODELS:
        mine = _one(records, table="f1", model=f"replay:{model}")
        theirs = _one(records, table="f1", model=model, source="study")
        assert mine["source"] == f"{model.replace(':', '-')}"
        # Replayed answers are the study's answers, so the scores agree fact for fact.
        assert (mine["f1_true"], mine["f1_false"], mine["n"]) == \
            (theirs["f1_true"], theirs["f1_false"], theirs["n"]) == \
            (*_expected_f1(study, model, runs["facts"]), 12)
        assert mine["invalid"] == 0
        # Replay reports the recorded response time of each answer.
        member = next(m for m in study.members if m.model == model)
        expected = iqr_mean(member.seconds[f] for f in ids)
        assert _one(records, table="time", model=f"replay:{model}")["mean_seconds"] == \
            pytest.approx(expected)
    # The study's four models give alignment and judged consensus over the 12 facts.
    assert len([r for r in records if r["table"] == "alignment"]) == 4
    assert {r["judge"] for r in records if r["table"] == "consensus"} == {"cons-up", "cons-down"}

    md = (out / "tables.md").read_text(encoding="utf-8")
    assert "replay:gemma2:9b" in md and "| FactBench | DKA |" in md
    assert "over the 12 facts the runs checked" in md
    assert "## Runs" in md and "| gemma2-9b | FactBench | DKA | replay:gemma2:9b |" in md
    pngs = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert pngs == ["f1_ranked_factbench.png", "time_f1_factbench.png",
                    "upset_factbench_dka.png"]
    assert all(p.stat().st_size > 5_000 for p in (out / "plots").iterdir())


def _expected_f1(study: Any, model: str, facts: list[Fact]) -> tuple[float, float]:
    member = next(m for m in study.members if m.model == model)
    return f1_true_false([f.label for f in facts], [member.labels[f.id] for f in facts])


def test_report_without_study_rows(runs: dict[str, Any], tmp_path: Path) -> None:
    written = build_report(runs["dirs"], tmp_path, plots=False)
    tables = {r["table"] for r in written.records}
    assert tables == {"f1", "time"}  # two single-model runs: no votes, no judge
    assert {r["model"] for r in written.records} == {f"replay:{m}" for m in MODELS}
    assert not (tmp_path / "plots").exists()


def test_same_model_twice_gets_told_apart(runs: dict[str, Any], tmp_path: Path) -> None:
    copy = tmp_path / "again"
    copy.mkdir()
    for name in ("run.json", "verdicts.jsonl", "summary.json"):
        (copy / name).write_bytes((runs["dirs"][0] / name).read_bytes())
    written = build_report([runs["dirs"][0], copy], tmp_path / "out", plots=False)
    models = sorted(r["model"] for r in written.records if r["table"] == "f1")
    assert models == ["replay:gemma2:9b [again]", "replay:gemma2:9b [gemma2-9b]"]


def test_consensus_run_folder(tmp_path: Path) -> None:
    folder = tmp_path / "cons"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({
        "dataset": "Toy", "method": "DKA", "models": ["a", "b", "c"], "judge": "cons-up"}))
    votes = {"1": "TTT", "2": "TFF", "3": "TTF", "4": "FFF"}
    final = {"1": "T", "2": "F", "3": "T", "4": "F"}
    gold = {"1": "T", "2": "T", "3": "F", "4": "F"}
    lines = []
    for fid, vs in votes.items():
        lines.append(json.dumps({
            "fact_id": fid, "label": final[fid], "method": "DKA", "model": "a,b,c",
            "seconds": 1.0, "tokens_in": 5, "tokens_out": 1, "gold": gold[fid],
            "details": {"votes": [{"model": m, "label": v, "seconds": 0.5}
                                  for m, v in zip("abc", vs, strict=True)],
                        "judge": "big", "judge_called": False}}))
    (folder / "verdicts.jsonl").write_text("\n".join(lines) + "\n")
    written = build_report([folder], tmp_path / "out", plots=False)
    cons = _one(written.records, table="consensus")
    # final T F T F against gold T T F F
    assert (cons["judge"], cons["f1_true"], cons["f1_false"]) == ("cons-up", 0.5, 0.5)
    ca = {r["model"]: r["ca"] for r in written.records if r["table"] == "alignment"}
    assert ca == {"a": 0.75, "b": 1.0, "c": 0.75}
    md = (tmp_path / "out" / "tables.md").read_text(encoding="utf-8")
    assert "| cons | Toy | DKA | a, b, c | cons-up | 4 | 0 | 0 | 20 | 4 |" in md


def test_bad_run_folders_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="run folder not found"):
        read_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportInputError, match="no run.json"):
        read_run(tmp_path / "empty")
    (tmp_path / "empty" / "run.json").write_text(json.dumps({"dataset": "X"}))
    with pytest.raises(ReportInputError, match="missing method, models"):
        read_run(tmp_path / "empty")
    result = CliRunner().invoke(app, ["report", str(tmp_path / "nope"), "--out",
                                      str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "run folder not found" in result.output


def test_report_of_a_consensus_run_agrees_with_the_study(tmp_path: Path) -> None:
    from kgcheck.runs.consensus import run_consensus

    members = ["replay:gemma2:9b", "replay:llama3.1:8b", "replay:mistral:7b",
               "replay:qwen2.5:7b"]
    facts = _facts()
    folder = tmp_path / "cons4"
    info = RunInfo(dataset="FactBench", strategy="dka", method="DKA", models=members, judge="none")
    asyncio.run(run_consensus(facts, strategy=get_strategy("dka"), members=members,
                              judge="none", values={"data_dir": ""}, info=info,
                              out_dir=folder, concurrency=4, show_progress=False))
    written = build_report([folder], tmp_path / "out", with_recorded=True, plots=False)
    aligned = [r for r in written.records if r["table"] == "alignment"]
    mine = {r["model"].removeprefix("replay:"): r for r in aligned if r["source"] == "cons4"}
    study = {r["model"]: r for r in aligned if r["source"] == "study"}
    assert set(mine) == set(study) == {m.removeprefix("replay:") for m in members}
    for model, row in mine.items():
        assert row["ca"] == pytest.approx(study[model]["ca"])
        assert row["tie_rate"] == pytest.approx(study[model]["tie_rate"])
    judged = [r for r in written.records if r["table"] == "consensus"]
    assert {(r["source"], r["judge"]) for r in judged} == {
        ("cons4", "none"), ("study", "cons-up"), ("study", "cons-down")}


def test_unlabelled_run_reports_no_scores_and_draws_no_empty_plots(tmp_path: Path,
                                                                   scripted) -> None:
    kg = tmp_path / "kg.csv"
    kg.write_text("subject,predicate,object\nParis,capitalOf,France\nParis,capitalOf,Spain\n"
                  "Berlin,locatedIn,Germany\n")
    spec = scripted("unlabelled-report", ["T", "F", "T"])
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--triples", str(kg), "--model", spec, "--out",
                                 str(tmp_path / "run"), "--concurrency", "1", "--no-progress"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("│ 3 "))
    # n, then F1(T), F1(F), acc, macro-F1: no score without labels, never 0.00.
    assert [c.strip() for c in row.split("│")[1:6]] == ["3", "-", "-", "-", "-"]
    result = runner.invoke(app, ["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "rep" / "tables.md").read_text()
    assert "| kg | DKA | - / - |" in md and "0.00 / 0.00" not in md
    assert "kg DKA (run): no gold labels, so no F1 (shown as -)" in md
    # Per predicate: facts and the share judged true, no scores.
    assert "| capitalOf | 2 | 50% | 0 | 0 | - | - | - |" in md
    # The runs table: no accuracy or macro-F1 without labels; a scripted model costs 0.
    assert "| 3 | 0 | 0 | - | - | - | - | $0.0000 |" in md
    assert "| locatedIn | 1 | 100% | 0 | 0 | - | - | - |" in md
    records = json.loads((tmp_path / "rep" / "tables.json").read_text())
    f1 = [r for r in records if r["table"] == "f1"]
    assert [(r["f1_true"], r["f1_false"]) for r in f1] == [(None, None)]
    plots = {p.name for p in (tmp_path / "rep" / "plots").glob("*")} \
        if (tmp_path / "rep" / "plots").exists() else set()
    assert not any(name.startswith(("f1_ranked", "time_f1")) for name in plots)


def test_a_class_the_labels_lack_is_a_dash_not_zero(runs: dict[str, Any], tmp_path: Path) -> None:
    # Only the true facts of the runs: F1(F) has nothing to score.
    facts = [f for f in runs["facts"] if f.label]
    folder = tmp_path / "true-only"
    asyncio.run(_run(facts, MODELS[0], folder))
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["f1_false"] is None and summary["f1_true"] is not None
    written = build_report([folder], tmp_path / "rep")
    (row,) = [r for r in written.records if r["table"] == "f1"]
    assert row["f1_false"] is None
    md = written.markdown.read_text()
    assert f"{row['f1_true']:.2f} / -" in md
    ranked = [p for p in written.plots if p.name.startswith("f1_ranked")]
    assert ranked, "F1(T) still has a score to draw"
