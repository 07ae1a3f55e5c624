"""The KG's own rules as evidence: check a fact against an RDFS/OWL ontology and SHACL shapes.

A fact is checked against what the rules can refute, never confirmed by them:

- ``rdfs:domain`` and ``rdfs:range`` (classes and datatypes), also through
  ``owl:inverseOf`` (the inverse's domain constrains the object) and
  ``owl:SymmetricProperty`` (the domain constrains the object too). A typed term none of
  whose types is the expected class (or a subclass of it) breaks the rule when the KG's
  types are complete (``types_complete``, the closed world of a validator); otherwise only
  a type ``owl:disjointWith`` the expected class does;
- ``owl:disjointWith``: an ``rdf:type`` fact that gives its subject a class disjoint with
  one it already has;
- ``owl:AsymmetricProperty`` and ``owl:IrreflexiveProperty``, with ``owl:TransitiveProperty``
  for the chains of the KG (a cycle back to the subject breaks them);
- ``owl:FunctionalProperty``: a second, different value is reported (one of the two is
  wrong, the rule cannot tell which), as transitive chains, symmetric and inverse
  statements that entail the fact are: findings that decide nothing;
- SHACL shapes, run with pySHACL over the subject's description; a result about the fact's
  predicate and object refutes it.

Types come from an RDF file of the KG (``rdf:type``, closed over ``rdfs:subClassOf``),
read into an in-memory pyoxigraph store, or from a SPARQL endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import pyoxigraph as ox

from kgcheck.data.facts import Fact
from kgcheck.data.rdf_input import load_rdf, parse_rdf, rdf_file_format
from kgcheck.data.sources import TriplesError, open_binary
from kgcheck.data.sparql import SparqlClient, SparqlError, binding_term
from kgcheck.retrievers.shape_queries import QUERY_PREDICATES, outside_reach

__all__ = ["Finding", "KGTerms", "Ontology", "RuleChecker", "RulesError", "SparqlTerms",
           "fact_terms", "load_ontology", "load_shapes", "open_checker", "short"]

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
XSD = "http://www.w3.org/2001/XMLSchema#"
SH = "http://www.w3.org/ns/shacl#"
RDF_TYPE = RDF + "type"
TOP_CLASSES = {OWL + "Thing", RDFS + "Resource", RDFS + "Class"}
RULE_TERMS = {RDFS + "domain", RDFS + "range", OWL + "disjointWith", OWL + "inverseOf"}
PROPERTY_KINDS = {k: OWL + k for k in ("FunctionalProperty", "TransitiveProperty",
                                       "SymmetricProperty", "AsymmetricProperty",
                                       "IrreflexiveProperty")}
# The datatypes a literal of one datatype also belongs to (XSD's derivation tree, in part).
DATATYPE_PARENTS = {
    XSD + "int": {XSD + "integer", XSD + "decimal", XSD + "long"},
    XSD + "long": {XSD + "integer", XSD + "decimal"},
    XSD + "integer": {XSD + "decimal"},
    XSD + "nonNegativeInteger": {XSD + "integer", XSD + "decimal"},
    XSD + "positiveInteger": {XSD + "nonNegativeInteger", XSD + "integer", XSD + "decimal"},
    XSD + "float": {XSD + "double"},
    RDF + "langString": {XSD + "string"},
}
# Lexical forms of common datatypes: a literal that is not one is ill-typed.
LEXICAL = {
    XSD + "integer": r"[+-]?\d+",
    XSD + "int": r"[+-]?\d+",
    XSD + "long": r"[+-]?\d+",
    XSD + "nonNegativeInteger": r"\+?\d+",
    XSD + "positiveInteger": r"\+?0*[1-9]\d*",
    XSD + "decimal": r"[+-]?(\d+(\.\d*)?|\.\d+)",
    XSD + "double": r"[+-]?((\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|INF|NaN)|-INF",
    XSD + "float": r"[+-]?((\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|INF|NaN)|-INF",
    XSD + "boolean": r"true|false|1|0",
    XSD + "date": r"-?\d{4,}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])(Z|[+-]\d{2}:\d{2})?",
    XSD + "dateTime": r"-?\d{4,}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):"
                      r"[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]\d{2}:\d{2})?",
    XSD + "gYear": r"-?\d{4,}(Z|[+-]\d{2}:\d{2})?",
}
STRINGS = {XSD + "string", RDF + "langString"}


class RulesError(ValueError):
    """An ontology, shapes file or type source that cannot be used; one line says why."""


@dataclass(frozen=True)
class Finding:
    """What one rule says about a fact: which rule, which term, what was found.

    ``refutes`` is True when the rule shows the fact is false; other findings are evidence
    that decides nothing (a conflicting functional value, an entailing chain).
    """

    rule: str
    term: str
    found: str
    refutes: bool
    text: str

    def as_dict(self) -> dict[str, Any]:
        """Return the finding as a JSON-plain dict (a verdict's details)."""
        return {"rule": self.rule, "term": self.term, "found": self.found,
                "refutes": self.refutes, "text": self.text}


def short(term: str) -> str:
    """Render an IRI with its usual prefix (``rdfs:domain``), else in angle brackets."""
    for prefix, space in (("rdf", RDF), ("rdfs", RDFS), ("owl", OWL), ("xsd", XSD),
                          ("sh", SH)):
        if term.startswith(space):
            return f"{prefix}:{term[len(space):]}"
    return f"<{term}>"


def _show(term: Any) -> str:
    if isinstance(term, ox.NamedNode):
        return short(term.value)
    if isinstance(term, ox.Literal):
        return f'"{term.value}"^^{short(term.datatype.value)}'
    return str(term)


def _read_rdf(path: Path, what: str) -> list[ox.Triple]:
    fmt = _rdf_format(path, what)
    try:
        with open_binary(path) as fh:
            return [q.triple for q in parse_rdf(fh, fmt, path)]
    except TriplesError as exc:
        raise RulesError(str(exc)) from None  # a guard's refusal, naming the file
    except (SyntaxError, ValueError, OSError, EOFError) as exc:
        message = " ".join(str(exc).split())
        raise RulesError(f"{path}: malformed {what}: {message}") from None


def _rdf_format(path: Path, what: str) -> ox.RdfFormat:
    if not path.is_file():
        raise RulesError(f"{path}: {what} file not found")
    fmt = rdf_file_format(path)
    if fmt is None:
        raise RulesError(f"{path}: unknown RDF format {path.suffix!r} for the {what} (use "
                         ".ttl, .nt, .rdf/.owl or .jsonld)")
    return fmt


@dataclass
class Ontology:
    """The rules of an RDFS/OWL ontology, indexed by property and class."""

    source: str = ""
    supers: dict[str, set[str]] = field(default_factory=dict)
    domain: dict[str, set[str]] = field(default_factory=dict)
    range: dict[str, set[str]] = field(default_factory=dict)
    disjoint: dict[str, set[str]] = field(default_factory=dict)
    inverse: dict[str, set[str]] = field(default_factory=dict)
    kinds: dict[str, set[str]] = field(default_factory=dict)
    datatypes: set[str] = field(default_factory=set)
    typed: list[ox.Triple] = field(default_factory=list)

    def is_(self, prop: str, kind: str) -> bool:
        """Tell whether a property is declared of a kind (``FunctionalProperty``, ...)."""
        return prop in self.kinds.get(kind, set())

    def closure(self, classes: Iterable[str]) -> set[str]:
        """Return the classes and all their superclasses (``rdfs:subClassOf``, transitively)."""
        seen: set[str] = set()
        todo = list(classes)
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(self.supers.get(current, ()))
        return seen

    def disjoint_pair(self, have: Iterable[str], want: Iterable[str]) -> tuple[str, str] | None:
        """Return a class of ``have`` declared disjoint with one of ``want`` (with supers)."""
        wanted = self.closure(want)
        for one in sorted(self.closure(have)):
            for other in sorted(self.disjoint.get(one, ())):
                if other in wanted:
                    return one, other
        return None

    def is_datatype(self, term: str) -> bool:
        """Tell whether a range names a datatype (XSD, rdfs:Literal, or an rdfs:Datatype)."""
        return term.startswith(XSD) or term in (RDFS + "Literal", RDF + "langString") \
            or term in self.datatypes


def load_ontology(path: str | Path) -> Ontology:
    """Read an RDFS/OWL ontology file (Turtle, N-Triples, RDF/XML, ...) into its rules."""
    return _load_ontology(*_stamp(Path(path)))


def _stamp(path: Path) -> tuple[Path, float, int]:
    resolved = path.expanduser().resolve()
    try:
        stat = resolved.stat()
    except OSError:
        return resolved, 0.0, -1
    return resolved, stat.st_mtime, stat.st_size


@cache
def _load_ontology(path: Path, mtime: float, size: int) -> Ontology:
    onto = Ontology(source=str(path))
    rules = 0
    for t in _read_rdf(path, "ontology"):
        s, p, o = t.subject, t.predicate.value, t.object
        if not isinstance(s, ox.NamedNode) or not isinstance(o, ox.NamedNode):
            continue
        if p == RDFS + "subClassOf":
            onto.supers.setdefault(s.value, set()).add(o.value)
        elif p == RDFS + "domain":
            onto.domain.setdefault(s.value, set()).add(o.value)
        elif p == RDFS + "range":
            onto.range.setdefault(s.value, set()).add(o.value)
        elif p == OWL + "disjointWith":
            onto.disjoint.setdefault(s.value, set()).add(o.value)
            onto.disjoint.setdefault(o.value, set()).add(s.value)
        elif p == OWL + "inverseOf":
            onto.inverse.setdefault(s.value, set()).add(o.value)
            onto.inverse.setdefault(o.value, set()).add(s.value)
        elif p == RDF_TYPE and o.value in PROPERTY_KINDS.values():
            onto.kinds.setdefault(o.value[len(OWL):], set()).add(s.value)
        elif p == RDF_TYPE and o.value == RDFS + "Datatype":
            onto.datatypes.add(s.value)
            continue
        elif p == RDF_TYPE:
            # Instances described in the ontology file count as typed terms too.
            onto.typed.append(t)
            continue
        else:
            continue
        rules += p != RDFS + "subClassOf"
    if not rules:
        raise RulesError(f"{path}: the ontology states no rule (no rdfs:domain, rdfs:range, "
                         "owl:disjointWith, owl:inverseOf or owl property kinds)")
    return onto


class TermSource(Protocol):
    """Where the types and statements of a KG's terms come from."""

    location: str

    def types(self, term: ox.NamedNode) -> set[str]:
        """Return the classes a term is stated to be an instance of (``rdf:type``)."""
        ...

    def objects(self, subject: ox.NamedNode, predicate: ox.NamedNode) -> list[Any]:
        """Return the objects of the KG's statements ``subject predicate ?o``."""
        ...

    def about(self, subject: ox.NamedNode) -> list[ox.Triple]:
        """Return the statements whose subject is ``subject``."""
        ...


class KGTerms:
    """Terms of a KG read from RDF files into an in-memory pyoxigraph store."""

    def __init__(self, paths: Iterable[str | Path], extra: Iterable[ox.Triple] = ()) -> None:
        self.store = ox.Store()
        self.location = ", ".join(str(p) for p in paths) or "the ontology"
        for path in paths:
            path = Path(path)
            fmt = _rdf_format(path, "KG")
            try:
                # Streamed into the store: nothing else holds the file's text.
                with open_binary(path) as fh:
                    load_rdf(self.store, fh, fmt, path)
            except TriplesError as exc:
                raise RulesError(str(exc)) from None  # a guard's refusal, naming the file
            except (SyntaxError, ValueError, OSError, EOFError) as exc:
                raise RulesError(f"{path}: malformed RDF: {' '.join(str(exc).split())}"
                                 ) from None
        self.store.extend(ox.Quad(t.subject, t.predicate, t.object) for t in extra)

    def types(self, term: ox.NamedNode) -> set[str]:
        """Return the term's ``rdf:type`` classes."""
        return {q.object.value for q in self.store.quads_for_pattern(
            term, ox.NamedNode(RDF_TYPE), None) if isinstance(q.object, ox.NamedNode)}

    def objects(self, subject: ox.NamedNode, predicate: ox.NamedNode) -> list[Any]:
        """Return the objects of ``subject predicate ?o``."""
        return [q.object for q in self.store.quads_for_pattern(subject, predicate, None)]

    def about(self, subject: ox.NamedNode) -> list[ox.Triple]:
        """Return every statement about ``subject``."""
        return [q.triple for q in self.store.quads_for_pattern(subject, None, None)]


class SparqlTerms:
    """Terms of a KG asked of a SPARQL 1.1 endpoint (optionally one named graph)."""

    def __init__(self, url: str, graph: str | None = None, client: SparqlClient | None = None,
                 limit: int = 1000) -> None:
        self.client = client or SparqlClient(url)
        self.location = url
        self.graph = graph
        self.limit = limit

    def _select(self, pattern: str, variables: str) -> list[dict[str, Any]]:
        where = f"GRAPH <{self.graph}> {{ {pattern} }}" if self.graph else pattern
        try:
            return self.client.select(f"SELECT {variables} WHERE {{ {where} }} "
                                      f"LIMIT {self.limit}")
        except SparqlError as exc:
            raise RulesError(f"types from {self.location}: {exc}") from None

    def types(self, term: ox.NamedNode) -> set[str]:
        """Return the term's ``rdf:type`` classes."""
        rows = self._select(f"<{term.value}> <{RDF_TYPE}> ?t", "DISTINCT ?t")
        return {row["t"]["value"] for row in rows if row.get("t", {}).get("type") == "uri"}

    def objects(self, subject: ox.NamedNode, predicate: ox.NamedNode) -> list[Any]:
        """Return the objects of ``subject predicate ?o``."""
        rows = self._select(f"<{subject.value}> <{predicate.value}> ?o", "?o")
        return [binding_term(row["o"]) for row in rows if "o" in row]

    def about(self, subject: ox.NamedNode) -> list[ox.Triple]:
        """Return the statements about ``subject``."""
        rows = self._select(f"<{subject.value}> ?p ?o", "?p ?o")
        return [ox.Triple(subject, ox.NamedNode(row["p"]["value"]), binding_term(row["o"]))
                for row in rows if "p" in row and "o" in row]


def fact_terms(fact: Fact) -> tuple[Any, Any, Any] | None:
    """Return a fact's triple as RDF terms, or None when its subject or predicate is no IRI."""
    if fact.rdf:
        line = f"{fact.rdf['subject']} {fact.rdf['predicate']} {fact.rdf['object']} .\n"
        try:
            quad = next(iter(ox.parse(line, format=ox.RdfFormat.N_TRIPLES)))
        except (SyntaxError, StopIteration):
            return None
        return quad.subject, quad.predicate, quad.object
    if not (_iri(fact.subject) and _iri(fact.predicate)):
        return None
    obj: Any = ox.NamedNode(fact.object) if _iri(fact.object) else ox.Literal(fact.object)
    return ox.NamedNode(fact.subject), ox.NamedNode(fact.predicate), obj


def _iri(term: str) -> bool:
    scheme, sep, rest = term.partition(":")
    return bool(sep and scheme and rest and (rest.startswith("//") or scheme == "urn")
                and not any(c.isspace() or c in '<>"{}|\\^`' for c in term))


def _datatype_ok(literal: ox.Literal, expected: str) -> str | None:
    """Return why a literal does not fit a datatype range (None: it fits)."""
    if expected == RDFS + "Literal":
        return None
    have = literal.datatype.value
    lexical = LEXICAL.get(expected)
    if have == expected or expected in DATATYPE_PARENTS.get(have, set()):
        if lexical and not re.fullmatch(lexical, literal.value.strip()):
            return f'"{literal.value}" is not a valid {short(expected)}'
        return None
    if have in STRINGS:
        # An untyped value (a CSV cell, a plain literal) fits when its text is of the type.
        if expected in STRINGS or (lexical and re.fullmatch(lexical, literal.value.strip())):
            return None
        return f'"{literal.value}" is not a {short(expected)}'
    return f"the literal {_show(literal)} is not a {short(expected)}"


@dataclass
class RuleChecker:
    """Check facts against an ontology and/or SHACL shapes, with a KG's terms."""

    ontology: Ontology | None
    terms: TermSource
    shapes: Any = None
    types_complete: bool = True

    def check(self, fact: Fact) -> list[Finding]:
        """Return what the rules find about a fact (empty: no rule applies or none is broken)."""
        triple = fact_terms(fact)
        if triple is None:
            return []
        s, p, o = triple
        found: list[Finding] = []
        if self.ontology is not None and isinstance(s, ox.NamedNode):
            found += self._ontology_findings(s, p, o)
        if self.shapes is not None and isinstance(s, ox.NamedNode):
            found += self._shape_findings(s, p, o)
        return found

    def _types(self, term: ox.NamedNode) -> set[str]:
        return self.terms.types(term)

    def _class_rule(self, rule: str, via: str, term: Any, expected: str) -> Finding | None:
        assert self.ontology is not None
        onto = self.ontology
        if expected in TOP_CLASSES:
            return None
        name = _show(term)
        if onto.is_datatype(expected):
            if isinstance(term, ox.Literal):
                problem = _datatype_ok(term, expected)
                return None if problem is None else Finding(
                    rule, name, short(term.datatype.value), True,
                    f"{rule}{via} expects a {short(expected)}: {problem}")
            return Finding(rule, name, "a resource", True,
                           f"{rule}{via} expects a literal of {short(expected)}; found the "
                           f"resource {name}")
        if isinstance(term, ox.Literal):
            return Finding(rule, name, short(term.datatype.value), True,
                           f"{rule}{via} expects a {short(expected)}; found the literal {name}")
        if not isinstance(term, ox.NamedNode):
            return None
        have = self._types(term)
        if not have:
            return None
        closure = onto.closure(have)
        if expected in closure:
            return None
        shown = ", ".join(short(t) for t in sorted(have))
        clash = onto.disjoint_pair(have, [expected])
        if clash:
            return Finding(rule, name, short(clash[0]), True,
                           f"{rule}{via} expects a {short(expected)}; {name} is a "
                           f"{short(clash[0])}, owl:disjointWith {short(clash[1])}")
        return Finding(rule, name, shown, self.types_complete,
                       f"{rule}{via} expects a {short(expected)}; {name} is a {shown}"
                       + ("" if self.types_complete else " (types may be incomplete)"))

    def _constraints(self, p: str) -> Iterator[tuple[str, str, str, str]]:
        """Yield (rule, via, which term, expected class) for a predicate."""
        assert self.ontology is not None
        onto = self.ontology
        for c in sorted(onto.domain.get(p, ())):
            yield "rdfs:domain", f" of {short(p)}", "s", c
        for c in sorted(onto.range.get(p, ())):
            yield "rdfs:range", f" of {short(p)}", "o", c
        for q in sorted(onto.inverse.get(p, ())):
            via = f" of {short(q)} (owl:inverseOf {short(p)})"
            for c in sorted(onto.domain.get(q, ())):
                yield "rdfs:domain", via, "o", c
            for c in sorted(onto.range.get(q, ())):
                yield "rdfs:range", via, "s", c
        if onto.is_(p, "SymmetricProperty"):
            via = f" of {short(p)} (owl:SymmetricProperty)"
            for c in sorted(onto.domain.get(p, ())):
                yield "rdfs:domain", via, "o", c
            for c in sorted(onto.range.get(p, ())):
                yield "rdfs:range", via, "s", c

    def _ontology_findings(self, s: ox.NamedNode, p: ox.NamedNode, o: Any) -> list[Finding]:
        assert self.ontology is not None
        onto = self.ontology
        found: list[Finding] = []
        for rule, via, which, expected in self._constraints(p.value):
            hit = self._class_rule(rule, via, s if which == "s" else o, expected)
            if hit and hit not in found:
                found.append(hit)
        if p.value == RDF_TYPE and isinstance(o, ox.NamedNode):
            others = self._types(s) - {o.value}
            clash = onto.disjoint_pair(others, [o.value])
            if clash:
                found.append(Finding("owl:disjointWith", _show(s), short(clash[0]), True,
                                     f"owl:disjointWith: {_show(s)} is a {short(clash[0])}, "
                                     f"disjoint with {short(clash[1])}"))
        found += self._property_findings(s, p, o)
        return found

    def _reaches(self, start: Any, goal: Any, p: ox.NamedNode, limit: int = 10_000) -> list[Any]:
        """Return a path ``start p ... p goal`` in the KG (empty when none), breadth first."""
        if not isinstance(start, ox.NamedNode):
            return []
        back: dict[Any, Any] = {start: None}
        queue = [start]
        while queue and len(back) < limit:
            current = queue.pop(0)
            for nxt in self.terms.objects(current, p):
                if nxt in back or not isinstance(nxt, ox.NamedNode):
                    continue
                back[nxt] = current
                if nxt == goal:
                    path = [nxt]
                    while back[path[-1]] is not None:
                        path.append(back[path[-1]])
                    return path[::-1]
                queue.append(nxt)
        return []

    def _property_findings(self, s: ox.NamedNode, p: ox.NamedNode, o: Any) -> list[Finding]:
        assert self.ontology is not None
        onto = self.ontology
        found: list[Finding] = []
        name = short(p.value)
        if onto.is_(p.value, "IrreflexiveProperty") and o == s:
            found.append(Finding("owl:IrreflexiveProperty", name, _show(s), True,
                                 f"owl:IrreflexiveProperty: {name} never links a term to "
                                 f"itself; found {_show(s)} {name} {_show(s)}"))
        closing = onto.is_(p.value, "AsymmetricProperty") or onto.is_(p.value,
                                                                       "IrreflexiveProperty")
        if closing and o != s and isinstance(o, ox.NamedNode):
            if onto.is_(p.value, "TransitiveProperty"):
                back = self._reaches(o, s, p)
            else:
                back = [o, s] if s in self.terms.objects(o, p) else []
            if back:
                chain = f" {name} ".join(_show(t) for t in back)
                rule = ("owl:AsymmetricProperty" if onto.is_(p.value, "AsymmetricProperty")
                        else "owl:IrreflexiveProperty")
                via = " with owl:TransitiveProperty" if len(back) > 2 else ""
                found.append(Finding(rule, name, chain, True,
                                     f"{rule}{via}: the KG has {chain}, so {_show(s)} {name} "
                                     f"{_show(o)} cannot hold"))
        if onto.is_(p.value, "FunctionalProperty"):
            others = [v for v in self.terms.objects(s, p) if v != o]
            if others:
                shown = ", ".join(_show(v) for v in others[:3])
                found.append(Finding("owl:FunctionalProperty", name, shown, False,
                                     f"owl:FunctionalProperty: {name} allows one value; "
                                     f"{_show(s)} also has {shown} (one of them is wrong)"))
        if onto.is_(p.value, "TransitiveProperty") and isinstance(o, ox.NamedNode):
            steps = self._reaches(s, o, p)
            if len(steps) > 2:
                path = f" {name} ".join(_show(t) for t in steps)
                found.append(Finding("owl:TransitiveProperty", name, path, False,
                                     f"owl:TransitiveProperty: entailed by {path}"))
        if isinstance(o, ox.NamedNode):
            if onto.is_(p.value, "SymmetricProperty") and s in self.terms.objects(o, p):
                found.append(Finding("owl:SymmetricProperty", name, f"{_show(o)} {name} "
                                     f"{_show(s)}", False, f"owl:SymmetricProperty: entailed "
                                     f"by {_show(o)} {name} {_show(s)}"))
            for q in sorted(onto.inverse.get(p.value, ())):
                if s in self.terms.objects(o, ox.NamedNode(q)):
                    found.append(Finding("owl:inverseOf", name, f"{_show(o)} {short(q)} "
                                         f"{_show(s)}", False, f"owl:inverseOf: entailed by "
                                         f"{_show(o)} {short(q)} {_show(s)}"))
        return found

    def _shape_findings(self, s: ox.NamedNode, p: ox.NamedNode, o: Any) -> list[Finding]:
        from pyshacl import validate

        statements = set(self.terms.about(s)) | {ox.Triple(s, p, o)}
        if isinstance(o, ox.NamedNode):
            statements |= {ox.Triple(o, ox.NamedNode(RDF_TYPE), ox.NamedNode(t))
                           for t in self.terms.types(o)}
        if self.ontology is not None:
            # Types closed over subClassOf, so shapes targeting a superclass see the term.
            for term in (s, o):
                if isinstance(term, ox.NamedNode):
                    statements |= {ox.Triple(term, ox.NamedNode(RDF_TYPE), ox.NamedNode(c))
                                   for c in self.ontology.closure(self.terms.types(term))}
        data = _rdflib_graph(statements)
        try:
            conforms, report, text = validate(data, shacl_graph=self.shapes,
                                              inference="none", allow_warnings=True)
        except Exception as exc:  # noqa: BLE001 - pySHACL and rdflib raise many kinds
            raise RulesError(f"SHACL validation of {_show(s)} failed: "
                             f"{' '.join(str(exc).split())[:300]}") from None
        if conforms:
            return []
        if not hasattr(report, "subjects"):
            # pySHACL reports a failure (not a result) as a ValidationFailure in place of
            # the report graph, with its message in the text.
            raise RulesError(f"SHACL validation of {_show(s)} failed: "
                             f"{' '.join(str(getattr(report, 'message', text)).split())[:300]}")
        return list(_shape_results(report, self.shapes, s, p, o))


def _rdflib_graph(triples: Iterable[ox.Triple]) -> Any:
    """Return an rdflib graph of pyoxigraph triples (no text is parsed again)."""
    import rdflib

    graph = rdflib.Graph()
    for t in triples:
        graph.add((_rdflib_term(t.subject), _rdflib_term(t.predicate), _rdflib_term(t.object)))
    return graph


def _rdflib_term(term: Any) -> Any:
    import rdflib

    if isinstance(term, ox.NamedNode):
        return rdflib.URIRef(term.value)
    if isinstance(term, ox.BlankNode):
        return rdflib.BNode(term.value)
    if isinstance(term, ox.Literal):
        if term.language:
            return rdflib.Literal(term.value, lang=term.language)
        if term.datatype.value == XSD + "string":
            # rdflib keeps a plain literal without xsd:string, as N-Triples writes it.
            return rdflib.Literal(term.value)
        return rdflib.Literal(term.value, datatype=rdflib.URIRef(term.datatype.value))
    return None


def _shape_name(shapes: Any, shape: Any) -> str:
    import rdflib

    sh = rdflib.Namespace(SH)
    # A property shape is often a blank node: name the node shape that holds it.
    owner = shape if isinstance(shape, rdflib.URIRef) else shapes.value(None, sh.property, shape)
    return f" (shape {short(str(owner))})" if isinstance(owner, rdflib.URIRef) else ""


def _shape_results(report: Any, shapes: Any, s: ox.NamedNode, p: ox.NamedNode,
                   o: Any) -> Iterator[Finding]:
    import rdflib

    sh = rdflib.Namespace(SH)
    want_s, want_p, want_o = rdflib.URIRef(s.value), rdflib.URIRef(p.value), _rdflib_term(o)
    for result in report.subjects(rdflib.RDF.type, sh.ValidationResult):
        focus = report.value(result, sh.focusNode)
        path = report.value(result, sh.resultPath)
        value = report.value(result, sh.value)
        component = report.value(result, sh.sourceConstraintComponent)
        shape = report.value(result, sh.sourceShape)
        message = report.value(result, sh.resultMessage)
        if focus != want_s or path != want_p:
            continue
        rule = short(str(component)).replace("ConstraintComponent", "") if component else "sh"
        where = _shape_name(shapes, shape)
        text = f"{rule}{where} on {short(p.value)}: {message or 'violated'}"
        refutes = value is not None and value == want_o
        yield Finding(rule, _show(s), str(value) if value is not None else "", refutes, text)


def load_shapes(path: str | Path) -> Any:
    """Read a SHACL shapes file with rdflib and check pySHACL accepts its shapes."""
    return _load_shapes(*_stamp(Path(path)))


@cache
def _load_shapes(path: Path, mtime: float, size: int) -> Any:
    try:
        import rdflib
        from pyshacl import validate
    except ImportError:
        raise RulesError("SHACL shapes need pySHACL: pip install 'kgcheck[rules]'") from None
    # Read by the one RDF gate (guarded RDF/XML, no JSON-LD context loaded), then handed
    # to pySHACL as an rdflib graph.
    graph = _rdflib_graph(_read_rdf(path, "shapes"))
    if not len(graph) or not any(str(p).startswith(SH) for p in graph.predicates()):
        raise RulesError(f"{path}: no SHACL shapes in it (no sh: statements)")
    _refuse_outside_queries(graph, path)
    try:
        # pySHACL reads the shapes on the first validation: a broken shape fails here.
        validate(rdflib.Graph(), shacl_graph=graph, inference="none")
    except Exception as exc:  # noqa: BLE001 - pySHACL's shape errors have no common base
        raise RulesError(f"{path}: a shape pySHACL refuses: "
                         f"{' '.join(str(exc).split())[:300]}") from None
    return graph


def _refuse_outside_queries(graph: Any, path: Path) -> None:
    """Refuse a shape whose SPARQL reaches outside the data graph, or is no SPARQL."""
    import rdflib

    for predicate in QUERY_PREDICATES:
        for node, query in graph.subject_objects(rdflib.URIRef(predicate)):
            where = f"{short(predicate)} of {_shape_label(graph, node)}"
            try:
                reason = outside_reach(str(query))
            except ValueError as exc:
                raise RulesError(f"{path}: refused: the {where} is no SPARQL query: {exc}"
                                 ) from None
            if reason:
                raise RulesError(f"{path}: refused: the {where} reaches outside the data "
                                 f"graph ({reason}); a shape's query may read only the "
                                 "facts it is given")


def _shape_label(graph: Any, node: Any) -> str:
    import rdflib

    # A query sits in a blank node: name the shape holding it (sh:sparql, sh:target, ...).
    seen = {node}
    while not isinstance(node, rdflib.URIRef):
        owner = next((s for s in graph.subjects(None, node) if s not in seen), None)
        if owner is None:
            return "a shape"
        seen.add(owner)
        node = owner
    return f"shape {short(str(node))}"


def open_checker(*, ontology: str = "", shapes: str = "", kg: Iterable[str] = (),
                 endpoint: str = "", graph: str = "", types_complete: bool = True,
                 client: SparqlClient | None = None) -> RuleChecker:
    """Build a rule checker from files and a type source (a KG file or a SPARQL endpoint)."""
    if not ontology and not shapes:
        raise RulesError("the schema check needs an ontology (ontology=FILE) or SHACL shapes "
                         "(shapes=FILE)")
    onto = load_ontology(ontology) if ontology else None
    shape_graph = load_shapes(shapes) if shapes else None
    terms: TermSource
    if endpoint:
        terms = SparqlTerms(endpoint, graph or None, client)
    else:
        terms = _kg_terms(tuple(str(Path(k).expanduser().resolve()) for k in kg if k),
                          ontology and str(Path(ontology).expanduser().resolve()))
    return RuleChecker(onto, terms, shape_graph, types_complete)


@cache
def _kg_terms(paths: tuple[str, ...], ontology: str) -> KGTerms:
    extra = load_ontology(ontology).typed if ontology else []
    return KGTerms(paths, extra)


def findings_text(found: Iterable[Finding]) -> str:
    """Render findings as lines for a prompt or a reason."""
    return "\n".join(f"- {f.text}" for f in found)


def as_details(found: Iterable[Finding]) -> list[Mapping[str, Any]]:
    """Return findings JSON-plain, for a verdict's details."""
    return [f.as_dict() for f in found]
