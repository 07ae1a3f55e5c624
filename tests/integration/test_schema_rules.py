"""The schema strategy: each rule kind broken and kept, closures, SHACL, SPARQL types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.facts import Fact
from kgcheck.graphs.registry import get_strategy
from kgcheck.graphs.strategies.schema import NO_RULE_DECIDES, NO_RULE_REASON
from kgcheck.retrievers.rules import RulesError, load_ontology, load_shapes, open_checker
from tests.support.virtuoso import Virtuoso, load

runner = CliRunner()
EX = "http://ex.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
A = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
ONTOLOGY = """\
@prefix : <http://ex.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
:Capital rdfs:subClassOf :City . :City rdfs:subClassOf :Place . :Country rdfs:subClassOf :Place .
:Scientist rdfs:subClassOf :Person .
:Person owl:disjointWith :Place .
:bornIn rdfs:domain :Person ; rdfs:range :City .
:birthDate rdfs:range xsd:date ; a owl:FunctionalProperty .
:population rdfs:range xsd:integer .
:capitalOf rdfs:domain :City ; owl:inverseOf :hasCapital .
:hasCapital rdfs:domain :Country .
:partOf a owl:TransitiveProperty , owl:AsymmetricProperty .
:knows a owl:IrreflexiveProperty .
:spouse a owl:SymmetricProperty ; rdfs:domain :Person .
"""
SHAPES = """\
@prefix : <http://ex.org/> .
@prefix sh: <http://www.w3.org/ns/shacl#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
:PersonShape a sh:NodeShape ; sh:targetClass :Person ;
  sh:property [ sh:path :email ; sh:pattern "^[^@]+@[^@]+$" ] ;
  sh:property [ sh:path :worksFor ; sh:class :Organisation ] .
"""


def nt(s: str, p: str, o: str) -> str:
    return f"{s} {p} {o} ."


def iri(name: str) -> str:
    return f"<{EX}{name}>"


KG_LINES = [
    nt(iri("ada"), f"<{A}>", iri("Scientist")),
    nt(iri("london"), f"<{A}>", iri("Capital")),
    nt(iri("paris"), f"<{A}>", iri("City")),
    nt(iri("uk"), f"<{A}>", iri("Country")),
    nt(iri("acme"), f"<{A}>", iri("Organisation")),
    nt(iri("ada"), iri("birthDate"), f'"1815-12-10"^^<{XSD}date>'),
    nt(iri("europe"), iri("partOf"), iri("world")),
    nt(iri("world"), iri("partOf"), iri("uk")),
    nt(iri("london"), iri("partOf"), iri("uk")),
    nt(iri("uk"), iri("partOf"), iri("europe")),
    nt(iri("uk"), iri("hasCapital"), iri("london")),
    nt(iri("bob"), iri("spouse"), iri("ada")),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("rules")
    (folder / "onto.ttl").write_text(ONTOLOGY)
    (folder / "shapes.ttl").write_text(SHAPES)
    (folder / "kg.nt").write_text("\n".join(KG_LINES) + "\n")
    return {name: folder / f"{name}.{ext}" for name, ext in
            (("onto", "ttl"), ("shapes", "ttl"), ("kg", "nt"))}


def fact(s: str, p: str, o: str, literal: str | None = None) -> Fact:
    obj = o if literal else f"{EX}{o}"
    rdf = {"subject": iri(s), "predicate": f"<{A}>" if p == "a" else iri(p),
           "object": literal or iri(o)}
    return Fact(id=f"{s}-{p}-{o}", subject=f"{EX}{s}", predicate=A if p == "a" else f"{EX}{p}",
                object=obj, rdf=rdf)


def refuting(found) -> list[str]:
    return [f.rule for f in found if f.refutes]


# (fact, the rule it breaks or None, a fragment of the reason)
CASES = [
    # rdfs:domain: a City is not a Person (and Place is disjoint with Person).
    (fact("london", "bornIn", "paris"), "rdfs:domain", "owl:disjointWith"),
    (fact("ada", "bornIn", "london"), None, ""),  # Scientist <= Person; Capital <= City
    # rdfs:range with a class: a Country is no City (closed world: types are complete).
    (fact("ada", "bornIn", "uk"), "rdfs:range", "expects a <http://ex.org/City>"),
    # rdfs:range with a datatype: a wrong datatype, an ill-typed value, a resource.
    (fact("ada", "birthDate", "x", f'"1815"^^<{XSD}gYear>'), "rdfs:range", "xsd:gYear"),
    (fact("ada", "population", "x", f'"many"^^<{XSD}integer>'), "rdfs:range",
     "not a valid xsd:integer"),
    (fact("ada", "population", "x", '"about nine"'), "rdfs:range", "is not a xsd:integer"),
    (fact("ada", "population", "x", f'"9"^^<{XSD}int>'), None, ""),  # int <= integer
    (fact("ada", "population", "x", '"42"'), None, ""),  # a plain value of the right form
    (fact("ada", "birthDate", "london"), "rdfs:range", "expects a literal"),
    # owl:inverseOf: capitalOf's inverse hasCapital has domain Country: the object.
    (fact("paris", "capitalOf", "ada"), "rdfs:domain", "owl:inverseOf"),
    (fact("london", "capitalOf", "uk"), None, ""),
    # owl:disjointWith on a type fact.
    (fact("ada", "a", "City"), "owl:disjointWith", "disjoint with"),
    (fact("ada", "a", "Person"), None, ""),
    # owl:TransitiveProperty + AsymmetricProperty: london partOf uk partOf europe.
    (fact("europe", "partOf", "london"), "owl:AsymmetricProperty", "owl:TransitiveProperty"),
    (fact("world", "partOf", "europe"), "owl:AsymmetricProperty", "the KG has"),
    (fact("paris", "partOf", "uk"), None, ""),
    # owl:IrreflexiveProperty.
    (fact("ada", "knows", "ada"), "owl:IrreflexiveProperty", "itself"),
    (fact("ada", "knows", "bob"), None, ""),
    # owl:SymmetricProperty: spouse's domain Person applies to the object too.
    (fact("ada", "spouse", "paris"), "rdfs:domain", "owl:SymmetricProperty"),
    (fact("ada", "spouse", "bob"), None, ""),  # bob is untyped: no rule decides
]


@pytest.mark.parametrize(("item", "rule", "reason"), CASES, ids=[c[0].id for c in CASES])
def test_each_rule_broken_and_kept(files, item: Fact, rule: str | None, reason: str) -> None:
    checker = open_checker(ontology=str(files["onto"]), kg=[str(files["kg"])])
    found = checker.check(item)
    if rule is None:
        assert refuting(found) == []
    else:
        assert refuting(found)[0] == rule
        assert reason in next(f.text for f in found if f.refutes)


def test_findings_that_decide_nothing(files) -> None:
    checker = open_checker(ontology=str(files["onto"]), kg=[str(files["kg"])])
    # owl:FunctionalProperty: a second birth date is reported, but which one is wrong?
    second = checker.check(fact("ada", "birthDate", "x", f'"1816-01-01"^^<{XSD}date>'))
    assert refuting(second) == []
    assert [f.rule for f in second] == ["owl:FunctionalProperty"]
    assert "1815-12-10" in second[0].found
    assert checker.check(fact("ada", "birthDate", "x", f'"1815-12-10"^^<{XSD}date>')) == []
    # Entailed by a chain, by symmetry, by the inverse: evidence, never T.
    chain = checker.check(fact("london", "partOf", "europe"))
    assert [f.rule for f in chain] == ["owl:TransitiveProperty"] and not chain[0].refutes
    assert [f.rule for f in checker.check(fact("ada", "spouse", "bob"))] == \
        ["owl:SymmetricProperty"]
    assert [f.rule for f in checker.check(fact("london", "capitalOf", "uk"))] == \
        ["owl:inverseOf"]


def test_open_world_types_need_disjointness(files) -> None:
    checker = open_checker(ontology=str(files["onto"]), kg=[str(files["kg"])],
                           types_complete=False)
    country = checker.check(fact("ada", "bornIn", "uk"))
    assert refuting(country) == [] and country[0].rule == "rdfs:range"
    # Disjointness still refutes: a City is a Place, disjoint with Person.
    assert refuting(checker.check(fact("london", "bornIn", "paris"))) == ["rdfs:domain"]


def test_subclass_closure() -> None:
    onto = load_ontology_text("""@prefix : <http://ex.org/> .
        @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
        @prefix owl: <http://www.w3.org/2002/07/owl#> .
        :A rdfs:subClassOf :B . :B rdfs:subClassOf :C . :C rdfs:subClassOf :A .
        :X owl:disjointWith :C .""")
    assert onto.closure([f"{EX}A"]) == {f"{EX}A", f"{EX}B", f"{EX}C"}  # a cycle ends
    assert onto.disjoint_pair([f"{EX}A"], [f"{EX}X"]) == (f"{EX}C", f"{EX}X")
    assert onto.disjoint_pair([f"{EX}A"], [f"{EX}B"]) is None


def load_ontology_text(text: str, tmp: list[Path] = []) -> object:  # noqa: B006
    import tempfile

    folder = Path(tempfile.mkdtemp())
    path = folder / "o.ttl"
    path.write_text(text)
    return load_ontology(path)


def test_shacl_shapes(files) -> None:
    checker = open_checker(ontology=str(files["onto"]), shapes=str(files["shapes"]),
                           kg=[str(files["kg"])])
    bad = checker.check(fact("ada", "email", "x", '"ada.example.org"'))
    assert refuting(bad) == ["sh:Pattern"]
    assert "PersonShape" in bad[0].text and "ex.org/email>" in bad[0].text
    assert refuting(checker.check(fact("ada", "email", "x", '"ada@example.org"'))) == []
    # sh:class through the subject's type closure (Scientist <= Person is the target).
    assert refuting(checker.check(fact("ada", "worksFor", "paris"))) == ["sh:Class"]
    assert refuting(checker.check(fact("ada", "worksFor", "acme"))) == []
    # Shapes alone, without an ontology: no closure, so the Scientist is no Person target.
    alone = open_checker(shapes=str(files["shapes"]), kg=[str(files["kg"])])
    assert refuting(alone.check(fact("ada", "email", "x", '"ada.example.org"'))) == []


async def test_the_graph_gives_f_with_the_rule_or_no_rule_decides(files) -> None:
    strategy = get_strategy("schema")
    graph = strategy.compile()
    ctx = strategy.make_context(ontology=str(files["onto"]), kg=str(files["kg"]))
    wrong = await graph.ainvoke({"fact": fact("ada", "bornIn", "uk").as_input()}, context=ctx)
    assert wrong["verdict"]["label"] == "F"
    assert wrong["verdict"]["details"]["rule"] == "rdfs:range"
    assert "<http://ex.org/uk> is a <http://ex.org/Country>" in \
        wrong["verdict"]["details"]["reason"]
    kept = await graph.ainvoke({"fact": fact("ada", "bornIn", "london").as_input()},
                               context=ctx)
    assert kept["verdict"]["label"] == NO_RULE_DECIDES != "T"
    assert kept["verdict"]["details"]["reason"] == NO_RULE_REASON
    assert kept["verdict"]["model"] == "rules" and kept["verdict"]["attempts"] == 0


def test_a_run_from_the_command_line(files, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # The terms' types and statements come from the input itself (an RDF file).
    result = runner.invoke(app, ["run", "--triples", str(files["kg"]), "--strategy", "schema",
                                 "--ontology", str(files["onto"]), "--out", str(out),
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    labels = {(r["subject"].rsplit("/", 1)[-1], r["predicate"].rsplit("/", 1)[-1],
               r["object"].rsplit("/", 1)[-1]): r["label"] for r in records}
    # The KG's own cycle: every partOf step but london's breaks asymmetry.
    assert labels[("uk", "partOf", "europe")] == "F"
    assert labels[("london", "partOf", "uk")] == "NEI"
    assert set(labels.values()) <= {"F", "NEI"}
    info = json.loads((out / "run.json").read_text())
    assert info["models"] == ["rules"] and info["method"] == "SCHEMA"
    assert info["settings"]["kg"] == str(files["kg"])


@pytest.mark.parametrize(("name", "text", "message"), [
    ("onto.ttl", "@prefix : <http://ex.org/> . :a :b", "malformed ontology"),
    ("onto.ttl", "<http://ex.org/a> <http://ex.org/b> <http://ex.org/c> .",
     "the ontology states no rule"),
    ("onto.xyz", "x", "unknown RDF format"),
    ("shapes.ttl", "@prefix sh: <http://www.w3.org/ns/shacl#> . [ sh:path", "malformed shapes"),
    ("shapes.ttl", "<http://ex.org/a> <http://ex.org/b> <http://ex.org/c> .", "no SHACL shapes"),
    ("shapes.ttl", "@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix : <http://ex.org/> .\n"
     ":S a sh:PropertyShape ; sh:targetClass :P ; sh:datatype :x .",
     "a shape pySHACL refuses"),
])
def test_malformed_ontologies_and_shapes_are_one_line(files, tmp_path: Path, name: str,
                                                      text: str, message: str) -> None:
    bad = tmp_path / name
    bad.write_text(text)
    key = "shapes" if name.startswith("shapes") else "ontology"
    result = runner.invoke(app, ["run", "--triples", str(files["kg"]), "--strategy", "schema",
                                 "--set", f"{key}={bad}", "--set", f"kg={files['kg']}",
                                 "--out", str(tmp_path / "o"), "--no-progress"])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and str(bad) in lines[0], result.output
    assert "Traceback" not in result.output
    with pytest.raises(RulesError, match=message):
        (load_shapes if key == "shapes" else load_ontology)(bad)


def test_types_from_a_sparql_endpoint(files, virtuoso: Virtuoso) -> None:
    graph = "http://kgcheck.test/schema"
    load(virtuoso, files["kg"], graph)
    checker = open_checker(ontology=str(files["onto"]), endpoint=virtuoso.url, graph=graph)
    assert refuting(checker.check(fact("ada", "bornIn", "uk"))) == ["rdfs:range"]
    assert refuting(checker.check(fact("ada", "bornIn", "london"))) == []
    assert refuting(checker.check(fact("world", "partOf", "europe"))) == \
        ["owl:AsymmetricProperty"]


def sparql_shapes(query: str, where: str = "sparql") -> str:
    """Return shapes holding ``query`` as a SPARQL constraint, validator or target."""
    head = ("@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix : <http://ex.org/> .\n"
            ":PersonShape a sh:NodeShape ; ")
    if where == "sparql":
        return head + f'sh:targetClass :Person ; sh:sparql [ sh:select """{query}""" ] .\n'
    if where == "target":
        return head + f'sh:target [ a sh:SPARQLTarget ; sh:select """{query}""" ] .\n'
    return (head + "sh:targetClass :Person ; :needs true .\n"
            ":Needs a sh:ConstraintComponent ; sh:parameter [ sh:path :needs ] ; "
            f'sh:nodeValidator [ a sh:SPARQLAskValidator ; sh:ask """{query}""" ] .\n')


@pytest.mark.parametrize(("query", "where", "reason"), [
    ("SELECT $this WHERE { $this <http://ex.org/email> ?v . "
     "SERVICE <http://127.0.0.1:9/sparql> { ?v ?p ?o } }", "sparql", "SERVICE"),
    ("SELECT $this WHERE { GRAPH ?g { $this <http://ex.org/email> ?v } }", "sparql", "GRAPH"),
    ("SELECT $this FROM <file:///etc/passwd> WHERE { $this <http://ex.org/email> ?v }",
     "sparql", "FROM"),
    ("SELECT ?this WHERE { FILTER NOT EXISTS { SERVICE SILENT <http://127.0.0.1:9/> "
     "{ ?this ?p ?o } } }", "target", "SERVICE"),
    ("ASK { GRAPH <http://ex.org/g> { $this ?p ?o } }", "validator", "GRAPH"),
], ids=["service", "graph", "from", "target-service", "validator-graph"])
def test_shapes_reaching_outside_the_data_graph_are_refused(files, tmp_path: Path, query: str,
                                                            where: str, reason: str) -> None:
    bad = tmp_path / "shapes.ttl"
    bad.write_text(sparql_shapes(query, where))
    result = runner.invoke(app, ["run", "--triples", str(files["kg"]), "--strategy", "schema",
                                 "--set", f"shapes={bad}", "--set", f"kg={files['kg']}",
                                 "--out", str(tmp_path / "o"), "--no-progress"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert str(bad) in lines[0] and "reaches outside the data graph" in lines[0]
    # Named by the shape (or the constraint component) that holds the query.
    owner = "Needs" if where == "validator" else "PersonShape"
    assert f"({reason} " in lines[0] and f"<http://ex.org/{owner}>" in lines[0]
    assert not (tmp_path / "o" / "verdicts.jsonl").exists()


def test_a_query_that_is_no_sparql_is_refused_at_load(tmp_path: Path) -> None:
    bad = tmp_path / "shapes.ttl"
    bad.write_text(sparql_shapes("SELECT $this WHERE { $this"))
    with pytest.raises(RulesError, match=r"shapes\.ttl: refused: the sh:select of shape "
                                         r"<http://ex.org/PersonShape> is no SPARQL query"):
        load_shapes(bad)


def test_a_query_inside_the_data_graph_is_run(files, tmp_path: Path) -> None:
    good = tmp_path / "shapes.ttl"
    good.write_text(
        "@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix : <http://ex.org/> .\n"
        ":PersonShape a sh:NodeShape ; sh:targetClass :Person ; sh:property [ sh:path :email ;"
        ' sh:sparql [ sh:select """SELECT $this ?value WHERE { $this $PATH ?value . '
        'FILTER(!CONTAINS(STR(?value), "@")) }""" ] ] .\n')
    checker = open_checker(ontology=str(files["onto"]), shapes=str(good), kg=[str(files["kg"])])
    assert refuting(checker.check(fact("ada", "email", "x", '"ada.example.org"'))) == \
        ["sh:SPARQL"]
    assert refuting(checker.check(fact("ada", "email", "x", '"ada@example.org"'))) == []


async def test_a_failure_of_pyshacl_on_a_fact_is_that_facts_error(files, tmp_path: Path) -> None:
    # pySHACL accepts the shape at load and fails when it runs it (SELECT * in a subquery
    # cannot take $this): the fact's verdict says so, no attribute error escapes.
    odd = tmp_path / "shapes.ttl"
    odd.write_text(sparql_shapes("SELECT $this WHERE { $this <http://ex.org/email> ?v . "
                                 "{ SELECT * WHERE { ?a ?b ?c } } }"))
    strategy = get_strategy("schema")
    ctx = strategy.make_context(ontology=str(files["onto"]), shapes=str(odd),
                                kg=str(files["kg"]))
    out = await strategy.compile().ainvoke(
        {"fact": fact("ada", "email", "x", '"ada@example.org"').as_input()}, context=ctx)
    verdict = out["verdict"]
    assert verdict["label"] == "NA" and verdict["details"]["error_type"] == "RulesError"
    assert "SHACL validation of <http://ex.org/ada> failed: Using 'SELECT *' in a nested " \
        "SELECT" in verdict["error"], verdict["error"]
    assert "\n" not in verdict["error"] and "subjects" not in verdict["error"]


def test_tables_head_each_label_column_by_what_it_counts(files, tmp_path: Path) -> None:
    from kgcheck.evals.report import predicate_section, read_run, run_section

    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--triples", str(files["kg"]), "--strategy", "schema",
                                 "--ontology", str(files["onto"]), "--out", str(out),
                                 "--no-progress"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    nei = sum(r["label"] == "NEI" for r in records)
    assert nei and not any(r["label"] == "NA" for r in records)
    # The per-predicate table: NEI under NEI, and an NA column that counts NA alone.
    header = next(line for line in result.output.splitlines() if "predicate" in line
                  and "acc" in line)
    cells = [c.strip() for c in header.strip("┃ ").split("┃")]
    assert cells[:7] == ["predicate", "n", "false", "true", "NEI", "NA", "acc"], header
    rows = [[c.strip() for c in line.strip("│ ").split("│")]
            for line in result.output.splitlines() if line.startswith("│ http")]
    assert sum(int(row[4]) for row in rows) == nei and {row[5] for row in rows} == {"0"}
    # The report's run and predicate tables alike.
    run = read_run(out)
    table = run_section([run]).splitlines()
    head = [c.strip() for c in table[2].strip("|").split("|")]
    row = [c.strip() for c in table[4].strip("|").split("|")]
    assert head[6:9] == ["NEI", "NA", "errors"] and row[6:8] == [str(nei), "0"]
    assert "| judged T | NEI | NA | labelled |" in predicate_section([run])
