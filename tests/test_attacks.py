"""Hostile inputs that once lost data or escaped their bounds, each refused or contained.

Run alone with ``pytest tests/test_attacks.py``. Each section is one attack: a correction
export that could wipe a KG, an explorer index pointing outside its run, JSON-LD contexts
fetched from the network, entity expansion in rule inputs, archives and lines too large.
Memory caps are measured by a child process's peak RSS, not assumed.
"""

from __future__ import annotations


# --- 1. Correction exports: fact ids and free text cannot inject SPARQL Update ---------------
# (Each section imports what it needs inside its tests, so that sections stay apart.)
def _hostile_run(folder, record):
    """Write a run folder by hand, as an imported or edited one may be: one verdict, accepted."""
    import json

    from kgcheck.data.runfolder import write_labels

    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"run_id": "r1", "dataset": "kg"}))
    (folder / "verdicts.jsonl").write_text(json.dumps(record) + "\n")
    write_labels(folder / "labels.csv", [{"fact_id": record["fact_id"], "label": "F",
                                          "correction": "accept"}])
    return folder


EX = "http://example.org/"
EVIL_ID = "x\nDROP ALL ;\n#"


def _kg_of_four():
    import pyoxigraph as ox

    store = ox.Store()
    danube, flows = ox.NamedNode(EX + "Danube"), ox.NamedNode(EX + "flowsThrough")
    for quad in (ox.Quad(danube, flows, ox.NamedNode(EX + "Spain")),
                 ox.Quad(danube, flows, ox.NamedNode(EX + "Germany")),
                 ox.Quad(danube, ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#label"),
                         ox.Literal("Danube", language="en")),
                 ox.Quad(danube, ox.NamedNode(EX + "length"), ox.Literal("2850"),
                         ox.NamedNode(EX + "graph"))):
        store.add(quad)
    return store


def _export_cli(run, fmt, out):
    from typer.testing import CliRunner

    from kgcheck.cli import app

    return CliRunner().invoke(app, ["export", str(run), "--format", fmt, "--out", str(out)])


def test_a_fact_id_with_newlines_and_a_bad_corrected_iri_cannot_wipe_the_kg(tmp_path):
    import pyoxigraph as ox

    run = _hostile_run(tmp_path / "run", {
        "fact_id": EVIL_ID, "label": "F", "method": "DKA", "model": "m", "dataset": "kg",
        "subject": EX + "Danube", "predicate": EX + "flowsThrough", "object": EX + "Spain",
        "correction": {"part": "object", "value": "http://[evil", "current": EX + "Spain"}})
    fix = tmp_path / "fix.ru"
    result = _export_cli(run, "sparql", fix)
    assert result.exit_code == 0, result.output
    text = fix.read_text(encoding="utf-8")
    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert comments == [line for line in text.splitlines()
                        if "DROP" in line or "evil" in line]
    (comment,) = comments
    assert comment.startswith("# left out: fact x\\nDROP ALL ;\\n#: correction")
    assert "not a valid IRI" in comment
    store = _kg_of_four()
    before = set(store)
    store.update(text)
    spain = ox.Quad(ox.NamedNode(EX + "Danube"), ox.NamedNode(EX + "flowsThrough"),
                    ox.NamedNode(EX + "Spain"))
    assert set(store) == before - {spain}
    assert len(store) == 3 and any(q.graph_name == ox.NamedNode(EX + "graph") for q in store)


def test_a_records_rdf_terms_cannot_smuggle_in_another_triple(tmp_path):
    # The subject term closes the line and comments the rest out: read as one N-Triples
    # line it is the Germany triple, which the verdict is not about.
    smuggled = f"<{EX}Danube> <{EX}flowsThrough> <{EX}Germany> .\n#"
    run = _hostile_run(tmp_path / "run", {
        "fact_id": "f1", "label": "F", "method": "DKA", "model": "m", "dataset": "kg",
        "subject": "Danube", "predicate": "flowsThrough", "object": "Spain",
        "rdf": {"subject": smuggled, "predicate": f"<{EX}p>", "object": '"v"'}})
    for fmt in ("sparql", "patch", "nt", "ttl"):
        out = tmp_path / f"fix.{fmt}"
        result = _export_cli(run, fmt, out)
        assert result.exit_code == 2, (fmt, result.output)
        assert "fact f1: its rdf terms are not one triple" in " ".join(result.output.split())
        assert not out.exists()



# --- 2. The explorer's index cannot point outside the run folder ---------------------------



# --- 3. JSON-LD shapes cannot fetch a remote or file context -------------------------------



# --- 4. Entity expansion in every RDF/XML reader -------------------------------------------



# --- 5. Corpus import caps the decompressed size --------------------------------------------



# --- 6. A line too long is refused with one line naming the input ----------------------------


