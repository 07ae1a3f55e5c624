"""Schema strategy benchmark: what the KG's own rules catch, and the model calls they save.

Generates a KG of people, cities, countries and organisations with an ontology
(``rdfs:domain``, ``rdfs:range`` with classes and datatypes, ``owl:disjointWith``,
``rdfs:subClassOf``), plants errors of five kinds, and runs

- the ``schema`` strategy over every fact: precision and recall of its F verdicts as error
  detection (scikit-learn), overall and per planted kind;
- DKA with ``--prefilter schema`` against a stub OpenAI-compatible server on loopback
  (tests/support/stubs): the requests the server got, beside the facts checked.

The fifth kind, a wrong city of birth that is still a city, breaks no rule: its recall is
what the rules cannot catch. Prints one JSON document.

    python benchmarks/bench_schema.py [--people 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from sklearn.metrics import precision_score, recall_score

import kgcheck

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.stubs import Behaviour, OpenAIStub  # noqa: E402 - the repository's own stubs

EX = "http://bench.kgcheck/"
A = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
XSD = "http://www.w3.org/2001/XMLSchema#"
ONTOLOGY = f"""\
@prefix : <{EX}> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix xsd: <{XSD}> .
:Scientist rdfs:subClassOf :Person . :Artist rdfs:subClassOf :Person .
:City rdfs:subClassOf :Place . :Country rdfs:subClassOf :Place .
:Person owl:disjointWith :Place , :Organisation . :Place owl:disjointWith :Organisation .
:bornIn rdfs:domain :Person ; rdfs:range :City .
:worksFor rdfs:domain :Person ; rdfs:range :Organisation .
:locatedIn rdfs:domain :City ; rdfs:range :Country .
:birthDate rdfs:domain :Person ; rdfs:range xsd:date .
:population rdfs:domain :Place ; rdfs:range xsd:integer .
"""
KINDS = ("domain", "range", "disjoint", "datatype", "undetectable")


def iri(name: str) -> str:
    return f"<{EX}{name}>"


def build(people: int, seed: int) -> tuple[list[str], list[str], dict[int, str]]:
    """Return the type lines, the fact lines and the planted kind of each wrong fact."""
    rng = random.Random(seed)
    cities = [f"city{i}" for i in range(max(10, people // 10))]
    countries = [f"country{i}" for i in range(max(3, people // 50))]
    orgs = [f"org{i}" for i in range(max(5, people // 20))]
    persons = [f"person{i}" for i in range(people)]
    types = [f"{iri(c)} <{A}> {iri('City')} ." for c in cities]
    types += [f"{iri(c)} <{A}> {iri('Country')} ." for c in countries]
    types += [f"{iri(o)} <{A}> {iri('Organisation')} ." for o in orgs]
    # One person in ten has no rdf:type: as in real KGs, the types are incomplete.
    types += [f"{iri(p)} <{A}> {iri(rng.choice(['Scientist', 'Artist', 'Person']))} ."
              for p in persons if rng.random() >= 0.1]
    facts: list[str] = []
    wrong: dict[int, str] = {}

    seen: set[str] = set()

    def add(line: str, kind: str | None = None) -> None:
        # A planted error never repeats a fact (nor another error): each is a new triple.
        if line in seen:
            return
        seen.add(line)
        if kind:
            wrong[len(facts)] = kind
        facts.append(line)

    for c in cities:
        add(f"{iri(c)} {iri('locatedIn')} {iri(rng.choice(countries))} .")
        add(f'{iri(c)} {iri("population")} "{rng.randint(1000, 9_000_000)}"^^<{XSD}integer> .')
    for p in persons:
        add(f"{iri(p)} {iri('bornIn')} {iri(rng.choice(cities))} .")
        add(f"{iri(p)} {iri('worksFor')} {iri(rng.choice(orgs))} .")
        add(f'{iri(p)} {iri("birthDate")} "19{rng.randint(10, 99)}-0{rng.randint(1, 9)}-1'
            f'{rng.randint(0, 9)}"^^<{XSD}date> .')
    # About 4 % of each kind: the KG stays mostly right, as real KGs are.
    for _ in range(max(2, people // 25)):
        add(f"{iri(rng.choice(orgs))} {iri('bornIn')} {iri(rng.choice(cities))} .", "domain")
        add(f"{iri(rng.choice(persons))} {iri('worksFor')} {iri(rng.choice(cities))} .",
            "range")
        add(f"{iri(rng.choice(persons))} <{A}> {iri('City')} .", "disjoint")
        add(f'{iri(rng.choice(persons))} {iri("birthDate")} "{rng.choice(cities)}" .',
            "datatype")
        add(f"{iri(rng.choice(persons))} {iri('bornIn')} {iri(rng.choice(cities))} .",
            "undetectable")
    return types, facts, wrong


def main() -> None:
    """Run the benchmark and print its JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--people", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    types, facts, wrong = build(args.people, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "onto.ttl").write_text(ONTOLOGY)
        kg = folder / "kg.nt"
        kg.write_text("\n".join(types + facts) + "\n")
        checked = folder / "facts.nt"
        checked.write_text("\n".join(facts) + "\n")
        rules = {"ontology": str(folder / "onto.ttl"), "kg": str(kg)}
        started = time.perf_counter()
        result = kgcheck.run(triples=checked, strategy="schema", out=folder / "schema",
                             settings=rules, concurrency=4)
        schema_seconds = time.perf_counter() - started
        index = {line: i for i, line in enumerate(facts)}
        refuted = {index[_line(r)] for r in _records(folder / "schema").values()
                   if r["label"] == "F"}
        labels = result.summary["verdicts"]
        truth = [i in wrong for i in range(len(facts))]
        said = [i in refuted for i in range(len(facts))]
        by_kind = {}
        for kind in KINDS:
            ids = [i for i, k in wrong.items() if k == kind]
            by_kind[kind] = {"planted": len(ids),
                             "caught": sum(1 for i in ids if i in refuted)}
            by_kind[kind]["recall"] = round(by_kind[kind]["caught"] / len(ids), 4)
        false_alarms = sorted(refuted - set(wrong))
        records = {_line(r): r for r in _records(folder / "schema").values()}
        typed_wrong = {facts[i].split(" ", 1)[0] for i, k in wrong.items() if k == "disjoint"}
        # Why correct facts were refuted: the rule, and whether the subject carries a
        # planted wrong type (a person typed a City breaks the domain of their own facts).
        alarm_causes = Counter(
            (records[facts[i]]["details"]["rule"],
             "subject has a planted wrong type" if facts[i].split(" ", 1)[0] in typed_wrong
             else "other") for i in false_alarms)
        # The rules alone, in this process: what the run's overhead hides.
        from kgcheck.data.triples import iter_triples
        from kgcheck.graphs.strategies.schema import SchemaContext, checker_of

        checker = checker_of(SchemaContext(**rules))
        loaded = list(iter_triples(checked))
        started = time.perf_counter()
        for fact in loaded:
            checker.check(fact)
        rules_seconds = time.perf_counter() - started
        with OpenAIStub(Behaviour(answer="T")) as stub:
            started = time.perf_counter()
            filtered = kgcheck.run(triples=checked, model="openai-compatible:stub-model",
                                   base_url=stub.url, out=folder / "dka", prefilter="schema",
                                   rules=rules, cache=False, concurrency=4)
            prefilter_seconds = time.perf_counter() - started
            requests = len(stub.calls())
    print(json.dumps({
        "kg": {"facts_checked": len(facts), "type_statements": len(types),
               "planted_errors": len(wrong), "kinds": dict(Counter(wrong.values()))},
        "schema": {
            "verdicts": labels,
            "t_verdicts": labels.get("T", 0),
            "precision": round(float(precision_score(truth, said, zero_division=0)), 4),
            "recall": round(float(recall_score(truth, said, zero_division=0)), 4),
            "recall_detectable": round(float(recall_score(
                [t for i, t in enumerate(truth) if wrong.get(i) != "undetectable"],
                [s for i, s in enumerate(said) if wrong.get(i) != "undetectable"],
                zero_division=0)), 4),
            "by_kind": by_kind,
            "false_alarms": len(false_alarms),
            "false_alarm_causes": {f"{rule}: {why}": n for (rule, why), n in
                                   alarm_causes.items()},
            "seconds": round(schema_seconds, 2),
            "facts_per_second": round(len(facts) / schema_seconds, 1),
            "rules_only_facts_per_second": round(len(loaded) / rules_seconds, 1),
        },
        "prefilter": {
            **filtered.summary["prefilter"],
            "requests_at_the_stub": requests,
            "calls_saved_share": round(filtered.summary["prefilter"]["calls_saved"]
                                       / len(facts), 4),
            "seconds": round(prefilter_seconds, 2),
        },
        "cannot_catch": "a wrong value of the right type (a person born in the wrong city, "
                        "still a city); domain and range errors about untyped terms (one "
                        "person in ten here); any error with no rule about its predicate",
    }, indent=1))


def _line(record: dict) -> str:
    rdf = record["rdf"]
    return f"{rdf['subject']} {rdf['predicate']} {rdf['object']} ."


def _records(folder: Path) -> dict[str, dict]:
    records = {}
    for line in (folder / "verdicts.jsonl").read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            records[record["fact_id"]] = record
    return records


if __name__ == "__main__":
    main()
