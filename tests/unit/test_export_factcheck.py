"""FactCheck's result files out and back in: ``export --format factcheck`` then ``import``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.evals.export import upstream_model

runner = CliRunner()
SCORES = ("n", "accuracy", "f1_true", "f1_false", "macro_f1", "confusion")
CORPUS = Path(__file__).resolve().parents[2] / "vendored" / "sample-corpus"
# Facts the vendored sample corpus holds evidence for (RAG answers are recorded for them).
IDS = "10019,10053,10143,10185"
MEMBERS = "replay:gemma2:9b,replay:qwen2.5:7b,replay:llama3.1:8b,replay:mistral:7b"


def _run(tmp_path: Path, name: str, *args: str) -> Path:
    out = tmp_path / name
    result = runner.invoke(app, ["run", "--dataset", "yago", "--ids", IDS, *args,
                                 "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    return out


def _export(run_dir: Path, folder: Path) -> Path:
    folder.mkdir()
    result = runner.invoke(app, ["export", str(run_dir), "--format", "factcheck", "--out",
                                 str(folder)])
    assert result.exit_code == 0, result.output
    (written,) = folder.iterdir()
    return written


def _reimport(file: Path, out: Path) -> dict:
    result = runner.invoke(app, ["import", str(file), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads((out / "summary.json").read_text())


def _scores(summary: dict) -> dict:
    return {key: summary.get(key) for key in SCORES}


@pytest.mark.parametrize(("method", "name", "keys"), [
    ("dka", "YAGO_open-source_gemma2:9b_dka.json",
     {"id", "method", "response", "response_time", "success", "timestamp"}),
    ("rag", "YAGO_open-source_gemma2:9b_rag.json",
     {"id", "method", "full_answer", "response", "response_time", "success", "timestamp"}),
])
def test_a_replayed_run_round_trips_with_the_same_scores(tmp_path: Path, method: str,
                                                        name: str, keys: set[str]) -> None:
    evidence = (["--set", f"corpus={CORPUS}", "--set", f"chroma_path={tmp_path / 'chroma'}"]
                if method == "rag" else [])
    run_dir = _run(tmp_path, "run", "--method", method, *evidence)
    file = _export(run_dir, tmp_path / "results")
    assert file.name == name
    records = json.loads(file.read_text())
    verdicts = [json.loads(line) for line in (run_dir / "verdicts.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [v["fact_id"] for v in verdicts]
    for record, verdict in zip(records, verdicts, strict=True):
        assert set(record) == keys
        assert record["response"] == verdict["label"] if verdict["label"] != "NA" else "NA"
        assert record["method"] == method.upper()
        # FactCheck's timestamp: "2025-05-27 10:37:10".
        assert len(record["timestamp"]) == 19 and record["timestamp"][10] == " "
        if method == "rag":
            assert record["full_answer"] == verdict["raw"] and "output" in verdict["raw"]
    back = _reimport(file, tmp_path / "back")
    assert back["n"] == 4
    assert _scores(back) == _scores(json.loads((run_dir / "summary.json").read_text()))


def test_a_consensus_run_exports_as_the_majority_vote_file(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "cons", "--consensus", MEMBERS)
    file = _export(run_dir, tmp_path / "results")
    assert file.name.startswith("YAGO_majority-vote_") and file.suffix == ".json"
    document = json.loads(file.read_text())
    assert {"metadata", "statistics", "results"} <= set(document)
    verdicts = {json.loads(line)["fact_id"]: json.loads(line)
                for line in (run_dir / "verdicts.jsonl").read_text().splitlines()}
    for row in document["results"]:
        label = verdicts[row["id"]]["label"]
        assert row["majority_decision"] == (label if label in ("T", "F") else "UNKNOWN")
        assert [v["model_name"] for v in row["individual_votes"]] == \
            [upstream_model(m) for m in MEMBERS.split(",")]
    back = _reimport(file, tmp_path / "back")
    assert _scores(back) == _scores(json.loads((run_dir / "summary.json").read_text()))
    info = json.loads((tmp_path / "back" / "run.json").read_text())
    assert info["method"] == "DKA-MAJORITY"
    assert info["models"] == ["gemma2:9b,qwen2.5:7b,llama3.1:8b,mistral:7b"]


def test_factcheck_export_to_standard_output_and_model_names(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "run")
    result = runner.invoke(app, ["export", str(run_dir), "--format", "factcheck", "--out", "-"])
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in json.loads(result.stdout)]
    missing = runner.invoke(app, ["export", str(run_dir), "--format", "factcheck", "--out",
                                  f"{tmp_path / 'missing'}/"])
    assert missing.exit_code != 0 and "does not exist" in missing.output
    assert not (tmp_path / "missing").exists()
    assert upstream_model("ollama:gemma2:9b") == "gemma2:9b"
    assert upstream_model("gemma2:9b") == "gemma2:9b"  # no provider: as it is
