"""Choosing the facts of a file by predicate: IRIs, prefixed names, plain names, globs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.data.facts import Fact
from kgcheck.data.predicates import PredicateFilter, PredicateFilterError

runner = CliRunner()
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
TURTLE = """@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
ex:ada a ex:Person ; ex:birthPlace ex:London ; ex:birthDate "1815" ; ex:knows ex:mary .
ex:mary a ex:Person ; owl:sameAs ex:mary2 ; ex:birthPlace ex:London .
ex:ada rdfs:label "Ada" .
"""


def _fact(predicate: str) -> Fact:
    return Fact(id=predicate[-12:], dataset="kg", subject="s", predicate=predicate, object="o")


def test_patterns_match_iris_prefixed_names_plain_names_and_globs() -> None:
    chosen = PredicateFilter.of(["rdf:type", "<http://example.org/knows>",
                                 "http://example.org/birth*", "isMarriedTo"])
    assert chosen is not None
    kept = [p for p in (RDF_TYPE, "http://example.org/knows", "http://example.org/birthDate",
                        "http://example.org/birthPlace", "isMarriedTo", "http://example.org/age",
                        "hasChild") if chosen.keeps(_fact(p))]
    assert kept == [RDF_TYPE, "http://example.org/knows", "http://example.org/birthDate",
                    "http://example.org/birthPlace", "isMarriedTo"]
    dropping = PredicateFilter.of(exclude="rdf:*,owl:sameAs,*Date")
    assert dropping is not None
    assert [p for p in (RDF_TYPE, "http://www.w3.org/2002/07/owl#sameAs",
                        "http://example.org/birthDate", "http://example.org/knows")
            if dropping.keeps(_fact(p))] == ["http://example.org/knows"]
    assert PredicateFilter.of() is None
    with pytest.raises(PredicateFilterError, match="--predicates names no predicate"):
        PredicateFilter.of(" , ")


def test_the_filter_streams_without_holding_the_input() -> None:
    endless = (_fact(RDF_TYPE if n % 2 else "http://example.org/p") for n in itertools.count())
    chosen = PredicateFilter.of(exclude="rdf:type")
    assert chosen is not None
    first = list(itertools.islice(chosen.apply(endless), 3))
    assert [f.predicate for f in first] == ["http://example.org/p"] * 3
    assert chosen.seen == 5


def _run(tmp_path: Path, scripted, *extra: str):
    kg = tmp_path / "kg.ttl"
    kg.write_text(TURTLE)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--triples", str(kg), "--model",
                                 scripted(f"preds{len(extra)}", ["T"] * 20), "--out", str(out),
                                 "--no-progress", "--concurrency", "1", *extra])
    records = ([json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
               if (out / "verdicts.jsonl").exists() else [])
    return result, records, out


def test_cli_leaves_out_structural_triples(tmp_path: Path, scripted) -> None:
    result, records, out = _run(tmp_path, scripted, "--exclude-predicates", "rdf:type,owl:*")
    assert result.exit_code == 0, result.output
    assert sorted(r["predicate"].rsplit("/", 1)[1] for r in records) == [
        "birthDate", "birthPlace", "birthPlace", "knows"]
    drawn = json.loads((out / "run.json").read_text())["input"]["drawn"]
    assert drawn == {"how": "all", "exclude_predicates": ["rdf:type", "owl:*"]}


def test_cli_keeps_only_the_predicates_asked_for(tmp_path: Path, scripted) -> None:
    result, records, _ = _run(tmp_path, scripted, "--predicates",
                              "http://example.org/birth*,ex:nothing")
    assert result.exit_code == 0, result.output
    assert {r["predicate"] for r in records} == {"http://example.org/birthPlace",
                                                 "http://example.org/birthDate"}
    text = " ".join(result.output.split())
    assert "ex:nothing: no predicate of the" in text  # ex is no well-known prefix


def test_a_filter_that_keeps_nothing_is_one_line(tmp_path: Path, scripted) -> None:
    result, records, _ = _run(tmp_path, scripted, "--predicates", "foaf:name")
    assert result.exit_code == 2 and not records
    text = " ".join(result.output.split())
    assert "no fact has a predicate that --predicates keeps" in text
    assert "Traceback" not in text


def test_sparql_chooses_its_triples_with_where(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "--sparql", "http://127.0.0.1:9/sparql",
                                 "--exclude-predicates", "rdf:type", "--out",
                                 str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 2
    assert "a --sparql endpoint chooses its triples with --where" in " ".join(
        result.output.split())


def test_the_api_takes_the_same_filter(tmp_path: Path, scripted) -> None:
    kg = tmp_path / "kg.ttl"
    kg.write_text(TURTLE)
    result = kgcheck.run(triples=kg, model=scripted("preds-api", ["T"] * 20),
                         out=tmp_path / "api",
                         predicates=["http://example.org/knows", RDF_TYPE],
                         exclude_predicates="*#type", concurrency=1)
    assert [r["predicate"] for r in result.records] == ["http://example.org/knows"]
