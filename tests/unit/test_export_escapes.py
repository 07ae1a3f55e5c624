"""Random fact ids, reasons, names and corrected values never change what an export says.

Each example writes a run folder by hand (as an imported or edited one may be) whose free
text is drawn by hypothesis: newlines, quotes, ``#``, ``>``, control and format characters.
The generated SPARQL Update, RDF Patch, N-Triples and Turtle are parsed back: they hold the
intended triples and nothing else.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pyoxigraph as ox
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kgcheck.data.rdf_terms import comment_text
from kgcheck.data.runfolder import read_labels, read_verdicts, write_labels
from kgcheck.evals.export import KGC, MAX_REASON_CHARS, RDFS, export_run, rows, triple_terms
from kgcheck.evals.patch import changes

EX = "http://example.org/"
# Any text but lone surrogates (not Unicode text at all).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
# What a labels.csv cell keeps as it is: no NUL, no bare CR, no blanks at its ends.
CELL = st.text(st.characters(exclude_characters="\x00\r", exclude_categories=("Cs",)),
               max_size=40)
ID = CELL.map(str.strip).filter(bool)
VALUE = st.one_of(TEXT, st.just("http://[evil"), TEXT.map(lambda t: "http://ex.org/" + t),
                  TEXT.map(lambda t: "urn:" + t))
FACT = st.fixed_dictionaries({
    "id": ID, "subject": TEXT, "object": TEXT, "label": st.sampled_from(["T", "F", "NA"]),
    "reason": TEXT, "name": TEXT, "language": st.sampled_from([None, "en", "de-AT"]),
    "part": st.sampled_from(["subject", "object"]), "value": VALUE, "note": CELL,
    "as_rdf": st.booleans()})


def _record(n: int, fact: dict) -> dict:
    record = {"fact_id": fact["id"], "label": fact["label"], "method": "DKA",
              "model": "replay:m", "dataset": "kg", "run_id": "r1", "raw": fact["reason"],
              "rationale": fact["reason"] or None, "subject": f"s{n} {fact['subject']}",
              "predicate": "p", "object": fact["object"],
              "names": {"subject": fact["name"]} if fact["name"] else None,
              "correction": {"part": fact["part"], "value": fact["value"], "current": "x"}}
    if fact["as_rdf"]:
        literal = ox.Literal(fact["object"], language=fact["language"]) if fact["language"] \
            else ox.Literal(fact["object"])
        record["rdf"] = {"subject": str(ox.NamedNode(f"{EX}s{n}")),
                         "predicate": str(ox.NamedNode(EX + "p")), "object": str(literal)}
        if fact["name"]:
            name = ox.Literal(fact["name"], language=fact["language"]) if fact["language"] \
                else ox.Literal(fact["name"])
            record["name_terms"] = {"subject": str(name)}
    return record


def _run(folder: Path, facts: list[dict]) -> Path:
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"run_id": "r1", "dataset": "kg"}))
    with (folder / "verdicts.jsonl").open("w", encoding="utf-8") as fh:
        for n, fact in enumerate(facts):
            fh.write(json.dumps(_record(n, fact)) + "\n")
    write_labels(folder / "labels.csv", [
        {"fact_id": f["id"], "label": "F", "note": f["note"], "correction": "accept"}
        for f in facts if f["label"] == "F"])
    return folder


def _intended(folder: Path):
    """Return the changes as kgcheck decides them, before any text is written."""
    every = read_verdicts(folder)
    review = read_labels(folder / "labels.csv")
    return changes(rows(every.values(), review), every, review), every


def _sentinels() -> list[ox.Quad]:
    return [ox.Quad(ox.NamedNode(EX + "keep"), ox.NamedNode(EX + "p"), ox.Literal("kept")),
            ox.Quad(ox.NamedNode(EX + "keep"), ox.NamedNode(EX + "p"), ox.Literal("graph"),
                    ox.NamedNode(EX + "g"))]


def _check_sparql(folder: Path, found, every) -> None:
    out = folder / "fix.ru"
    export_run(folder, "sparql", out)
    text = out.read_text(encoding="utf-8")
    # Lines end at LF alone: U+0085 or U+2028 inside a literal are the literal's own text.
    comments = [line for line in text.split("\n") if line.startswith("#")]
    assert comments == [f"# left out: {comment_text(s)}" for s in found.skipped]
    store = ox.Store()
    fact_triples = [ox.Quad(*triple_terms(row)) for row in rows(every.values(), {})]
    for quad in [*fact_triples, *_sentinels()]:
        store.add(quad)
    expected = set(store)
    expected -= {ox.Quad(t.subject, t.predicate, t.object) for t in found.delete}
    expected |= {ox.Quad(t.subject, t.predicate, t.object) for t in found.insert}
    store.update(text)
    assert set(store) == expected


def _check_patch(folder: Path, found) -> None:
    out = folder / "fix.rdfp"
    export_run(folder, "patch", out)
    lines = out.read_text(encoding="utf-8").rstrip("\n").split("\n")
    assert lines[0].startswith("H id <urn:uuid:") and lines[1] == "TX ." and lines[-1] == "TC ."
    parsed: dict[str, list[ox.Triple]] = {"D": [], "A": []}
    for line in lines[2:-1]:
        (quad,) = ox.parse(line[2:] + "\n", format=ox.RdfFormat.N_TRIPLES)
        parsed[line[0]].append(ox.Triple(quad.subject, quad.predicate, quad.object))
    assert parsed == {"D": found.delete, "A": found.insert}


def _check_rdf(folder: Path, every: dict) -> None:
    for fmt, rdf_format in (("nt", ox.RdfFormat.N_TRIPLES), ("ttl", ox.RdfFormat.TURTLE)):
        out = folder / f"verdicts.{fmt}"
        export_run(folder, fmt, out)
        graph = list(ox.parse(path=str(out), format=rdf_format))
        ids = [q.object.value for q in graph if q.predicate.value == KGC + "factId"]
        assert sorted(ids) == sorted(every)
        reasons = {q.object.value for q in graph if q.predicate.value == KGC + "reason"}
        assert reasons == {str(r.get("raw")).strip()[:MAX_REASON_CHARS] for r in every.values()
                           if str(r.get("raw")).strip()}
        labels = {q.object for q in graph if q.predicate.value == RDFS + "label"
                  and q.subject.value.startswith((EX, "urn:kgcheck:term:"))}
        names = {ox.Literal(r["names"]["subject"]) for r in every.values()
                 if r.get("names") and not r.get("name_terms")}
        names |= {next(iter(ox.parse(f"<urn:s> <urn:p> {r['name_terms']['subject']} .\n",
                                     format=ox.RdfFormat.N_TRIPLES))).object
                  for r in every.values() if r.get("name_terms")}
        assert names <= labels  # each name, with its language tag where it has one
        plain = folder / f"plain.{fmt}"
        export_run(folder, fmt, plain, shape="plain")
        assert {ox.Triple(q.subject, q.predicate, q.object)
                for q in ox.parse(path=str(plain), format=rdf_format)} == {
            ox.Triple(*triple_terms(row)) for row in rows(every.values(), {})}


@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FACT, min_size=1, max_size=4, unique_by=lambda f: f["id"]))
# Line separators other than LF inside a value: the value's own text, no line break.
@example([{"id": "0", "subject": "", "object": "", "label": "F", "reason": "", "name": "",
           "language": None, "part": "object", "value": "0\x850\u20280", "note": "",
           "as_rdf": True}])
def test_random_free_text_never_changes_what_an_export_says(facts: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = _run(Path(tmp) / "run", facts)
        found, every = _intended(folder)
        assert len(every) == len(facts)
        _check_sparql(folder, found, every)
        _check_patch(folder, found)
        _check_rdf(folder, every)


def test_comment_text_keeps_any_text_on_one_readable_line() -> None:
    text = "a\nb\rc\u2028d\u0085e\u202ef\\g é 東"
    assert comment_text(text) == "a\\nb\\rc\\u2028d\\u0085e\\u202Ef\\\\g é 東"
    assert len(f"# {comment_text(text)}".splitlines()) == 1
