"""A user's file named like a benchmark (``yago.csv``) is the user's KG unless told otherwise."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.data.facts import Fact
from kgcheck.graphs.prompting import prompt_values

runner = CliRunner()
SAMPLE = Path(__file__).resolve().parents[2] / "vendored" / "sample-corpus"
# YAGO fact 10019 has evidence documents in the sample corpus.
ROW = "id,subject,predicate,object,label\n10019,Jerzy_Jurandot,isMarriedTo,Stefania_Grodzieńska,1\n"


def _rag(kg: Path, out: Path, spec: str, *extra: str):
    return runner.invoke(app, ["run", "--triples", str(kg), "--method", "rag", "--model", spec,
                               "--set", f"corpus={SAMPLE}", "--set", "index=memory",
                               "--out", str(out), "--no-progress", "--concurrency", "1", *extra])


def test_a_file_named_like_a_benchmark_gets_none_of_its_evidence(tmp_path, scripted) -> None:
    kg = tmp_path / "yago.csv"
    kg.write_text(ROW)
    answers = ["Jerzy Jurandot was married to Stefania Grodzieńska.", "", '{"output": "yes"}']
    result = _rag(kg, tmp_path / "mine", scripted("own", answers))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "is read as your own KG 'yago.csv', not the yago benchmark" in text
    assert "--as-dataset yago" in text
    (record,) = [json.loads(x) for x in (tmp_path / "mine" / "verdicts.jsonl").open()]
    assert record["dataset"] == "yago.csv"
    assert record["label"] == "NA" and "no evidence" in json.dumps(record["details"]).lower()
    assert json.loads((tmp_path / "mine" / "run.json").read_text())["dataset"] == "yago.csv"


def test_as_dataset_checks_the_file_as_that_benchmark(tmp_path, scripted) -> None:
    kg = tmp_path / "facts.csv"
    kg.write_text(ROW)
    answers = ["Jerzy Jurandot was married to Stefania Grodzieńska."] * 2 + ['{"output": "yes"}']
    result = _rag(kg, tmp_path / "as-yago", scripted("yago", answers), "--as-dataset", "yago")
    assert result.exit_code == 0, result.output
    (record,) = [json.loads(x) for x in (tmp_path / "as-yago" / "verdicts.jsonl").open()]
    assert record["dataset"] == "YAGO"
    assert record["details"].get("documents"), record["details"]
    # Replay serves the study's recorded answers once the file is said to be YAGO.
    done = runner.invoke(app, ["run", "--triples", str(kg), "--as-dataset", "yago", "--out",
                               str(tmp_path / "replay"), "--no-progress"])
    assert done.exit_code == 0, done.output
    (replayed,) = [json.loads(x) for x in (tmp_path / "replay" / "verdicts.jsonl").open()]
    assert replayed["label"] == "T" and replayed["dataset"] == "YAGO"


def test_as_dataset_needs_a_triples_file_and_a_known_dataset(tmp_path) -> None:
    kg = tmp_path / "facts.csv"
    kg.write_text(ROW)
    bad = runner.invoke(app, ["run", "--triples", str(kg), "--as-dataset", "wikidata",
                              "--out", str(tmp_path / "o"), "--no-progress"])
    assert bad.exit_code == 2 and "unknown dataset 'wikidata'" in bad.output
    both = runner.invoke(app, ["run", "--dataset", "yago", "--as-dataset", "yago",
                               "--out", str(tmp_path / "o"), "--no-progress"])
    assert both.exit_code == 2 and "--as-dataset applies to a --triples file" in both.output


def test_read_triples_never_names_a_benchmark_by_itself(tmp_path) -> None:
    kg = tmp_path / "DBpedia.csv"
    kg.write_text(ROW)
    (fact,) = kgcheck.read_triples(kg)
    assert fact.dataset == "DBpedia.csv"
    assert prompt_values(fact)["kg_note"] == ""  # no DBpedia 2015 cut-off note
    assert prompt_values(Fact(**{**fact.model_dump(exclude={"readable"}),
                                 "dataset": "DBpedia"}))["kg_note"]
    mine = tmp_path / "my_kg.csv"
    mine.write_text(ROW)
    assert kgcheck.read_triples(mine)[0].dataset == "my_kg"
    assert kgcheck.read_triples(kg, "DBpedia")[0].dataset == "DBpedia"
