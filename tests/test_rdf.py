"""RDF files as input: every syntax, terms kept exactly, stable ids, names, clear errors."""

from __future__ import annotations

import gzip
import json

import pyoxigraph as ox
import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.data.rdf import Names, RdfReader, fact_id
from kgcheck.data.triples import TriplesError, read_triples

runner = CliRunner()
XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"

TURTLE = """@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
ex:ada ex:birthPlace ex:London ;
    ex:age "36"^^<http://www.w3.org/2001/XMLSchema#integer> ;
    ex:motto "Imagination is a discovering faculty"@en ;
    ex:knows _:friend .
_:friend ex:name "Mary" .
ex:ada rdfs:label "Ada Lovelace"@en , "Ada"@fr .
ex:London skos:prefLabel "London" .
ex:birthPlace rdfs:label "was born in" .
"""
EXPECTED = {
    ("<http://example.org/ada>", "<http://example.org/birthPlace>", "<http://example.org/London>"),
    ("<http://example.org/ada>", "<http://example.org/age>", f'"36"^^<{XSD_INT}>'),
    ("<http://example.org/ada>", "<http://example.org/motto>",
     '"Imagination is a discovering faculty"@en'),
    ("<http://example.org/ada>", "<http://example.org/knows>", "_:friend"),
    ("_:friend", "<http://example.org/name>", '"Mary"'),
}


def _serialise(tmp_path, name: str, fmt: ox.RdfFormat) -> str:
    """Write the Turtle graph in another syntax with pyoxigraph itself."""
    triples = list(ox.parse(TURTLE, ox.RdfFormat.TURTLE))
    if fmt in (ox.RdfFormat.N_QUADS, ox.RdfFormat.TRIG):
        graph = ox.NamedNode("http://example.org/g")
        triples = [ox.Quad(q.subject, q.predicate, q.object, graph) for q in triples]
    path = tmp_path / name
    ox.serialize(triples, str(path), fmt)
    return str(path)


@pytest.mark.parametrize(("name", "fmt"), [
    ("kg.nt", ox.RdfFormat.N_TRIPLES), ("kg.nq", ox.RdfFormat.N_QUADS),
    ("kg.trig", ox.RdfFormat.TRIG), ("kg.rdf", ox.RdfFormat.RDF_XML),
    ("kg.xml", ox.RdfFormat.RDF_XML)])
def test_every_syntax_gives_the_same_facts(tmp_path, name: str, fmt: ox.RdfFormat) -> None:
    (tmp_path / "kg.ttl").write_text(TURTLE)
    reference = {f.id: f for f in read_triples(tmp_path / "kg.ttl")}
    facts = read_triples(_serialise(tmp_path, name, fmt))
    assert {(f.rdf["subject"], f.rdf["predicate"], f.rdf["object"]) for f in facts} == EXPECTED
    assert {f.id: (f.subject, f.predicate, f.object, f.names) for f in facts} == {
        i: (f.subject, f.predicate, f.object, f.names) for i, f in reference.items()}


def test_terms_values_names_and_ids(tmp_path) -> None:
    (tmp_path / "kg.ttl").write_text(TURTLE)
    facts = {f.predicate.rsplit("/", 1)[-1]: f for f in read_triples(tmp_path / "kg.ttl")}
    born = facts["birthPlace"]
    assert (born.subject, born.object) == ("http://example.org/ada", "http://example.org/London")
    assert born.names == {"subject": "Ada Lovelace", "predicate": "was born in",
                          "object": "London"}
    assert born.readable_terms() == ("Ada Lovelace", "was born in", "London")
    assert born.dataset == "kg" and born.label is None
    line = "<http://example.org/ada> <http://example.org/birthPlace> <http://example.org/London> ."
    assert born.id == fact_id(line) and len(born.id) == 16
    age = facts["age"]
    assert (age.object, age.rdf["object"]) == ("36", f'"36"^^<{XSD_INT}>')
    # No name in the file: the IRI's local name, as for CSV input.
    assert age.readable_terms() == ("Ada Lovelace", "age", "36")
    assert facts["motto"].rdf["object"].endswith('"@en')
    # Naming triples give names and are not facts to check.
    assert "label" not in facts and "prefLabel" not in facts


def test_gzip_and_anonymous_blank_nodes_are_stable(tmp_path) -> None:
    text = "@prefix ex: <http://example.org/> .\nex:a ex:p [ ex:q ex:o ] .\nex:a ex:r ( 1 2 ) .\n"
    (tmp_path / "kg.ttl").write_text(text)
    with gzip.open(tmp_path / "kg.ttl.gz", "wt") as fh:
        fh.write(text)
    first = [f.id for f in read_triples(tmp_path / "kg.ttl")]
    assert first == [f.id for f in read_triples(tmp_path / "kg.ttl")]
    assert first == [f.id for f in read_triples(tmp_path / "kg.ttl.gz")]
    assert read_triples(tmp_path / "kg.ttl.gz")[0].dataset == "kg"
    assert len(first) == 7  # [ ] gives 2 triples, a two-item list 5


def test_the_same_triple_twice_is_one_fact(tmp_path) -> None:
    line = "<http://e.org/a> <http://e.org/p> <http://e.org/b>"
    (tmp_path / "kg.nq").write_text(f"{line} <http://e.org/g1> .\n{line} <http://e.org/g2> .\n"
                                    f"{line} .\n")
    assert len(read_triples(tmp_path / "kg.nq")) == 1
    (tmp_path / "kg.nt").write_text(f"{line} .\n{line} .\n<http://e.org/a> <http://e.org/p> \"x\" .\n")
    assert len(read_triples(tmp_path / "kg.nt")) == 2
    chosen = kgcheck.select_facts(tmp_path / "kg.nt", sample=5)
    assert len(chosen) == 2


def test_names_beyond_the_cap_are_looked_up_for_the_chosen_facts_only(tmp_path) -> None:
    (tmp_path / "kg.ttl").write_text(TURTLE)
    reader = RdfReader(tmp_path / "kg.ttl")
    reader.names = Names(cap=1)
    facts = list(reader)
    assert reader.names.overflowed and len(reader.names) == 0
    named = reader.named(facts[:1])
    assert named[0].readable_terms() == ("Ada Lovelace", "was born in", "London")
    assert len(reader.names) == 3


@pytest.mark.parametrize(("name", "content", "message"), [
    ("bad.nt", "<http://e.org/a> <http://e.org/p> <http://e.org/b> .\n<http://e.org/a> <http://e.org/p> oops .\n",
     r"bad.nt, line 2: malformed N-Triples \(.*object"),
    ("bad.ttl", "@prefix ex: <http://e.org/> .\nex:a ex:p ex:b .\n\nex:a ex:p .\n",
     r"bad.ttl, line 4: malformed Turtle"),
    ("bad.rdf", "<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>\n"
     "<rdf:Description rdf:about='http://e.org/a'><ex:p xmlns:ex='http://e.org/'>x</ex:q>\n"
     "</rdf:Description></rdf:RDF>", r"bad.rdf: malformed RDF/XML \(ill-formed"),  # no line from the XML parser
    ("bad.nt.gz", "not gzip at all", r"bad.nt.gz: cannot be read as N-Triples"),
])
def test_malformed_rdf_names_file_and_line(tmp_path, name: str, content: str, message: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(TriplesError, match=message):
        read_triples(tmp_path / name)


def test_cli_run_on_turtle_keeps_terms_and_resumes_after_a_fix(tmp_path, scripted) -> None:
    kg = tmp_path / "kg.nt"
    good = [f"<http://e.org/s{i}> <http://e.org/p> \"v{i}\"@en ." for i in range(4)]
    kg.write_text("\n".join(good[:2]) + "\n<http://e.org/s9> <http://e.org/p> broken .\n"
                  + "\n".join(good[2:]) + "\n")
    out = tmp_path / "run"
    spec = scripted("rdf-run", ["T"] * 10)
    args = ["run", "--triples", str(kg), "--model", spec, "--concurrency", "1", "--out",
            str(out), "--no-progress"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert f"{kg}, line 3: malformed N-Triples" in text and "Traceback" not in text
    # The facts before the bad line can be checked already ...
    result = runner.invoke(app, [*args, "--limit", "2"])
    assert result.exit_code == 0, result.output
    first = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert [r["rdf"]["object"] for r in first] == ['"v0"@en', '"v1"@en']
    # ... and once the file is fixed, a resume keeps them: their ids did not change.
    kg.write_text("\n".join(good) + "\n")
    result = runner.invoke(app, [*args, "--resume"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert len(records) == 4 and json.loads((out / "summary.json").read_text())["ran_this_time"] == 2
    assert [r["run_id"] for r in records[:2]] == [first[0]["run_id"]] * 2


def test_gold_labels_from_a_file_by_id_or_triple(tmp_path, scripted) -> None:
    (tmp_path / "kg.ttl").write_text(TURTLE)
    facts = kgcheck.read_triples(tmp_path / "kg.ttl")
    by_predicate = {f.predicate.rsplit("/", 1)[-1]: f for f in facts}
    labels = tmp_path / "gold.csv"
    labels.write_text("id,subject,predicate,object,label\n"
                      f"{by_predicate['age'].id},,,,false\n"
                      ",<http://example.org/ada>,<http://example.org/birthPlace>,<http://example.org/London>,true\n"
                      ",http://example.org/ada,http://example.org/motto,Imagination is a discovering faculty,1\n")
    out = tmp_path / "run"
    spec = scripted("rdf-gold", ["T", "T", "T", "T", "T"])
    result = runner.invoke(app, ["run", "--triples", str(tmp_path / "kg.ttl"), "--labels", str(labels),
                                 "--model", spec, "--concurrency", "1", "--out", str(out),
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    gold = {r["rdf"]["predicate"]: r["gold"] for r in
            map(json.loads, (out / "verdicts.jsonl").read_text().splitlines())}
    assert gold == {"<http://example.org/age>": "F", "<http://example.org/birthPlace>": "T",
                    "<http://example.org/motto>": "T", "<http://example.org/knows>": None,
                    "<http://example.org/name>": None}
    assert json.loads((out / "summary.json").read_text())["scored"] == 3


def test_api_select_facts_from_a_file_finds_names_past_the_first_facts(tmp_path) -> None:
    (tmp_path / "kg.ttl").write_text(TURTLE)
    # The labels come after the first fact: the names are looked up for the chosen facts.
    chosen = kgcheck.select_facts(tmp_path / "kg.ttl", limit=1)
    assert len(chosen) == 1 and chosen[0].readable_terms() == ("Ada Lovelace", "was born in", "London")
    assert [f.id for f in kgcheck.select_facts(str(tmp_path / "kg.ttl"), sample=2, seed=4)] == \
        [f.id for f in kgcheck.select_facts(kgcheck.read_triples(tmp_path / "kg.ttl"), sample=2, seed=4)]
