"""Corrections and KG changes: SPARQL Update and RDF Patch exports applied with pyoxigraph."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyoxigraph as ox
import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.graphs import explain
from kgcheck.review.session import ReviewError

runner = CliRunner()
XSD = "http://www.w3.org/2001/XMLSchema#"


def _run(out: Path, *args: str) -> dict[str, dict]:
    result = runner.invoke(app, ["run", *args, "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    return {r["fact_id"]: r for r in map(json.loads, (out / "verdicts.jsonl").read_text()
                                         .splitlines())}


def _export(run: Path, fmt: str, *extra: str) -> Path:
    target = run / f"export.{fmt}"
    result = runner.invoke(app, ["export", str(run), "--format", fmt, "--out", str(target),
                                 *extra])
    assert result.exit_code == 0, result.output
    return target


def _store(path: Path) -> ox.Store:
    store = ox.Store()
    store.load(path=str(path), format=ox.RdfFormat.N_TRIPLES)
    return store


def _triples(store: ox.Store) -> set[tuple[str, str, str]]:
    return {(str(q.subject), str(q.predicate), str(q.object)) for q in store}


def _apply_patch(store: ox.Store, patch: Path) -> None:
    """Apply an RDF Patch's D and A rows inside its one transaction."""
    lines = patch.read_text().splitlines()
    assert lines[1] == "TX ." and lines[-1] == "TC ."
    for line in lines[2:-1]:
        op, triple = line[0], line[2:]
        (quad,) = ox.parse(triple + "\n", format=ox.RdfFormat.N_TRIPLES)
        (store.remove if op == "D" else store.add)(ox.Quad(quad.subject, quad.predicate,
                                                           quad.object))


def _plain(run: Path) -> set[tuple[str, str, str]]:
    return _triples(_store(_export(run, "nt", "--rdf", "plain")))


def _one(run: Path, fact_id: str) -> tuple[str, str, str]:
    store = ox.Store()
    out = run / f"one-{fact_id}.nt"
    result = runner.invoke(app, ["export", str(run), "--format", "jsonl", "--out", str(out)])
    assert result.exit_code == 0
    for row in map(json.loads, out.read_text().splitlines()):
        if row["fact_id"] == fact_id:
            from kgcheck.evals.export import triple_terms

            s, p, o = triple_terms(row)
            store.add(ox.Quad(s, p, o))
    (found,) = _triples(store)
    return found


def test_sparql_update_of_a_yago_replay_run_removes_exactly_the_triples_judged_false(tmp_path):
    run = tmp_path / "yago"
    records = _run(run, "--dataset", "yago", "--limit", "40")
    judged_false = {fid for fid, r in records.items() if r["label"] == "F"}
    assert judged_false and len(judged_false) < len(records)
    everything = _plain(run)
    false_triples = {_one(run, fid) for fid in judged_false}
    store = _store(run / "export.nt")
    store.update(_export(run, "sparql").read_text())
    assert _triples(store) == everything - false_triples
    patched = _store(run / "export.nt")
    _apply_patch(patched, _export(run, "patch"))
    assert _triples(patched) == everything - false_triples
    refused = runner.invoke(app, ["export", str(run), "--format", "sparql", "--only", "F"])
    assert refused.exit_code == 2 and "--only does not apply" in refused.output


ANSWERS = [
    "F\nWrong part: object\nRight value: Alan Alda",       # accepted
    "F\nWrong part: colour\nRight value: blue",            # not a part
    "F\nWrong part: object\nRight value:",                 # no value
    "T\nWrong part: subject\nRight value: Someone",        # a correction of a true fact
    "F\nWrong part: subject\nRight value: Someone Else",   # edited by the person
    "F\nWrong part: object\nRight value: Z",               # the person says it is true
]


def _review(run: Path, decisions: list[tuple], refused: tuple | None = None) -> None:
    async def main() -> None:
        async with kgcheck.open_review(run) as review:
            for fact_id, label, *correction in decisions:
                await review.decide(fact_id, label, **(correction[0] if correction else {}))
            if refused:
                with pytest.raises(ReviewError, match=refused[1]):
                    await review.decide(refused[0], "F", correction="accept")

    asyncio.run(main())


def test_accepted_and_edited_corrections_are_inserted(tmp_path, scripted):
    run = tmp_path / "fix"
    records = _run(run, "--dataset", "yago", "--limit", "6", "--concurrency", "1", "--model",
                   scripted("fix", ANSWERS), "--set", "corrections=true")
    ids = list(records)
    first, bad_part, no_value, true_one, edited, overturned = (records[i] for i in ids)
    assert first["correction"] == {"part": "object", "value": "Alan Alda",
                                   "current": first["object"]}
    assert bad_part["correction"] is None
    assert bad_part["answer_problems"] == [explain.BAD_PART.format(part="colour")]
    assert no_value["answer_problems"] == [explain.BAD_VALUE.format(why="empty")]
    assert true_one["answer_problems"] == [explain.NOT_FALSE] and true_one["label"] == "T"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["with_correction"] == 3 and sum(summary["answer_problems"].values()) == 3

    _review(run, [(first["fact_id"], "F", {"correction": "accept"}),
                  (true_one["fact_id"], "F"),
                  (edited["fact_id"], "F", {"correction": "edit",
                                            "corrected_value": "Someone Elser"}),
                  (overturned["fact_id"], "T", {"correction": "reject"})],
            refused=(bad_part["fact_id"], "suggests no correction"))
    labels = (run / "labels.csv").read_text().splitlines()
    assert labels[0].endswith(",correction,corrected_value")
    assert any(line.endswith(",edit,Someone Elser") for line in labels)

    everything = _plain(run)
    deleted = {_one(run, r["fact_id"]) for r in (first, bad_part, no_value, true_one, edited)}
    s1, p1, _ = _one(run, first["fact_id"])
    _, p5, o5 = _one(run, edited["fact_id"])
    inserted = {(s1, p1, "<urn:kgcheck:term:YAGO:Alan_Alda>"),
                ("<urn:kgcheck:term:YAGO:Someone_Elser>", p5, o5)}
    store = _store(run / "export.nt")
    store.update(_export(run, "sparql").read_text())
    assert _triples(store) == (everything - deleted) | inserted
    patched = _store(run / "export.nt")
    _apply_patch(patched, _export(run, "patch"))
    assert _triples(patched) == (everything - deleted) | inserted


def test_literal_datatypes_and_language_tags_survive(tmp_path, scripted):
    kg = tmp_path / "kg.nt"
    kg.write_text(
        f'<http://ex.org/a> <http://ex.org/height> "1.80"^^<{XSD}decimal> .\n'
        '<http://ex.org/a> <http://ex.org/name> "Anna"@de .\n'
        '<http://ex.org/a> <http://ex.org/knows> <http://ex.org/b> .\n'
        '<http://ex.org/a> <http://ex.org/bornIn> <http://ex.org/Old_Town> .\n')
    answers = [f"F\nWrong part: object\nRight value: {v}"
               for v in ("1.75", "Anne", "http://ex.org/c", "New Town")]
    run = tmp_path / "lit"
    records = _run(run, "--triples", str(kg), "--concurrency", "1", "--model",
                   scripted("lit", answers), "--set", "corrections=true")
    _review(run, [(fid, "F", {"correction": "accept"}) for fid in records])
    store = _store(kg)  # the input KG itself
    store.update(_export(run, "sparql").read_text())
    assert _triples(store) == {
        ("<http://ex.org/a>", "<http://ex.org/height>", f'"1.75"^^<{XSD}decimal>'),
        ("<http://ex.org/a>", "<http://ex.org/name>", '"Anne"@de'),
        ("<http://ex.org/a>", "<http://ex.org/knows>", "<http://ex.org/c>"),
        ("<http://ex.org/a>", "<http://ex.org/bornIn>", "<http://ex.org/New_Town>"),
    }
