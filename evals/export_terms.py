"""Name a verdict's triple in RDF: the fact's own terms, or IRIs kgcheck mints.

Every export that writes triples (the RDF shapes of ``kgcheck.evals.export``, the changes of
``kgcheck.evals.patch``) names a fact's triple the same way, here: a fact read from RDF by
its own terms (``rdf`` in the verdict record); otherwise an IRI stays an IRI, and a term
that is none (YAGO and FactBench names, a CSV's strings) gets an IRI minted under
``urn:kgcheck:term:<dataset>:``, except the object of a triple whose subject is an IRI (a
DBpedia value such as ``221.0``), which becomes a literal.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import quote

import pyoxigraph as ox

from kgcheck.arguments import ArgumentMessage
from kgcheck.data.rdf_terms import TermError, comment_text, is_iri, triple_from_terms

__all__ = ["TERM", "ExportError", "mint_iri", "triple_terms"]

TERM = "urn:kgcheck:term:"


class ExportError(ArgumentMessage, ValueError):
    """A run folder or option that cannot be exported; the message says which and why."""


@lru_cache(maxsize=65536)
def mint_iri(dataset: str, term: str) -> ox.NamedNode:
    """Return the IRI kgcheck gives a non-IRI term of a dataset (percent-encoded UTF-8)."""
    space = quote(dataset or "local", safe="")
    return ox.NamedNode(f"{TERM}{space}:{quote(term, safe='')}")


def _from_ntriples(rdf: Any, where: str) -> tuple[Any, Any, Any]:
    if not isinstance(rdf, Mapping):
        raise ExportError(f"{where}: its rdf terms are not an object")
    try:
        return triple_from_terms(rdf)
    except TermError as exc:
        raise ExportError(f"{where}: {exc}") from None


def triple_terms(row: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """Return a row's triple as RDF terms: its own RDF terms, else IRIs and minted IRIs."""
    if row.get("rdf"):
        return _from_ntriples(row["rdf"], f"fact {comment_text(str(row['fact_id']))}")
    dataset = str(row.get("dataset") or "")
    subject, predicate, obj = (str(row.get(k) or "") for k in ("subject", "predicate", "object"))
    s = ox.NamedNode(subject) if is_iri(subject) else mint_iri(dataset, subject)
    p = ox.NamedNode(predicate) if is_iri(predicate) else mint_iri(dataset, predicate)
    if is_iri(obj):
        o: Any = ox.NamedNode(obj)
    elif is_iri(subject):
        # A KG of IRIs (DBpedia): a term that is no IRI is a value.
        o = ox.Literal(obj)
    else:
        o = mint_iri(dataset, obj)
    return s, p, o
