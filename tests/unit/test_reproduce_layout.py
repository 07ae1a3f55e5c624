"""``kgcheck reproduce`` on a small made-up dataset in the upstream folder layout.

Shows the code needs no dataset-specific paths: a dataset called Toy, four models with
made-up names, a judges' file and a token file, every figure computed by hand below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.evals.study.recorded import load_recorded, token_usage

GOLD = {"1": 1, "2": 1, "3": 1, "4": 0, "5": 0, "6": 1}
DKA_VOTES = {  # fact -> (m1, m2, m3, m4)
    "1": "TTTF",  # T
    "2": "TTFF",  # tie
    "3": "FFFT",  # F
    "4": "FFTF",  # F
    "5": "TFTF",  # tie
    "6": "TTTT",  # T
}
M1_TIMES = [0.1, 0.2, 0.3, 0.4, 0.5, 9.0]  # 9.0 lies above Q3 + 1.5 IQR
RAG = {"m1:1b": "TTTTTT", "m2:2b": "TTTTTT", "m3:3b": "TTTFF"}  # m3 has no answer for fact 6


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    root = tmp_path / "upstream"
    _write(root / "dataset/Toy/data/kg.json",
           {fid: [f"s{fid}", "p", f"o{fid}"] for fid in GOLD})
    _write(root / "dataset/Toy/data/gt.json", GOLD)
    results = root / "results/paper_results"
    for i, model in enumerate(("m1:1b", "m2:2b", "m3:3b", "m4:4b")):
        rows = [{"id": fid, "method": "DKA", "response": votes[i],
                 "response_time": M1_TIMES[n] if i == 0 else 0.5, "success": True}
                for n, (fid, votes) in enumerate(DKA_VOTES.items())]
        rows.append({"id": "99", "response": "T", "response_time": 1.0})  # not in the KG
        _write(results / f"DKA/Toy_open-source_{model}_dka.json", rows)
    for model, labels in RAG.items():
        # zip stops at m3's five labels: fact 6 has no record.
        rows = [{"id": fid, "method": "DKA", "full_answer": "{'output': 'yes'}",
                 "response": label, "success": True}
                for fid, label in zip(GOLD, labels, strict=False)]
        _write(results / f"RAG/Toy_open-source_{model}_rag.json", rows)
    _write(results / "consensus/full_higher_parameter_df_results.json", [
        {"Custom_id": "toy_2", "Answer": "Judgment: T", "Model": "big1", "consistency": "high",
         "Mode": "baseline", "Dataset": "Toy"},
        {"Custom_id": "toy_5", "Answer": "F \n", "Model": "big1", "consistency": "high",
         "Mode": "baseline", "Dataset": "Toy"},
        {"Custom_id": "toy_2", "Answer": "NA", "Model": "big2", "consistency": "low",
         "Mode": "baseline", "Dataset": "Toy"},
        {"Custom_id": "toy_5", "Answer": "T", "Model": "big2", "consistency": "low",
         "Mode": "baseline", "Dataset": "Toy"},
        {"Custom_id": "other_5", "Answer": "T", "Model": "big2", "consistency": "low",
         "Mode": "baseline", "Dataset": "Other"},
    ])
    _write(results / "RAG/tokens-time.json", {"Toy": {"m1": {
        "input_tokens": [10, 20], "output_tokens": [1, 2], "duration": [1.0, 2.0]}}})
    return root


def _one(records: list[dict[str, Any]], **keys: Any) -> dict[str, Any]:
    found = [r for r in records if all(r.get(k) == v for k, v in keys.items())]
    assert len(found) == 1, keys
    return found[0]


def test_every_table_by_hand(toy: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["reproduce", "--data", str(toy), "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = json.loads((out / "tables.json").read_text(encoding="utf-8"))

    m1 = _one(records, table="f1", method="DKA", model="m1:1b")
    # m1: T T F F T T against T T T F F T
    assert m1 == {"table": "f1", "dataset": "Toy", "method": "DKA", "model": "m1:1b",
                  "f1_true": 0.75, "f1_false": 0.5, "n": 6, "invalid": 0}

    ca = {r["model"]: r["ca"] for r in records if r["table"] == "alignment"
          and r["method"] == "DKA"}
    assert ca == {"m1:1b": 1.0, "m2:2b": 1.0, "m3:3b": 0.75, "m4:4b": 0.5}
    assert [r["tie_rate"] for r in records if r["table"] == "alignment"
            and r["method"] == "DKA"] == [pytest.approx(2 / 6)] * 4

    up = _one(records, table="consensus", judge="cons-up")
    assert (up["f1_true"], up["f1_false"]) == (pytest.approx(6 / 7), pytest.approx(0.8))
    down = _one(records, table="consensus", judge="cons-down")  # its NA is a miss
    assert (down["f1_true"], down["f1_false"]) == (pytest.approx(4 / 7), 0.5)

    assert _one(records, table="time", model="m1:1b")["mean_seconds"] == pytest.approx(0.3)
    assert not [r for r in records if r["table"] == "time" and r["method"] == "RAG"]

    m3 = _one(records, table="f1", method="RAG", model="m3:3b")
    assert (m3["f1_true"], m3["f1_false"], m3["n"]) == (1.0, 1.0, 5)
    rag_ca = {r["model"]: r["ca"] for r in records if r["table"] == "alignment"
              and r["method"] == "RAG"}
    assert rag_ca == {"m1:1b": 1.0, "m2:2b": 1.0, "m3:3b": pytest.approx(0.6)}

    md = (out / "tables.md").read_text(encoding="utf-8")
    assert "| Toy | DKA | 33% | 1.000 | 1.000 | 0.750 | 0.500 |" in md
    assert "0.86 / 0.80 (big1)" in md
    assert "Toy RAG m3:3b: answered 5 of 6 facts" in md
    assert "| Toy | m1 | 2 | 30 | 3 | 1.50 |" in md

    plots = sorted(p.name for p in (out / "plots").iterdir())
    assert plots == sorted(f"{stem}.{ext}" for ext in ("png", "svg") for stem in (
        "f1_ranked_toy", "time_f1_toy", "upset_toy_dka", "upset_toy_rag"))
    for path in (out / "plots").iterdir():
        data = path.read_bytes()
        assert len(data) > 5_000
        if path.suffix == ".png":
            assert data[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            assert b"<svg" in data[:2_000]


def test_library_calls_filter_datasets_and_methods(toy: Path) -> None:
    results = load_recorded(toy, ["toy"], ["rag"])
    assert [(r.dataset, r.method) for r in results] == [("Toy", "RAG")]
    assert [m.model for m in results[0].members] == ["m1:1b", "m2:2b", "m3:3b"]
    assert results[0].consensus == []
    assert token_usage(toy) == [{"dataset": "Toy", "model": "m1", "calls": 2, "tokens_in": 30,
                                 "tokens_out": 3, "mean_seconds": 1.5}]


def test_folder_without_answers_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    _write(root / "dataset/Toy/data/kg.json", {"1": ["a", "p", "b"]})
    result = CliRunner().invoke(app, ["reproduce", "--data", str(root), "--out",
                                      str(tmp_path / "out"), "--no-plots"])
    assert result.exit_code == 2
    assert "no recorded answers" in result.output


def test_pareto_front_and_intersections() -> None:
    import pandas as pd

    from kgcheck.evals.study.plots import intersections, pareto_front

    points = [(0.2, 0.7), (0.1, 0.5), (0.3, 0.6), (0.4, 0.9), (0.4, 0.8), (0.1, 0.4)]
    assert pareto_front(points) == [(0.1, 0.5), (0.2, 0.7), (0.4, 0.9)]
    assert pareto_front([]) == []
    matrix = pd.DataFrame({"a": [True, True, False, False], "b": [True, False, False, True]})
    assert intersections(matrix) == [((True, True), 1), ((False, True), 1), ((True, False), 1),
                                     ((False, False), 1)]
