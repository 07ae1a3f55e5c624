"""Hostile inputs that once lost data or escaped their bounds, each refused or contained.

Run alone with ``pytest tests/integration/test_attacks.py``. Each section is one attack: a correction
export that could wipe a KG, an explorer index pointing outside its run, JSON-LD contexts
fetched from the network, entity expansion in rule inputs, archives and lines too large.
Memory caps are measured by a child process's peak RSS, not assumed.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app


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

def _peak_rss_mb(pid: int) -> float:
    """Return a live process's peak resident memory (VmHWM), in MB."""
    import re
    from pathlib import Path

    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)[1]) / 1024


def _plant_hostile_index(index, run, rows: dict[str, tuple[str, int, int]]) -> None:
    """Point facts at other files, offsets and lengths, in the index and in the run folder."""
    import shutil
    import sqlite3

    conn = sqlite3.connect(index)
    with conn:
        conn.executemany("UPDATE facts SET file = ?, offset = ?, length = ? WHERE fact_id = ?",
                         [(*where, fid) for fid, where in rows.items()])
    conn.close()
    # Where an index was once kept, in the run folder anyone writing it may edit.
    if index != run / ".view-index.sqlite":
        shutil.copyfile(index, run / ".view-index.sqlite")


def test_a_hostile_index_reads_nothing_outside_the_run_and_stays_small(tmp_path) -> None:
    import json

    import httpx

    from kgcheck.view.explorer import Explorer
    from tests.support.served import stop_served
    from tests.support.view_runs import fact_id, make_view_run, start_view

    run = make_view_run(tmp_path / "run", 20)
    secret = json.dumps({"fact_id": fact_id(0), "label": "T", "raw": "SECRET-OUTSIDE"})
    outside = tmp_path / "outside.jsonl"
    outside.write_text(secret + "\n")
    explorer = Explorer([run])
    index = explorer.runs[0].index
    explorer.close()
    size = (run / "verdicts.jsonl").stat().st_size
    _plant_hostile_index(index, run, {
        fact_id(0): ("../outside.jsonl", 0, len(secret)),
        fact_id(1): (str(outside), 0, len(secret)),
        fact_id(2): ("/dev/zero", 0, 400_000_000),
        fact_id(3): ("verdicts.jsonl", 0, 400_000_000),
        fact_id(4): ("verdicts.jsonl", size - 10, 100),
    })
    served = start_view(str(run))
    try:
        client = httpx.Client(base_url=served.base, headers={"X-View-Token": served.token},
                              timeout=60)
        assert client.get("/api/fact", params={"id": fact_id(5)}).status_code == 200
        before = _peak_rss_mb(served.proc.pid)
        for i in range(5):
            reply = client.get("/api/fact", params={"id": fact_id(i)})
            assert reply.status_code == 400, (i, reply.text[:300])
            assert "SECRET" not in reply.text
            assert "the index" in reply.json()["error"], reply.text
        grown = _peak_rss_mb(served.proc.pid) - before
        # The cap on one record is 16 MiB; 400 MB read from /dev/zero would show here.
        assert grown < 48, f"the server grew by {grown:.0f} MB"
        client.close()
    finally:
        stop_served(served)




# --- 3. JSON-LD shapes cannot fetch a remote or file context -------------------------------

RULES_KG = ("<http://ex.org/ada> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> "
            "<http://ex.org/Person> .\n<http://ex.org/ada> <http://ex.org/email> \"x\" .\n")


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[str]]]:
    """Serve a JSON-LD context on loopback and record every request made to it."""
    requests: list[str] = []

    class Context(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            requests.append(self.path)
            body = json.dumps({"@context": {"sh": "http://www.w3.org/ns/shacl#"}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/ld+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ctx.jsonld", requests
    finally:
        server.shutdown()
        server.server_close()


def rules_run(tmp_path: Path, key: str, rule_file: Path) -> list[str]:
    """Run the schema strategy with one rule input set; return its output's lines."""
    kg = tmp_path / "kg.nt"
    kg.write_text(RULES_KG)
    settings = ["--set", f"{key}={rule_file}"]
    if key != "kg":
        settings += ["--set", f"kg={kg}"]
    else:
        settings += ["--set", f"shapes={write_shapes(tmp_path)}"]
    result = CliRunner().invoke(app, ["run", "--triples", str(kg), "--strategy", "schema",
                                      *settings, "--out", str(tmp_path / "out"),
                                      "--no-progress"])
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    return [line for line in result.output.splitlines() if line.strip()]


def write_shapes(folder: Path) -> Path:
    path = folder / "plain-shapes.ttl"
    path.write_text("@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix : <http://ex.org/> .\n"
                    ":S a sh:NodeShape ; sh:targetClass :Person ; "
                    "sh:property [ sh:path :email ; sh:minCount 1 ] .\n")
    return path


def jsonld_shapes(context: object) -> str:
    return json.dumps({"@context": context, "@id": "http://ex.org/S", "@type": "sh:NodeShape",
                       "sh:targetClass": {"@id": "http://ex.org/Person"}})


@pytest.mark.parametrize("key", ["shapes", "ontology", "kg"])
def test_a_remote_jsonld_context_is_not_fetched(tmp_path: Path, recorder, key: str) -> None:
    url, requests = recorder
    rule_file = tmp_path / "rules.jsonld"
    rule_file.write_text(jsonld_shapes(url))
    for _ in range(2):  # at load and on a second run alike
        lines = rules_run(tmp_path, key, rule_file)
        assert len(lines) == 1 and str(rule_file) in lines[0], lines
        assert "refused: its JSON-LD @context names a document to load" in lines[0]
    assert requests == []


@pytest.mark.parametrize("context", ["file:///etc/passwd", ["file:///etc/hostname"],
                                     {"@import": "file:///etc/passwd"}])
def test_a_file_jsonld_context_is_refused_in_one_line(tmp_path: Path, context: object) -> None:
    rule_file = tmp_path / "shapes.jsonld"
    rule_file.write_text(jsonld_shapes(context))
    lines = rules_run(tmp_path, "shapes", rule_file)
    assert len(lines) == 1 and str(rule_file) in lines[0], lines
    assert "refused: its JSON-LD @context names a document to load" in lines[0]
    assert "root:" not in lines[0]  # nothing of the file named is shown


def test_an_inline_jsonld_context_is_read(tmp_path: Path, recorder) -> None:
    import rdflib

    from kgcheck.retrievers.rules import load_shapes

    rule_file = tmp_path / "inline.jsonld"
    rule_file.write_text(jsonld_shapes({"sh": "http://www.w3.org/ns/shacl#"}))
    shape = rdflib.URIRef("http://ex.org/S")
    sh = rdflib.Namespace("http://www.w3.org/ns/shacl#")
    assert (shape, rdflib.RDF.type, sh.NodeShape) in load_shapes(rule_file)
    assert recorder[1] == []



# --- 4. Entity expansion in every RDF/XML reader -------------------------------------------

# Nine nested entities of ten references each: a kilobyte that expands to 3 GB of text.
LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [\n<!ENTITY l0 "lol">\n'
          + "".join(f'<!ENTITY l{n} "{f"&l{n - 1};" * 10}">\n' for n in range(1, 10))
          + ']>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
          'xmlns:sh="http://www.w3.org/ns/shacl#" xmlns:ex="http://ex.org/">'
          '<rdf:Description rdf:about="http://ex.org/S"><ex:p>&l9;</ex:p>'
          '<sh:targetClass rdf:resource="http://ex.org/Person"/>'
          "</rdf:Description></rdf:RDF>\n")
CHILD_MEMORY = 3 * 1024 ** 3  # the cap the old readers ran into (SIGABRT at 2.2 GB)
CHILD_SECONDS = 60
PEAK_RSS = 400 * 1024 ** 2  # measured: 124 to 136 MB (the CLI, rdflib and pySHACL loaded)


# Starts the capped child and reports its exit status and peak RSS on stderr. Linux keeps a
# parent's peak RSS in a forked child across exec, so the child is forked from this small
# launcher rather than from the test process, which (an xdist worker that ran other tests)
# may hold a gigabyte.
LAUNCHER = """
import os, resource, subprocess, sys, threading
limit, seconds = int(sys.argv[1]), float(sys.argv[2])
child = subprocess.Popen(sys.argv[3:], stderr=subprocess.STDOUT,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
timer = threading.Timer(seconds, child.kill)
timer.start()
_, status, usage = os.wait4(child.pid, 0)
timer.cancel()
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, file=sys.stderr)
"""


def run_capped(args: list[str]) -> tuple[int, str, float, int]:
    """Run ``kgcheck ARGS`` in a child under a memory cap and a deadline.

    Returns its exit status, its output, the seconds it took and its own peak RSS in bytes
    (``os.wait4``: this child's figure, not the largest of every child the tests ran).
    """
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", LAUNCHER, str(CHILD_MEMORY), str(CHILD_SECONDS),
                           sys.executable, "-m", "kgcheck.cli", *args],
                          capture_output=True, env={**os.environ, "COLUMNS": "300"},
                          timeout=CHILD_SECONDS + 30)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    code, maxrss = (int(word) for word in done.stderr.decode().split()[-2:])
    return code, done.stdout.decode(), time.monotonic() - started, maxrss * 1024


@pytest.mark.parametrize("key", ["shapes", "ontology", "kg"])
def test_nested_entities_in_a_rule_input_are_refused(tmp_path: Path, key: str) -> None:
    bomb = tmp_path / f"{key}.rdf"
    bomb.write_text(LAUGHS)
    kg = tmp_path / "kg.nt"
    kg.write_text(RULES_KG)
    other = ["--set", f"kg={kg}"] if key != "kg" else [
        "--set", f"shapes={write_shapes(tmp_path)}"]
    code, output, seconds, peak = run_capped([
        "run", "--triples", str(kg), "--strategy", "schema", "--set", f"{key}={bomb}",
        *other, "--out", str(tmp_path / "out"), "--no-progress"])
    lines = [line for line in output.splitlines() if line.strip()]
    assert code > 0, output  # refused: an exit status, not a signal (SIGABRT, SIGKILL)
    assert len(lines) == 1 and str(bomb) in lines[0], output
    assert "refused: a DTD entity that is nested" in lines[0]
    assert seconds < 30, seconds
    assert peak < PEAK_RSS, f"peak RSS {peak / 1024 ** 2:.0f} MB"



# --- 5. Corpus import caps the decompressed size --------------------------------------------

class _Zeros:
    """A file of ``size`` zero bytes, read in pieces (never held whole)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def _corpus_archive(path: Path, members: dict[str, int]) -> Path:
    """Write a .tar.gz of rag_dataset/yago/<fact>/<n>.txt members of so many zero bytes."""
    import tarfile

    with tarfile.open(path, "w:gz", compresslevel=1) as archive:
        for name, size in members.items():
            info = tarfile.TarInfo(f"rag_dataset/yago/{name}")
            info.size = size
            archive.addfile(info, _Zeros(size))  # type: ignore[arg-type]
    return path


def test_corpus_import_refuses_a_member_that_inflates_past_the_cap(tmp_path: Path) -> None:
    from tests.support.child_peak import run_kgcheck

    member = 256 * 2**20
    bomb = _corpus_archive(tmp_path / "bomb.tar.gz",
                           {"f1/0.txt": 1000, "f1/1.txt": member, "f2/0.txt": 1000})
    assert bomb.stat().st_size < 2 * 2**20  # a small archive, a large member
    bad = run_kgcheck(["corpus", "import", "--dataset", "yago", "--from", str(bomb),
                       "--store", "bad.sqlite"], tmp_path,
                      {"KGCHECK_CORPUS_MAX_DOCUMENT_BYTES": str(2**20)})
    assert bad.code == 2
    (line,) = bad.stderr.strip().splitlines()
    assert "bomb.tar.gz: member 'rag_dataset/yago/f1/1.txt': decompresses to 268,435,456" in line
    assert "KGCHECK_CORPUS_MAX_DOCUMENT_BYTES" in line
    assert not (tmp_path / "bad.sqlite").exists()
    # Reading the member would hold its bytes and its text, each as large as the member.
    assert bad.peak_bytes < member, bad.peak_bytes


def test_corpus_import_refuses_a_source_past_the_total_cap(tmp_path: Path,
                                                           monkeypatch: Any) -> None:
    from kgcheck.retrievers.corpus import CorpusError
    from kgcheck.retrievers.store import import_corpus

    many = _corpus_archive(tmp_path / "many.tar.gz", {f"f{n}/0.txt": 2**20 for n in range(12)})
    monkeypatch.setenv("KGCHECK_CORPUS_MAX_BYTES", str(4 * 2**20))
    with pytest.raises(CorpusError, match=r"many\.tar\.gz: decompresses to more than the "
                       r"4,194,304-byte cap on a corpus source \(\$KGCHECK_CORPUS_MAX_BYTES"):
        import_corpus(many, "yago", tmp_path / "s.sqlite")
    assert not (tmp_path / "s.sqlite").exists()


def test_a_refused_import_leaves_an_existing_store_as_it_was(tmp_path: Path,
                                                            monkeypatch: Any) -> None:
    from kgcheck.retrievers.corpus import CorpusError
    from kgcheck.retrievers.store import CorpusStore, import_corpus

    good = _corpus_archive(tmp_path / "good.tar.gz", {"f1/0.txt": 10, "f1/1.txt": 10})
    bad = _corpus_archive(tmp_path / "bad.tar.gz",
                          {**{f"f{n}/0.txt": 10 for n in range(600)}, "f9/9.txt": 5000})
    store_path = tmp_path / "corpus.sqlite"
    import_corpus(good, "yago", store_path)[0].close()
    monkeypatch.setenv("KGCHECK_CORPUS_MAX_DOCUMENT_BYTES", "1000")
    # More documents than one batch come before the refusal: none of them is kept, and
    # --replace's deletion is undone.
    with pytest.raises(CorpusError, match="cap on one document"):
        import_corpus(bad, "yago", store_path, replace=True)
    store = CorpusStore(store_path)
    assert store.counts() == {"yago": (1, 2)}
    store.close()




# --- 6. A line too long is refused with one line naming the input ----------------------------

def _verdict_lines(path: Path, line: str) -> Path:
    """Write a JSON Lines verdicts file whose second line is ``line``."""
    path.write_text('{"fact_id": "f1", "label": "T"}\n' + line + "\n")
    return path


def test_import_refuses_a_line_past_the_cap_without_reading_it(tmp_path: Path) -> None:
    from tests.support.child_peak import run_kgcheck

    (tmp_path / "facts.jsonl").write_text(
        '{"id": "f1", "subject": "a", "predicate": "p", "object": "b", "label": "T"}\n'
        '{"id": "f2", "subject": "c", "predicate": "p", "object": "d", "label": "F"}\n')
    # One line of 200 MB: a model name that run.json, the summary and every verdict repeat.
    size = 200 * 2**20
    with (tmp_path / "huge.jsonl").open("w") as fh:
        fh.write('{"fact_id": "f1", "label": "T"}\n{"fact_id": "f2", "label": "F", "model": "')
        for _ in range(size // 2**20):
            fh.write("m" * 2**20)
        fh.write('"}\n')
    bad = run_kgcheck(["import", "huge.jsonl", "--triples", "facts.jsonl", "--out", "bad"],
                      tmp_path)
    assert bad.code == 2
    (line,) = bad.stderr.strip().splitlines()
    assert "huge.jsonl, line 2: longer than 1,048,576 bytes" in line
    assert "KGCHECK_MAX_LINE_BYTES" in line
    assert not (tmp_path / "bad" / "verdicts.jsonl").exists()
    # Reading the line would hold its bytes, its text and its JSON: three times the line.
    assert bad.peak_bytes < size, bad.peak_bytes


def test_a_lowered_line_cap_applies_to_triples_and_labels(tmp_path: Path,
                                                          monkeypatch: Any) -> None:
    from kgcheck.data.labels import LabelsError, read_labels
    from kgcheck.data.triples import TriplesError, read_triples

    row = '{"id": "f1", "subject": "a", "predicate": "p", "object": "%s"}' % ("o" * 5000)
    (tmp_path / "facts.jsonl").write_text('{"id": "f0", "subject": "a", "predicate": "p", '
                                          '"object": "b"}\n' + row + "\n")
    (tmp_path / "labels.csv").write_text("fact_id,label\nf0,T\nf1,%s\n" % ("T" * 5000))
    assert len(read_triples(tmp_path / "facts.jsonl")) == 2
    monkeypatch.setenv("KGCHECK_MAX_LINE_BYTES", "4096")
    with pytest.raises(TriplesError, match=r"facts\.jsonl, line 2: longer than 4,096 bytes"):
        read_triples(tmp_path / "facts.jsonl")
    with pytest.raises(LabelsError, match=r"labels\.csv, line 3: longer than 4,096 bytes"):
        read_labels(tmp_path / "labels.csv")


def test_a_model_name_past_the_name_cap_is_refused(tmp_path: Path) -> None:
    from kgcheck.runs.importing import VerdictImportError, read_verdict_file

    path = _verdict_lines(tmp_path / "v.jsonl",
                          '{"fact_id": "f2", "label": "F", "model": "%s"}' % ("m" * 5000))
    with pytest.raises(VerdictImportError, match=r"v\.jsonl, line 2: the model name is 5,000 "
                       r"characters long, more than 1,000 \(\$KGCHECK_MAX_NAME_CHARS"):
        read_verdict_file(path)
    answer = tmp_path / "YAGO_open-source_m_dka.json"
    answer.write_text('[{"id": "f1", "response": "T", "full_answer": "%s"}]' % ("x" * 200_001))
    with pytest.raises(VerdictImportError, match=r"record 0: the answer is 200,001 characters"):
        read_verdict_file(answer)



