"""SPARQL endpoints as input: a real Virtuoso, paging, names, retries and clear failures."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.data.sparql import SparqlClient, SparqlError, SparqlReader
from kgcheck.data.triples import read_triples
from tests.support.virtuoso import Virtuoso, load

runner = CliRunner()
GRAPH = "http://kgcheck.test/people"
OTHER = "http://kgcheck.test/other"
XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"


def _kg(folder: Path) -> Path:
    lines = []
    for i in range(23):
        person = f"<http://ex.org/person{i:02d}>"
        lines.append(f"{person} <http://ex.org/age> \"{20 + i}\"^^<{XSD_INT}> .")
        lines.append(f"{person} <http://www.w3.org/2000/01/rdf-schema#label> \"Person {i}\"@en .")
        if i % 2:
            lines.append(f"{person} <http://ex.org/motto> \"motto {i}\"@fr .")
    lines.append("<http://ex.org/person00> <http://ex.org/knows> <http://ex.org/person01> .")
    path = folder / "people.nt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def people(virtuoso: Virtuoso, tmp_path_factory: pytest.TempPathFactory) -> tuple[Virtuoso, Path]:
    path = _kg(tmp_path_factory.mktemp("kg"))
    load(virtuoso, path, GRAPH)
    other = path.with_name("other.nt")
    other.write_text("<http://ex.org/x> <http://ex.org/p> <http://ex.org/y> .\n")
    load(virtuoso, other, OTHER)
    return virtuoso, path


def test_paged_read_keeps_terms_ids_and_names(people) -> None:
    server, path = people
    reader = SparqlReader(server.url, graph=GRAPH, page_size=7)
    facts = reader.named(list(reader))
    from_file = {f.id: f for f in read_triples(path)}
    # 23 ages, 11 mottos, 1 knows; labels are names, not facts: the same ids as from the file.
    assert len(facts) == 35 and {f.id for f in facts} == set(from_file)
    for fact in facts:
        assert fact.rdf == from_file[fact.id].rdf
        assert fact.names == from_file[fact.id].names
    knows = next(f for f in facts if f.predicate == "http://ex.org/knows")
    assert knows.readable_terms() == ("Person 0", "knows", "Person 1")
    assert reader.exhausted


def test_where_pattern_and_sample_through_the_api(people) -> None:
    server, _ = people
    mottos = kgcheck.read_sparql(server.url, graph=GRAPH,
                                 where="?s <http://ex.org/motto> ?o . ?s ?p ?o", page_size=4)
    assert len(mottos) == 11 and all(f.rdf["object"].endswith('"@fr') for f in mottos)
    assert all(f.names and f.names["subject"].startswith("Person ") for f in mottos)
    first = kgcheck.read_sparql(server.url, graph=GRAPH, sample=5, seed=11, page_size=6)
    again = kgcheck.read_sparql(server.url, graph=GRAPH, sample=5, seed=11, page_size=10)
    assert [f.id for f in first] == [f.id for f in again] and len(first) == 5
    # Without --graph every graph is read.
    assert any(f.subject == "http://ex.org/x" for f in kgcheck.read_sparql(server.url))


def test_cli_run_over_an_endpoint(people, tmp_path, scripted) -> None:
    server, _ = people
    spec = scripted("sparql-run", ["T"] * 8)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--sparql", server.url, "--graph", GRAPH, "--sample", "8",
                                 "--stratify", "predicate", "--model", spec, "--concurrency", "1",
                                 "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert len(records) == 8 and all(r["rdf"]["subject"].startswith("<http://ex.org/person") for r in records)
    predicates = sorted(r["rdf"]["predicate"] for r in records)
    assert predicates.count("<http://ex.org/age>") == 5 and predicates.count("<http://ex.org/motto>") == 3
    assert json.loads((out / "run.json").read_text())["source"] == f"{server.url} <{GRAPH}>"


def test_pages_past_virtuosos_sorted_row_limit(people, tmp_path) -> None:
    # Virtuoso refuses ORDER BY ... OFFSET past 10,000 rows; the subquery form pages on.
    server, _ = people
    path = tmp_path / "many.nt"
    path.write_text("".join(f'<http://ex.org/m{i}> <http://ex.org/n> "{i}" .\n' for i in range(12_000)))
    load(server, path, "http://kgcheck.test/many")
    facts = list(SparqlReader(server.url, graph="http://kgcheck.test/many", page_size=5000))
    assert len(facts) == 12_000 and {f.id for f in facts} == {f.id for f in read_triples(path)}


def test_a_refused_query_names_the_endpoint(people) -> None:
    server, _ = people
    with pytest.raises(SparqlError, match=rf"SPARQL endpoint {server.url} refused the query: HTTP 400"):
        SparqlClient(server.url, retries=0).select("SELECT nonsense")
    result = runner.invoke(app, ["run", "--sparql", server.url, "--where", "?s ?p ?o . FILTER(", "--model",
                                 "scripted:x", "--no-progress"])
    assert result.exit_code == 2 and "refused the query" in result.output and "Traceback" not in result.output


class _Bad(BaseHTTPRequestHandler):
    """An endpoint that answers HTML, hangs, or fails twice with 503 before answering."""

    calls: dict[str, int] = {}

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Bad.calls[self.path] = _Bad.calls.get(self.path, 0) + 1
        if self.path == "/hang":
            time.sleep(1.5)
        if self.path == "/flaky" and _Bad.calls[self.path] > 2:
            body, kind, status = json.dumps({"head": {"vars": ["s", "p", "o"]}, "results": {"bindings": [
                {"s": {"type": "uri", "value": "http://e.org/a"}, "p": {"type": "uri", "value": "http://e.org/p"},
                 "o": {"type": "literal", "value": "1", "datatype": XSD_INT}}]}}), "application/sparql-results+json", 200
        elif self.path == "/flaky":
            body, kind, status = "busy", "text/plain", 503
        else:
            body, kind, status = "<html><body>Welcome</body></html>", "text/html", 200
        data = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up waiting


@pytest.fixture
def bad_endpoint() -> Iterator[str]:
    _Bad.calls.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Bad)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_html_and_timeouts_are_retried_then_named(bad_endpoint, tmp_path) -> None:
    client = SparqlClient(f"{bad_endpoint}/page", retries=2, backoff=0.01)
    with pytest.raises(SparqlError, match=rf"{bad_endpoint}/page did not answer after 3 tries: an HTML page"):
        client.select("SELECT * WHERE { ?s ?p ?o }")
    assert _Bad.calls["/page"] == 3
    slow = SparqlClient(f"{bad_endpoint}/hang", timeout=0.3, retries=1, backoff=0.01)
    with pytest.raises(SparqlError, match=r"/hang did not answer after 2 tries: no answer within 0.3 s"):
        slow.select("SELECT * WHERE { ?s ?p ?o }")
    result = runner.invoke(app, ["run", "--sparql", f"{bad_endpoint}/page", "--model", "scripted:x",
                                 "--no-progress", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and f"{bad_endpoint}/page did not answer" in " ".join(result.output.split())


def test_transient_failures_are_retried(bad_endpoint) -> None:
    facts = list(SparqlReader(SparqlClient(f"{bad_endpoint}/flaky", backoff=0.01)))
    assert _Bad.calls["/flaky"] == 3
    assert [f.rdf["object"] for f in facts] == [f'"1"^^<{XSD_INT}>']


def test_async_select(bad_endpoint) -> None:
    rows = asyncio.run(SparqlClient(f"{bad_endpoint}/flaky", backoff=0.01).aselect("SELECT * {}"))
    assert rows[0]["o"]["value"] == "1"


def test_an_endpoint_key_stays_out_of_messages(bad_endpoint) -> None:
    client = SparqlClient(f"{bad_endpoint}/page?key=s3cret", retries=0)
    with pytest.raises(SparqlError) as err:
        client.select("SELECT * WHERE { ?s ?p ?o }")
    assert f"{bad_endpoint}/page did not answer" in str(err.value) and "s3cret" not in str(err.value)


MALFORMED = json.dumps({"results": {"bindings": [{"s": 1, "p": None}]}}).encode()
GOOD_ROW = {"s": {"type": "uri", "value": "http://e.org/a"}, "p": {"type": "uri", "value": "http://e.org/p"},
            "o": {"type": "uri", "value": "http://e.org/b"}}


@pytest.mark.parametrize("answers", [{"ORDER BY": MALFORMED}, {"VALUES ?s": MALFORMED}],
                         ids=["triples query", "names query"])
def test_malformed_bindings_are_one_line_naming_the_endpoint_and_row(answers, tmp_path, scripted) -> None:
    from tests.support.stubs.sparql import SparqlStub

    good = json.dumps({"results": {"bindings": [GOOD_ROW]}}).encode()
    with SparqlStub(answers={"ORDER BY": good, **answers}) as endpoint:
        reader = SparqlReader(SparqlClient(endpoint.url, retries=0))
        with pytest.raises(SparqlError) as failed:
            reader.named(list(reader))
        message = str(failed.value)
        assert message == (f'SPARQL endpoint {endpoint.url} answered a malformed row 1: {{"s": 1, "p": null}} '
                           '(each variable must be bound to {"type": ..., "value": "..."})')
        result = runner.invoke(app, ["run", "--sparql", endpoint.url, "--model", "scripted:x", "--no-progress",
                                     "--out", str(tmp_path / "r")])
    output = " ".join(result.output.split())
    assert result.exit_code == 2 and "answered a malformed row 1" in output and "Traceback" not in output


def test_a_term_pyoxigraph_refuses_names_the_row() -> None:
    from tests.support.stubs.sparql import SparqlStub

    bad_iri = {**GOOD_ROW, "o": {"type": "uri", "value": "not an iri"}}
    with SparqlStub(answers={"ORDER BY": json.dumps({"results": {"bindings": [bad_iri]}}).encode()}) as endpoint:
        with pytest.raises(SparqlError, match=rf"SPARQL endpoint {endpoint.url}: row 1 .*not an iri.* lacks or "
                                              r"mangles \?s \?p \?o"):
            list(SparqlReader(endpoint.url))
