"""``kgcheck import``, ``sample`` and ``estimate`` end to end on the study's FactBench answers."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.data.datasets import load_facts
from kgcheck.data.upstream import iter_records, open_data, recorded_path
from kgcheck.evals.metrics import f1_true_false

runner = CliRunner()
# A result file as the study's code names it for a commercial model, with a timestamp.
STUDY_FILE = "FactBench_commercial_gpt-4o-mini_dka_20250612-101500.json"


def invoke(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


@pytest.fixture(scope="module")
def study_rows() -> list[dict]:
    return list(iter_records(open_data(), recorded_path("DKA", "FactBench", "gemma2:9b")))


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory, study_rows: list[dict]) -> Path:
    folder = tmp_path_factory.mktemp("imported")
    path = folder / STUDY_FILE
    path.write_text(json.dumps(study_rows), encoding="utf-8")
    code, out = invoke("import", path, "--out", folder / "run")
    assert code == 0, out
    return folder / "run"


def _gold() -> dict[str, bool]:
    return {f.id: bool(f.label) for f in load_facts("FactBench")}


def test_import_reads_a_study_file_under_any_name(imported: Path,
                                                  study_rows: list[dict]) -> None:
    info = json.loads((imported / "run.json").read_text())
    assert (info["dataset"], info["strategy"], info["method"], info["models"]) == (
        "FactBench", "import", "DKA", ["gpt-4o-mini"])
    summary = json.loads((imported / "summary.json").read_text())
    gold = _gold()
    labels = {str(r["id"]): r["response"] for r in study_rows if str(r["id"]) in gold}
    f1_t, f1_f = f1_true_false([gold[f] for f in labels], list(labels.values()))
    assert summary["n"] == len(labels) == 2800
    assert summary["f1_true"] == pytest.approx(f1_t) and summary["f1_false"] == pytest.approx(f1_f)
    code, out = invoke("report", imported, "--out", imported.parent / "report", "--no-plots")
    assert code == 0, out
    tables = json.loads((imported.parent / "report" / "tables.json").read_text())
    assert any(r.get("model") == "gpt-4o-mini" for r in tables)


def test_import_majority_vote_file_and_generic_table(tmp_path: Path,
                                                     study_rows: list[dict]) -> None:
    gold = _gold()
    rows = [r for r in study_rows if str(r["id"]) in gold][:30]
    vote = tmp_path / "FactBench_open-source_gemma2:9b_dka_majority-vote_20250101-000000.json"
    vote.write_text(json.dumps({"results": [{"id": r["id"], "majority_decision": r["response"]}
                                            for r in rows]}))
    code, out = invoke("import", vote, "--out", tmp_path / "vote")
    assert code == 0, out
    assert json.loads((tmp_path / "vote" / "run.json").read_text())["method"] == "DKA-MAJORITY"

    words = ["T", "F", "NA", "true", "false", "1", "0", "correct", "incorrect", "idk"]
    table = tmp_path / "mine.csv"
    with table.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["fact_id", "label"])
        writer.writerows([str(r["id"]), words[i % len(words)]] for i, r in enumerate(rows))
    code, out = invoke("import", table, "--out", tmp_path / "table", "--dataset", "factbench")
    assert code == 0, out
    records = [json.loads(x) for x in (tmp_path / "table" / "verdicts.jsonl").read_text()
               .splitlines()]
    assert [r["label"] for r in records[:10]] == ["T", "F", "NA", "T", "F", "T", "F", "T", "F",
                                                  "NA"]
    assert all(r["gold"] in ("T", "F") for r in records)


def test_import_bad_input_names_file_and_row(tmp_path: Path) -> None:
    table = tmp_path / "bad.csv"
    table.write_text("fact_id,label\ncorrect_award_00001,T\nnot_a_fact,F\n")
    code, out = invoke("import", table, "--out", tmp_path / "r", "--dataset", "factbench")
    assert code == 2 and "bad.csv, row 3: fact 'not_a_fact' is not among" in out
    assert "Traceback" not in out
    table.write_text("fact_id,label\ncorrect_award_00001,T\ncorrect_award_00001,F\n")
    code, out = invoke("import", table, "--out", tmp_path / "r", "--dataset", "factbench")
    assert code == 2 and "row 3: fact 'correct_award_00001' has a second verdict" in out
    table.write_text("fact_id,label\ncorrect_award_00001,maybe\n")
    code, out = invoke("import", table, "--out", tmp_path / "r", "--dataset", "factbench")
    assert code == 2 and "row 2: unknown label 'maybe'" in out
    table.write_text("fact_id,label\ncorrect_award_00001,T\n")
    code, out = invoke("import", table, "--out", tmp_path / "r")
    assert code == 2 and "names no dataset" in out


def test_estimate_with_a_gold_sample_writes_three_estimates_and_the_truth(imported: Path) -> None:
    code, out = invoke("estimate", imported, "--gold-sample", 200, "--seed", 3)
    assert code == 0, out
    report = json.loads((imported / "estimate.json").read_text())
    truth = sum(_gold().values()) / 2800
    assert report["true_accuracy"] == pytest.approx(truth)
    by_name = {e["estimator"]: e for e in report["estimates"]}
    assert list(by_name) == ["llm", "human", "ppi"]
    for item in by_name.values():
        assert {"accuracy", "ci_low", "ci_high", "n_labeled", "n_unlabeled"} <= set(item)
        assert item["ci_low"] <= item["accuracy"] <= item["ci_high"]
    assert by_name["llm"]["biased"] and by_name["llm"]["n_unlabeled"] == 2800
    assert by_name["ppi"]["n_labeled"] == 200 and by_name["ppi"]["n_unlabeled"] == 2800
    assert report["cost"]["human_labels"] == 200 and report["cost"]["labels_to_halve_ppi"] == 600
    assert report["width_curve"][-1]["n_labeled"] == 200
    assert (imported / "plots" / "estimate_intervals.png").is_file()
    assert (imported / "plots" / "estimate_width.png").is_file()
    assert "ppi" in out and "true accuracy" in out


def _fill(sample: Path, out: Path, *, idk_every: int = 0) -> int:
    gold = _gold()
    with sample.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for n, row in enumerate(rows):
        row["label"] = ("idk" if idk_every and n % idk_every == 0 else
                        ("correct" if gold[row["fact_id"]] else "incorrect"))
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def test_sample_label_estimate_by_simple_random_and_stratified_designs(imported: Path,
                                                                       tmp_path: Path) -> None:
    code, out = invoke("sample", "--run", imported, "--n", 120, "--seed", 5,
                       "--out", tmp_path / "srs.csv")
    assert code == 0, out
    with (tmp_path / "srs.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 120 and {r["label"] for r in rows} == {""}
    assert {"fact_id", "subject", "predicate", "object", "text", "label", "weight",
            "stratum"} <= set(rows[0])
    assert all(float(r["weight"]) == pytest.approx(2800 / 120, rel=1e-5) for r in rows)
    code, again = invoke("sample", "--run", imported, "--n", 120, "--seed", 5,
                         "--out", tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_text() == (tmp_path / "srs.csv").read_text()

    _fill(tmp_path / "srs.csv", tmp_path / "srs-labelled.csv", idk_every=10)
    code, out = invoke("estimate", imported, "--labels", tmp_path / "srs-labelled.csv")
    assert code == 0, out
    report = json.loads((imported / "estimate.json").read_text())
    assert report["labels"]["usable"] == 108 and report["labels"]["left_out"] == 12
    assert "12 rows without a label" in out

    code, out = invoke("sample", "--run", imported, "--n", 150, "--design", "stratified",
                       "--stratify", "predicate", "--out", tmp_path / "strat.csv")
    assert code == 0, out
    _fill(tmp_path / "strat.csv", tmp_path / "strat-labelled.csv")
    code, out = invoke("estimate", imported, "--labels", tmp_path / "strat-labelled.csv")
    assert code == 0, out
    report = json.loads((imported / "estimate.json").read_text())
    assert report["design"] == "stratified:predicate"
    assert report["estimates"][1]["details"]["strata"] >= 5


def test_estimate_reads_a_review_pages_labels(imported: Path, tmp_path: Path) -> None:
    gold = _gold()
    review = tmp_path / "labels.csv"
    with review.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["fact_id", "label", "note", "reviewer", "reviewed_at"])
        for n, fid in enumerate(list(gold)[::20]):
            label = "skip" if n % 7 == 0 else ("T" if gold[fid] else "F")
            writer.writerow([fid, label, "", "ann", "2026-01-01T10:00:00"])
    code, out = invoke("estimate", imported, "--labels", review, "--no-plots")
    assert code == 0, out
    report = json.loads((imported / "estimate.json").read_text())
    assert report["labels"]["left_out"] == 20 and report["labels"]["usable"] == 120


@pytest.mark.parametrize(("content", "message"), [
    ("fact_id,label\nnot_in_run,T\n", "labels.csv, row 2: fact 'not_in_run' is not in the run"),
    ("fact_id,label\ncorrect_award_00001,T\ncorrect_award_00001,F\n",
     "labels.csv, row 3: fact 'correct_award_00001' is labelled again (first at row 2)"),
    ("fact_id,label\ncorrect_award_00001,probably\n", "labels.csv, row 2: unknown label"),
    ("fact_id,label\ncorrect_award_00001,T\n", "1 usable labels; at least 10 are needed"),
    ("fact_id,verdict\ncorrect_award_00001,T\n", "row 2: needs fact_id and label columns"),
])
def test_estimate_bad_labels_are_one_line_errors(imported: Path, tmp_path: Path, content: str,
                                                 message: str) -> None:
    path = tmp_path / "labels.csv"
    path.write_text(content)
    code, out = invoke("estimate", imported, "--labels", path, "--no-plots")
    assert code == 2, out
    assert message in out and "Traceback" not in out


def test_estimate_refuses_a_run_without_verdicts_and_missing_labels(tmp_path: Path,
                                                                    imported: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "run.json").write_text(json.dumps({"dataset": "FactBench"}))
    code, out = invoke("estimate", tmp_path / "empty", "--gold-sample", 50)
    assert code == 2 and "the run has no verdicts" in out
    code, out = invoke("estimate", tmp_path, "--gold-sample", 50)
    assert code == 2 and "is not a kgcheck run folder" in out
    code, out = invoke("estimate", imported)
    assert code == 2 and "give either --labels FILE" in out


def test_api_samples_any_iterable_of_facts(tmp_path: Path) -> None:
    facts = load_facts("YAGO")

    def lazy() -> Iterator[kgcheck.Fact]:
        yield from facts

    drawn = kgcheck.sample(facts=lazy(), n=30, design="twcs", out=tmp_path / "s.csv", seed=2)
    assert len(drawn.draws) == 30 and drawn.population == len(facts)
    with (tmp_path / "s.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["design"] for r in rows} == {"twcs:subject"}
    by_id = {f.id: f for f in facts}
    for row in rows:
        assert row["cluster"].split("|", 1)[1] == by_id[row["fact_id"]].subject
