"""Exports carry readable names beside the terms: the KG's own labels, else the term's."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyoxigraph as ox
from typer.testing import CliRunner

from kgcheck.cli import app

runner = CliRunner()
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
TURTLE = """@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:ada ex:birthPlace ex:London ; ex:knows ex:Charles_Babbage .
ex:ada rdfs:label "Ada Lovelace"@en .
ex:London rdfs:label "London" .
ex:birthPlace rdfs:label "was born in" .
"""


def _run(tmp_path: Path, scripted, name: str, kg: str) -> Path:
    path = tmp_path / name
    path.write_text(kg)
    out = tmp_path / f"run-{name}"
    result = runner.invoke(app, ["run", "--triples", str(path), "--model",
                                 scripted(f"names-{name}", ["T", "F", "T"]), "--out", str(out),
                                 "--no-progress", "--concurrency", "1"])
    assert result.exit_code == 0, result.output
    return out


def _export(run: Path, fmt: str, *extra: str) -> Path:
    target = run / f"out.{fmt}"
    result = runner.invoke(app, ["export", str(run), "--format", fmt, "--out", str(target),
                                 *extra])
    assert result.exit_code == 0, result.output
    return target


def test_csv_and_jsonl_have_name_columns(tmp_path: Path, scripted) -> None:
    run = _run(tmp_path, scripted, "kg.ttl", TURTLE)
    with _export(run, "csv").open(newline="") as fh:
        rows = {r["object"]: r for r in csv.DictReader(fh)}
    born = rows["http://example.org/London"]
    assert (born["subject_name"], born["predicate_name"], born["object_name"]) == (
        "Ada Lovelace", "was born in", "London")
    knows = rows["http://example.org/Charles_Babbage"]
    # No label in the KG: the name is read off the IRI.
    assert (knows["predicate_name"], knows["object_name"]) == ("knows", "Charles Babbage")
    lines = [json.loads(x) for x in _export(run, "jsonl").read_text().splitlines()]
    assert {x["subject_name"] for x in lines} == {"Ada Lovelace"}


def test_annotated_rdf_labels_the_terms_the_kg_named(tmp_path: Path, scripted) -> None:
    run = _run(tmp_path, scripted, "kg.ttl", TURTLE)
    for fmt, rdf_format in (("ttl", ox.RdfFormat.TURTLE), ("nt", ox.RdfFormat.N_TRIPLES)):
        graph = list(ox.parse(_export(run, fmt).read_bytes(), rdf_format))
        labels = {q.subject.value: q.object.value for q in graph
                  if q.predicate.value == RDFS_LABEL and q.subject.value.startswith("http://e")}
        assert labels == {"http://example.org/ada": "Ada Lovelace",
                          "http://example.org/London": "London",
                          "http://example.org/birthPlace": "was born in"}
        assert sum(1 for q in graph if q.predicate.value == RDFS_LABEL
                   and q.subject.value == "http://example.org/ada") == 1  # once per term


def test_minted_terms_get_their_readable_name(tmp_path: Path, scripted) -> None:
    run = _run(tmp_path, scripted, "kg.csv",
               "subject,predicate,object\nMarie_Curie,hasWonPrize,Nobel_Prize_in_Physics\n")
    graph = list(ox.parse(_export(run, "ttl").read_bytes(), ox.RdfFormat.TURTLE))
    labels = {q.object.value for q in graph if q.predicate.value == RDFS_LABEL
              and q.subject.value.startswith("urn:kgcheck:term:")}
    assert labels == {"Marie Curie", "has won prize", "Nobel Prize in Physics"}
    plain = list(ox.parse(_export(run, "nt", "--rdf", "plain").read_bytes(),
                          ox.RdfFormat.N_TRIPLES))
    assert len(plain) == 1  # a plain export is the triples alone, for a deletion review


TAGGED = """<http://example.org/Danube> <http://example.org/flowsThrough> <http://example.org/Koeln> .
<http://example.org/Danube> <http://example.org/length> "2850" .
<http://example.org/Danube> <http://www.w3.org/2000/01/rdf-schema#label> "Danube"@en .
<http://example.org/Koeln> <http://www.w3.org/2000/01/rdf-schema#label> "K\\u00F6ln"@de .
<http://example.org/length> <http://www.w3.org/2000/01/rdf-schema#label> "length"^^<http://example.org/word> .
"""


def test_labels_keep_their_language_tag_and_datatype_in_every_export(tmp_path: Path,
                                                                      scripted) -> None:
    run = _run(tmp_path, scripted, "kg.nt", TAGGED)
    expected = {ox.Triple(ox.NamedNode("http://example.org/" + s), ox.NamedNode(RDFS_LABEL), o)
                for s, o in (("Danube", ox.Literal("Danube", language="en")),
                             ("Koeln", ox.Literal("Köln", language="de")),
                             ("length", ox.Literal("length", datatype=ox.NamedNode(
                                 "http://example.org/word"))))}
    for fmt, rdf_format in (("ttl", ox.RdfFormat.TURTLE), ("nt", ox.RdfFormat.N_TRIPLES)):
        graph = {ox.Triple(q.subject, q.predicate, q.object)
                 for q in ox.parse(_export(run, fmt).read_bytes(), rdf_format)}
        assert {t for t in graph if t.predicate.value == RDFS_LABEL
                and t.subject.value.startswith("http://example.org/")} == expected
    rows = [json.loads(x) for x in _export(run, "jsonl").read_text().splitlines()]
    assert {r["name_terms"]["subject"] for r in rows} == {'"Danube"@en'}
    assert {r["subject_name"] for r in rows} == {"Danube"}  # the name itself, untagged
