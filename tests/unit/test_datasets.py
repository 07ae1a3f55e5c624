"""Datasets load from the vendored copy (and from the upstream layout when it is beside us)."""

from __future__ import annotations

import json

import pytest

from kgcheck.data.datasets import describe_datasets, in_benchmark, load_facts
from kgcheck.data.facts import Fact, readable_term
from kgcheck.data.upstream import DataError, open_data
from tests.conftest import SHARED_DATA

EXPECTED = {"FactBench": (2800, 0.536), "YAGO": (1386, 0.992), "DBpedia": (9344, 0.851)}


def test_vendored_counts_and_true_share() -> None:
    infos = {i.name: i for i in describe_datasets()}
    assert set(infos) == set(EXPECTED)
    for name, (count, share) in EXPECTED.items():
        assert infos[name].facts == count
        assert infos[name].labelled == count
        assert infos[name].true_share == pytest.approx(share, abs=0.001)


def test_factbench_subset_rule() -> None:
    facts = load_facts("factbench")
    correct = [f for f in facts if f.id.startswith("correct_")]
    assert len(correct) == 1500
    assert len(facts) - len(correct) == 1300
    assert all(f.label is True for f in correct)
    assert in_benchmark("FactBench", "wrong_mix_range_author_00001")
    assert not in_benchmark("FactBench", "wrong_range_author_00001")
    assert in_benchmark("YAGO", "anything")


def test_dataset_names_are_case_insensitive_and_unknown_lists_known() -> None:
    assert load_facts("yago")[0].dataset == "YAGO"
    with pytest.raises(DataError, match="unknown dataset 'wikidata'.*DBpedia, FactBench, YAGO"):
        load_facts("wikidata")


def test_dirty_dbpedia_rows_load_flagged() -> None:
    facts = {f.id: f for f in load_facts("dbpedia")}
    huge, nan = facts["100"], facts["5929"]
    assert huge.defect and "subject is 1,484,534 characters long" in huge.defect
    assert len(huge.subject) <= 20_000
    assert nan.defect == "object is missing"
    assert sum(1 for f in facts.values() if f.defect) == 2
    # The flag travels with the graph input, so graphs never send the row to a model.
    assert huge.as_input()["defect"] == huge.defect


@pytest.mark.parametrize(
    ("raw", "readable"),
    [
        ("http://dbpedia.org/ontology/birthPlace", "birth place"),
        ("http://dbpedia.org/resource/Paora_Winitana__1", "Paora Winitana"),
        ("Maria_Feodorovna__Dagmar_of_Denmark_", "Maria Feodorovna (Dagmar of Denmark)"),
        ("isMarriedTo", "is married to"),
        ("Beverly Hills, California", "Beverly Hills, California"),
        ("221.0", "221.0"),
    ],
)
def test_readable_terms(raw: str, readable: str) -> None:
    assert readable_term(raw) == readable


def test_fact_keeps_raw_triple_next_to_readable_text() -> None:
    fact = Fact.from_triple("5", "YAGO", ["Alexander_III_of_Russia", "isMarriedTo", "Maria_Feodorovna__Dagmar_of_Denmark_"])
    assert fact.subject == "Alexander_III_of_Russia"
    assert fact.readable == "Alexander III of Russia is married to Maria Feodorovna (Dagmar of Denmark)"


def test_upstream_layout_matches_vendored_copy() -> None:
    if not SHARED_DATA.is_dir():
        pytest.skip("upstream data not beside the project")
    for name in EXPECTED:
        upstream = load_facts(name, SHARED_DATA)
        vendored = load_facts(name)
        assert {f.id: (f.subject, f.object, f.label) for f in upstream} == {
            f.id: (f.subject, f.object, f.label) for f in vendored
        }


def test_malformed_inputs_name_the_file(tmp_path) -> None:
    assert not (tmp_path / "missing").exists()
    with pytest.raises(DataError, match="data folder not found"):
        open_data(tmp_path / "missing")
    root = tmp_path / "up"
    (root / "dataset" / "Toy" / "data").mkdir(parents=True)
    (root / "dataset" / "Toy" / "data" / "kg.json").write_text('{"1": ["a", "b"')
    with pytest.raises(DataError, match=r"kg.json: malformed JSON"):
        load_facts("toy", root)
    (root / "dataset" / "Toy" / "data" / "kg.json").write_text(json.dumps({"1": "not a triple"}))
    with pytest.raises(DataError, match="row '1' is not a"):
        load_facts("toy", root)
    (root / "dataset" / "Toy" / "data" / "kg.json").write_text(json.dumps({"1": ["a", "b", "c"]}))
    (root / "dataset" / "Toy" / "data" / "gt.json").write_text(json.dumps({"1": "yes"}))
    with pytest.raises(DataError, match="label of '1' is 'yes'"):
        load_facts("toy", root)


def test_any_dataset_in_the_upstream_layout(tmp_path) -> None:
    root = tmp_path / "up"
    (root / "dataset" / "Wikidata" / "data").mkdir(parents=True)
    (root / "dataset" / "Wikidata" / "data" / "kg.json").write_text(
        json.dumps({"q1": ["Q42", "P69", "Q691283"], "q2": ["Q1", "P2", "Q3"]}))
    (root / "dataset" / "Wikidata" / "data" / "gt.json").write_text(json.dumps({"q1": 1, "q2": 0}))
    facts = load_facts("wikidata", root)
    assert [(f.id, f.label) for f in facts] == [("q1", True), ("q2", False)]
