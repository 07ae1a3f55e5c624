"""Refuse SHACL shapes whose SPARQL would reach outside the data graph pySHACL is given.

A SHACL-SPARQL constraint (``sh:select``, ``sh:ask``), a SPARQL-based target or a SHACL
rule (``sh:construct``) is a query that rdflib runs on the subject's description. A
``SERVICE`` calls a remote endpoint, ``FROM``/``FROM NAMED`` load graphs by IRI (from the
network or a file) and ``GRAPH`` asks for named graphs the description has none of (pySHACL
then fails on every fact). Each query is parsed with rdflib's SPARQL parser before the
first fact is checked, and a shape holding one of these is refused with one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["OUTSIDE", "QUERY_PREDICATES", "outside_reach"]

SH = "http://www.w3.org/ns/shacl#"
# The SHACL terms whose object is a SPARQL query run by pySHACL.
QUERY_PREDICATES = tuple(SH + name for name in ("select", "ask", "construct"))
# rdflib's names of the parts of a query that reach past the data graph, and what they do.
OUTSIDE = {
    "ServiceGraphPattern": "SERVICE calls a remote endpoint",
    "DatasetClause": "FROM loads a graph by its IRI",
    "GraphGraphPattern": "GRAPH reads named graphs, which the data graph has none of",
}
# pySHACL puts a property shape's path in place of $PATH before it parses the query.
_PATH_STAND_IN = "<urn:kgcheck:path>"


def _parts(node: Any) -> Iterator[str]:
    """Yield the names of the parts of a parsed query (rdflib's ``CompValue`` tree)."""
    from pyparsing import ParseResults
    from rdflib.plugins.sparql.parserutils import CompValue

    todo = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, CompValue):
            yield current.name
            todo.extend(current.values())
        elif isinstance(current, ParseResults | list | tuple):
            todo.extend(current)
        elif isinstance(current, dict):
            todo.extend(current.values())


def outside_reach(query: str) -> str | None:
    """Return why a shape's query reaches outside the data graph (None: it stays inside).

    Raises:
        ValueError: The text is no SPARQL query (rdflib's parser error, in one line).

    """
    from rdflib.plugins.sparql.parser import parseQuery

    text = query.replace("$PATH", _PATH_STAND_IN)
    try:
        tree = parseQuery(text)
    except Exception as exc:  # noqa: BLE001 - pyparsing's errors have no common base here
        raise ValueError(" ".join(str(exc).split())[:200]) from None
    for name in _parts(tree):
        if name in OUTSIDE:
            return OUTSIDE[name]
    return None
