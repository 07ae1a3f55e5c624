"""Every RDF and XML parse in kgcheck goes through one gate (``kgcheck.data.rdf_input``).

The gate applies the guards (RDF/XML's entities bounded, no JSON-LD context loaded); a
reader added elsewhere would skip them. The source is scanned: a parser of RDF or XML
called outside the gate fails this test, unless it reads a line format (N-Triples,
N-Quads), which declares no entity and names no context.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kgcheck", "graphs", "evals", "retrievers")
GATE = ROOT / "kgcheck" / "data" / "rdf_input.py"
RDF_LIBRARIES = ("pyoxigraph", "rdflib", "pyshacl")
# Modules that parse XML (or HTML as XML) themselves; none may be imported outside the gate.
XML_LIBRARIES = ("xml", "lxml", "defusedxml", "html5lib", "xmltodict")
# Methods of pyoxigraph and rdflib that parse RDF or SPARQL results (XML among them).
PARSERS = {"parse", "bulk_load", "load", "parse_query_results", "parse_file"}
LINE_FORMATS = {"N_TRIPLES", "N_QUADS", "nt", "nquads", "ntriples"}


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _non_rdf_modules(tree: ast.AST) -> set[str]:
    """Return the names a module binds to kgcheck's own modules and to json."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kgcheck"):
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.asname or alias.name for alias in node.names
                      if alias.name == "json"}
    return names


def _line_format(call: ast.Call) -> bool:
    """Tell whether a call names a line format (N-Triples, N-Quads) as its format."""
    given = [k.value for k in call.keywords if k.arg == "format"] + call.args[1:2]
    for value in given:
        if isinstance(value, ast.Attribute) and value.attr in LINE_FORMATS:
            return True
        if isinstance(value, ast.Constant) and value.value in LINE_FORMATS:
            return True
    return False


def bypasses(source: str, where: str) -> Iterator[str]:
    """Yield each RDF or XML parse in a module's source that does not use the gate."""
    tree = ast.parse(source)
    imported = _imports(tree)
    for name in sorted(imported):
        if name.split(".")[0] in XML_LIBRARIES:
            yield f"{where}: imports {name} (read RDF/XML through kgcheck.data.rdf_input)"
    if not any(name.split(".")[0] in RDF_LIBRARIES for name in imported):
        return
    # Names bound to modules that parse no RDF (kgcheck's own, json): their parse() is theirs.
    others = _non_rdf_modules(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id in others):
            continue
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in PARSERS and not _line_format(node):
            yield f"{where}, line {node.lineno}: {name}() parses RDF outside the gate"


def package_files() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def test_no_rdf_or_xml_parse_outside_the_gate() -> None:
    found = [hit for path in package_files() if path != GATE
             for hit in bypasses(path.read_text(encoding="utf-8"),
                                 str(path.relative_to(ROOT)))]
    assert found == []


def test_the_gate_itself_parses() -> None:
    # The scan sees the gate's calls: it is not blind to the kind of call it looks for.
    assert len(list(bypasses(GATE.read_text(encoding="utf-8"), "gate"))) == 2
    assert GATE in set(package_files())


@pytest.mark.parametrize("source", [
    "import rdflib\ng = rdflib.Graph()\ng.parse('shapes.jsonld')\n",
    "import pyoxigraph as ox\nlist(ox.parse(path='onto.owl', format=ox.RdfFormat.RDF_XML))\n",
    "import pyoxigraph as ox\nox.Store().bulk_load(path='kg.rdf')\n",
    "from pyoxigraph import parse\nparse(b'', ox.RdfFormat.TURTLE)\n",
    "import xml.etree.ElementTree as ET\n",
    "from lxml import etree\n",
])
def test_a_new_reader_is_caught(source: str) -> None:
    assert list(bypasses(source, "new.py"))


def test_a_line_format_parse_is_allowed() -> None:
    source = ("import pyoxigraph as ox\n"
              "ox.parse('<a:b> <a:c> <a:d> .', format=ox.RdfFormat.N_TRIPLES)\n")
    assert list(bypasses(source, "ok.py")) == []
