"""Verdicts a curator can act on: records with their triple and time, and ``kgcheck export``."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.data.facts import Fact
from kgcheck.evals.export import KGC, TERM, ExportError, export_run
from kgcheck.graphs.registry import get_strategy
from kgcheck.runs.runner import RunInfo, check_facts

runner = CliRunner()
KG = ("subject,predicate,object,label\n"
      "Paris,capitalOf,France,1\n"
      "Paris,capitalOf,Spain,0\n"
      "Berlin,locatedIn,Germany,1\n"
      "Rome,capitalOf,Italy,1\n")
# Scripted answers, in fact order (concurrency 1).
ANSWERS = ["T", "T", "F", "T"]


@pytest.fixture
def run_dir(tmp_path: Path, scripted) -> Path:
    kg = tmp_path / "kg.csv"
    kg.write_text(KG)
    spec = scripted("export", ANSWERS)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--triples", str(kg), "--model", spec, "--concurrency",
                                 "1", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_records_carry_the_triple_and_a_timestamp(run_dir: Path) -> None:
    records = {r["fact_id"]: r for r in _lines(run_dir / "verdicts.jsonl")}
    assert len(records) == 4
    second = records["2"]
    assert (second["subject"], second["predicate"], second["object"]) == \
        ("Paris", "capitalOf", "Spain")
    assert (second["label"], second["gold"]) == ("T", "F")
    for record in records.values():
        assert record["checked_at"].endswith("Z") and record["checked_at"][:4].isdigit()
        assert "rdf" not in record  # not read from RDF


def test_summary_has_accuracy_macro_f1_confusion_and_predicates(run_dir: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    # Gold T T(F) T T; answers T T F T: one false positive, one false negative.
    assert summary["confusion"] == {"T": {"T": 2, "F": 1, "NA": 0},
                                    "F": {"T": 1, "F": 0, "NA": 0}}
    assert summary["accuracy"] == pytest.approx(0.5)
    assert summary["f1_true"] == pytest.approx(2 / 3) and summary["f1_false"] == 0.0
    assert summary["macro_f1"] == pytest.approx(1 / 3)
    by_predicate = {r["predicate"]: r for r in summary["by_predicate"]}
    assert by_predicate["capitalOf"]["n"] == 3
    assert by_predicate["capitalOf"]["judged_true"] == pytest.approx(1.0)
    # locatedIn: one true fact judged false; no false facts, so no F1(F).
    located = by_predicate["locatedIn"]
    assert (located["n"], located["judged_true"], located["accuracy"]) == (1, 0.0, 0.0)
    assert (located["f1_true"], located["f1_false"]) == (0.0, None)


def test_csv_and_jsonl_export_with_only(run_dir: Path) -> None:
    result = runner.invoke(app, ["export", str(run_dir), "--format", "csv", "--only", "F",
                                 "--out", "-"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["subject"], r["predicate"], r["object"], r["verdict"]) for r in rows] == \
        [("Berlin", "locatedIn", "Germany", "F")]
    assert rows[0]["reason"] == "F" and rows[0]["gold"] == "T" and rows[0]["checked_at"]
    written = kgcheck.export(run_dir, "jsonl", run_dir / "all.jsonl", only="T,NA")
    assert (written.count, written.path) == (3, run_dir / "all.jsonl")
    lines = _lines(run_dir / "all.jsonl")
    assert {r["verdict"] for r in lines} == {"T"} and len(lines) == 3
    assert {"fact_id", "subject", "object", "model", "method", "checked_at"} <= set(lines[0])


def test_rdf_exports_parse_back(run_dir: Path) -> None:
    for fmt, rdf_format in (("nt", ox.RdfFormat.N_TRIPLES), ("ttl", ox.RdfFormat.TURTLE)):
        out = run_dir / f"export.{fmt}"
        result = runner.invoke(app, ["export", str(run_dir), "-f", fmt])
        assert result.exit_code == 0, result.output
        assert "4 verdicts written" in result.output
        store = ox.Store()
        store.load(path=str(out), format=rdf_format)
        verdicts = list(store.query(
            "PREFIX kgc: <urn:kgcheck:vocab:> PREFIX prov: <http://www.w3.org/ns/prov#> "
            "PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> "
            "SELECT ?id ?v ?s ?o ?t ?m WHERE { ?x a kgc:Verdict ; kgc:factId ?id ; "
            "kgc:verdict ?v ; rdf:subject ?s ; rdf:object ?o ; prov:generatedAtTime ?t ; "
            "prov:wasAttributedTo ?agent ; kgc:method ?m } ORDER BY ?id"))
        assert [(row["id"].value, row["v"].value) for row in verdicts] == [
            ("1", KGC + "True"), ("2", KGC + "True"), ("3", KGC + "False"), ("4", KGC + "True")]
        assert verdicts[1]["o"] == ox.NamedNode(TERM + "kg:Spain")
        assert verdicts[0]["t"].datatype == ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
        assert verdicts[0]["m"].value == "DKA"


def test_plain_rdf_of_the_false_triples_for_a_deletion_review(run_dir: Path) -> None:
    result = runner.invoke(app, ["export", str(run_dir), "-f", "nt", "--rdf", "plain",
                                 "--only", "F", "--out", "-"])
    assert result.exit_code == 0, result.output
    triples = [q.triple for q in ox.parse(result.stdout, format=ox.RdfFormat.N_TRIPLES)]
    assert triples == [ox.Triple(ox.NamedNode(TERM + "kg:Berlin"),
                                 ox.NamedNode(TERM + "kg:locatedIn"),
                                 ox.NamedNode(TERM + "kg:Germany"))]


def test_review_labels_are_exported(run_dir: Path) -> None:
    (run_dir / "labels.csv").write_text(
        "fact_id,label,note,reviewer,reviewed_at\n"
        "3,T,Berlin is in Germany,ana,2026-12-01T10:00:00Z\n"
        "2,skip,,ana,2026-12-01T10:01:00Z\n")
    rows = list(csv.DictReader((run_dir / kgcheck.export(run_dir, "csv", run_dir / "r.csv")
                                .path.name).open()))
    by_id = {r["fact_id"]: r for r in rows}
    assert (by_id["3"]["review_label"], by_id["3"]["review_note"]) == ("T", "Berlin is in Germany")
    assert by_id["2"]["review_label"] == "skip" and by_id["1"]["review_label"] == ""
    kgcheck.export(run_dir, "ttl", run_dir / "r.ttl")
    store = ox.Store()
    store.load(path=str(run_dir / "r.ttl"), format=ox.RdfFormat.TURTLE)
    found = {row["id"].value: row["r"].value for row in store.query(
        "PREFIX kgc: <urn:kgcheck:vocab:> SELECT ?id ?r WHERE { ?x kgc:factId ?id ; "
        "kgc:reviewLabel ?r }")}
    assert found == {"3": KGC + "True", "2": KGC + "Skipped"}


def test_rdf_terms_of_a_fact_are_kept_unchanged(tmp_path: Path, scripted) -> None:
    rdf = {"subject": "_:b0", "predicate": "<http://schema.org/name>",
           "object": '"Paris"@fr'}
    fact = Fact(id="r1", dataset="own", subject="b0", predicate="http://schema.org/name",
                object="Paris", label=True, rdf=rdf)
    strategy = get_strategy("dka")
    spec = scripted("rdf-terms", ["F"])
    ctx = strategy.make_context(model=spec)
    graph = strategy.compile()

    async def invoke(f: Fact) -> dict[str, Any]:
        return await graph.ainvoke({"fact": f.as_input()}, context=ctx)

    info = RunInfo(dataset="own", strategy="dka", method="DKA", models=[spec])
    asyncio.run(check_facts([fact], invoke, info, tmp_path, show_progress=False))
    (record,) = _lines(tmp_path / "verdicts.jsonl")
    assert record["rdf"] == rdf
    export_run(tmp_path, "nt", tmp_path / "f.nt", shape="plain", only="F")
    (quad,) = ox.parse(path=str(tmp_path / "f.nt"), format=ox.RdfFormat.N_TRIPLES)
    assert isinstance(quad.subject, ox.BlankNode)
    assert quad.predicate == ox.NamedNode("http://schema.org/name")
    assert quad.object == ox.Literal("Paris", language="fr")


def test_dbpedia_like_terms_keep_iris_and_values_become_literals(tmp_path: Path) -> None:
    from kgcheck.evals.export import triple_terms

    s, p, o = triple_terms({"fact_id": "0", "dataset": "DBpedia",
                            "subject": "http://dbpedia.org/resource/Dinah_Shore",
                            "predicate": "http://dbpedia.org/property/length", "object": "221.0"})
    assert (s, p, o) == (ox.NamedNode("http://dbpedia.org/resource/Dinah_Shore"),
                         ox.NamedNode("http://dbpedia.org/property/length"), ox.Literal("221.0"))
    s, _, o = triple_terms({"fact_id": "1", "dataset": "YAGO", "subject": "FUBAR__film_",
                            "predicate": "produced", "object": "Stefania_Grodzieńska"})
    assert s == ox.NamedNode(TERM + "YAGO:FUBAR__film_")
    assert o == ox.NamedNode(TERM + "YAGO:Stefania_Grodzie%C5%84ska")
    # A prefixed name is a name: minted, not taken for an IRI of scheme "foaf".
    _, p, o = triple_terms({"fact_id": "2", "dataset": "kg", "subject": "Paris",
                            "predicate": "foaf:name", "object": "urn:isbn:0451450523"})
    assert (p, o) == (ox.NamedNode(TERM + "kg:foaf%3Aname"), ox.NamedNode("urn:isbn:0451450523"))


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "xml"], "--format xml: expected one of csv, jsonl, nt, ttl"),
    (["--only", "X"], "--only X: unknown verdict X; use any of T, F, NA"),
    (["--rdf", "star"], "--rdf star: expected one of annotated, plain"),
])
def test_bad_export_options_are_one_line(run_dir: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["export", str(run_dir), *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_export_of_a_folder_that_is_no_run(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="no verdicts.jsonl and run.json"):
        export_run(tmp_path, "csv", tmp_path / "x.csv")
    with pytest.raises(ExportError, match="run folder not found"):
        export_run(tmp_path / "missing", "csv")


def test_run_table_shows_accuracy_macro_f1_confusion_and_cost(tmp_path: Path, scripted) -> None:
    kg = tmp_path / "kg.csv"
    kg.write_text(KG)
    spec = scripted("table", ANSWERS)
    result = runner.invoke(app, ["run", "--triples", str(kg), "--model", spec, "--concurrency",
                                 "1", "--out", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if "F1(T)" in line)
    assert "acc" in header and "macro-F1" in header
    row = next(line for line in lines if line.startswith("│ ") and "0.67" in line)
    # n 4, F1(T) 0.67, F1(F) 0.00, accuracy 0.50, macro-F1 0.33
    assert [cell.strip() for cell in row.split("│")[1:6]] == ["4", "0.67", "0.00", "0.50", "0.33"]
    assert "confusion matrix (rows: gold, columns: verdict)" in result.output
    gold_t = next(line for line in lines if line.startswith("│ T "))
    assert [cell.strip() for cell in gold_t.split("│")[1:5]] == ["T", "2", "1", "0"]
    assert "cost $0.0000" in result.output  # a scripted model is free


TTL = """@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Paris ex:capitalOf ex:France ; rdfs:label "Paris"@en .
ex:Paris ex:population "2100000"^^<http://www.w3.org/2001/XMLSchema#integer> .
_:b1 ex:name "Rome"@it .
"""


def test_a_turtle_run_exports_its_own_terms_unchanged(tmp_path: Path, scripted) -> None:
    kg = tmp_path / "kg.ttl"
    kg.write_text(TTL)
    spec = scripted("ttl", ["F", "F", "T"])
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--triples", str(kg), "--model", spec, "--concurrency",
                                 "1", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    records = _lines(out / "verdicts.jsonl")
    assert all(r["rdf"] and r["checked_at"] for r in records)
    result = runner.invoke(app, ["export", str(out), "-f", "nt", "--rdf", "plain", "--out", "-"])
    assert result.exit_code == 0, result.output
    exported = {q.triple for q in ox.parse(result.stdout, format=ox.RdfFormat.N_TRIPLES)}
    given = {q.triple for q in ox.parse(TTL, format=ox.RdfFormat.TURTLE)
             if q.predicate != ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#label")}
    named = {t for t in given if not isinstance(t.subject, ox.BlankNode)}
    assert named <= exported and len(exported) == len(given) == 3
    (blank,) = [t for t in exported if isinstance(t.subject, ox.BlankNode)]
    assert blank.object == ox.Literal("Rome", language="it")
    # The false ones only, annotated: their verdict nodes point at the same terms.
    kgcheck.export(out, "ttl", tmp_path / "false.ttl", only="F")
    store = ox.Store()
    store.load(path=str(tmp_path / "false.ttl"), format=ox.RdfFormat.TURTLE)
    objects = {row["o"] for row in store.query(
        "PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> "
        "SELECT ?o WHERE { ?v rdf:object ?o }")}
    assert len(objects) == 2
    assert objects <= {t.object for t in exported}


def test_one_only_parser_for_export_and_review(run_dir: Path) -> None:
    from kgcheck.data.runfolder import parse_only
    from kgcheck.review.session import parse_only as review_only

    assert parse_only(["t", " T", "na"]) == ("T", "NA")
    assert parse_only(None) == parse_only("") == parse_only([]) == ()
    assert review_only("ties,f") == ("ties", "F")
    with pytest.raises(ExportError, match=r"only=\['T', 'maybe'\]: unknown verdict maybe; use any of T, F, NA"):
        kgcheck.export(run_dir, "jsonl", run_dir / "x.jsonl", only="T,maybe")
    # Nothing named is no filter, as in the review: every verdict is exported.
    everything = kgcheck.export(run_dir, "jsonl", run_dir / "all.jsonl")
    assert kgcheck.export(run_dir, "jsonl", run_dir / "none.jsonl", only="").count == everything.count
