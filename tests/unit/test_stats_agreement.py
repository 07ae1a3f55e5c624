"""Agreement between annotators: kappas and alpha against sklearn, statsmodels, krippendorff."""

from __future__ import annotations

import json
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.runfolder import labels_file_name, read_verdicts, write_labels
from kgcheck.evals.stats.agreement import agreement
from tests.support.stats_runs import make_replay_run

runner = CliRunner()
PEOPLE = ("alice", "bob", "carol")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_replay_run(tmp_path_factory.mktemp("agree") / "run", "gemma2:9b", limit=60)


def _label_people(run_dir: Path, seed: int, missing: float = 0.2) -> dict[str, dict[str, str]]:
    """Write each person's labels file: mostly the gold label, some flipped, some missing."""
    rng = np.random.default_rng(seed)
    records = read_verdicts(run_dir / "verdicts.jsonl")
    given: dict[str, dict[str, str]] = {}
    for person, care in zip(PEOPLE, (0.9, 0.8, 0.7), strict=True):
        rows, mine = [], {}
        for fid, record in records.items():
            if rng.random() < missing:
                continue
            label = record["gold"] if rng.random() < care else {"T": "F", "F": "T"}[
                record["gold"]]
            if rng.random() < 0.05:
                label = "skip"
            rows.append({"fact_id": fid, "label": label, "note": "", "reviewer": person,
                         "reviewed_at": "2026-12-02T10:00:00Z", "annotator": person})
            if label != "skip":
                mine[fid] = label
        write_labels(run_dir / labels_file_name(person), rows)
        given[person] = mine
    return given


def test_two_files_cohen_kappa_equals_sklearn(run_dir: Path) -> None:
    given = _label_people(run_dir, 1)
    files = [run_dir / labels_file_name(p) for p in PEOPLE[:2]]
    result = agreement(files)
    common = [f for f in given["alice"] if f in given["bob"]]
    expected = cohen_kappa_score([given["alice"][f] for f in common],
                                 [given["bob"][f] for f in common])
    assert result["cohen_kappa"] == pytest.approx(expected, rel=1e-12)
    assert result["cohen_facts"] == len(common) and result["fleiss_kappa"] is None
    verdicts = {f: r["label"] for f, r in read_verdicts(run_dir / "verdicts.jsonl").items()}
    for person in PEOPLE[:2]:
        mine = [f for f in given[person] if verdicts[f] in ("T", "F")]
        model = result["model"][person]
        assert model["cohen_kappa"] == pytest.approx(cohen_kappa_score(
            [verdicts[f] for f in mine], [given[person][f] for f in mine]), rel=1e-12)
        assert model["agreement"] == pytest.approx(
            np.mean([verdicts[f] == given[person][f] for f in mine]))
    assert {d["fact_id"] for d in result["disagreements"]} == {
        f for f in common if given["alice"][f] != given["bob"][f]}


def test_three_files_fleiss_kappa_and_alpha_equal_the_libraries(run_dir: Path) -> None:
    given = _label_people(run_dir, 2)
    result = agreement([run_dir / labels_file_name(p) for p in PEOPLE])
    everyone = [f for f in given["alice"] if all(f in given[p] for p in PEOPLE)]
    data = np.array([[("T", "F").index(given[p][f]) for p in PEOPLE] for f in everyone])
    assert result["fleiss_kappa"] == pytest.approx(
        fleiss_kappa(aggregate_raters(data)[0], method="fleiss"), rel=1e-12)
    assert result["fleiss_facts"] == len(everyone)
    facts = sorted({f for p in PEOPLE for f in given[p]})
    matrix = [[{"T": 1.0, "F": 0.0}[given[p][f]] if f in given[p] else np.nan for f in facts]
              for p in PEOPLE]
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert result["krippendorff_alpha"] == pytest.approx(expected, rel=1e-12)
    assert result["cohen_kappa"] is None and len(result["pairs"]) == 3


def test_cli_agreement_writes_the_json_keys(run_dir: Path, tmp_path: Path) -> None:
    _label_people(run_dir, 3)
    out = tmp_path / "agree.json"
    files = [str(run_dir / labels_file_name(p)) for p in PEOPLE]
    result = runner.invoke(app, ["agreement", *files, "--json", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert {"cohen_kappa", "fleiss_kappa", "krippendorff_alpha", "model",
            "disagreements"} <= set(data)
    assert set(data["model"]) == set(PEOPLE)
    assert "Fleiss' kappa" in result.output and "Krippendorff's alpha" in result.output


def _one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, ["agreement", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_bad_input_gets_one_clear_line_each(run_dir: Path, tmp_path: Path) -> None:
    _label_people(run_dir, 4)
    alice = str(run_dir / labels_file_name("alice"))
    assert "two or more annotators" in _one_line_error([alice])
    empty = run_dir / labels_file_name("nobody")
    write_labels(empty, [])
    assert "no T or F labels" in _one_line_error([alice, str(empty)])
    empty.unlink()
    other = make_replay_run(tmp_path / "other", "gemma2:9b", limit=60)
    rows = [{"fact_id": f, "label": "T", "annotator": "dave"}
            for f in read_verdicts(other / "verdicts.jsonl")]
    write_labels(other / labels_file_name("dave"), rows)
    assert "different runs" in _one_line_error([alice, str(other / labels_file_name("dave"))])
    foreign = run_dir / labels_file_name("eve")
    write_labels(foreign, [{"fact_id": "no-such-fact", "label": "T", "annotator": "eve"}])
    assert "belongs to another run" in _one_line_error([alice, str(foreign)])
    foreign.unlink()
    assert "all alice's labels" in _one_line_error([alice, alice])
