"""Choose the facts of a file by predicate: ``--predicates`` and ``--exclude-predicates``.

A pattern is an IRI (``http://...`` or ``<http://...>``), a prefixed name of a well-known
vocabulary (``rdf:type``, ``rdfs:subClassOf``, ``owl:sameAs``, ``schema:name``), a plain
predicate as a CSV file writes it (``isMarriedTo``), or a glob of any of these (``rdf:*``,
``*label*``, ``http://dbpedia.org/ontology/birth*``). Facts are filtered one at a time
while the input streams past, so a huge file is never held whole; the filter counts the
facts each pattern matched, so a pattern that matched nothing can be named.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from kgcheck.data.facts import Fact

__all__ = ["PREFIXES", "PredicateFilter", "PredicateFilterError", "parse_patterns"]

PREFIXES: Mapping[str, str] = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "skos": "http://www.w3.org/2004/02/skos/core#",
    "schema": "http://schema.org/",
    "foaf": "http://xmlns.com/foaf/0.1/",
    "dc": "http://purl.org/dc/elements/1.1/",
    "dcterms": "http://purl.org/dc/terms/",
    "prov": "http://www.w3.org/ns/prov#",
    "dbo": "http://dbpedia.org/ontology/",
    "dbp": "http://dbpedia.org/property/",
    "wdt": "http://www.wikidata.org/prop/direct/",
}
_GLOB = re.compile(r"[*?\[]")


class PredicateFilterError(ValueError):
    """A predicate pattern that cannot be read; the message names it."""


def parse_patterns(value: str | Sequence[str] | None) -> list[str]:
    """Read ``A,B`` (or a list) into patterns; spaces around each are dropped."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return [item.strip() for item in items if item.strip()]


def _expand(pattern: str) -> list[str]:
    """Return the forms a pattern is compared in: as given, and its IRI when prefixed."""
    text = pattern.strip()
    if text.startswith("<") and text.endswith(">"):
        return [text[1:-1]]
    prefix, colon, local = text.partition(":")
    if colon and prefix in PREFIXES and not local.startswith("//"):
        return [PREFIXES[prefix] + local, text]
    return [text]


@dataclass
class _Pattern:
    text: str
    forms: list[str]
    glob: bool
    matched: int = 0

    def matches(self, predicate: str) -> bool:
        if self.glob:
            return any(fnmatch.fnmatchcase(predicate, form) for form in self.forms)
        return predicate in self.forms


@dataclass
class PredicateFilter:
    """Keep facts whose predicate matches an ``include`` pattern and no ``exclude`` one."""

    include: list[_Pattern] = field(default_factory=list)
    exclude: list[_Pattern] = field(default_factory=list)
    seen: int = 0
    kept: int = 0

    @classmethod
    def of(cls, include: str | Sequence[str] | None = None,
           exclude: str | Sequence[str] | None = None) -> PredicateFilter | None:
        """Build the filter of ``--predicates``/``--exclude-predicates`` (None: no filter)."""
        def patterns(value: str | Sequence[str] | None, flag: str) -> list[_Pattern]:
            out = []
            for text in parse_patterns(value):
                forms = _expand(text)
                if not forms[0]:
                    raise PredicateFilterError(f"{flag} {text!r}: an empty IRI")
                out.append(_Pattern(text, forms, bool(_GLOB.search(text))))
            return out

        chosen = cls(patterns(include, "--predicates"),
                     patterns(exclude, "--exclude-predicates"))
        if include is not None and not chosen.include:
            raise PredicateFilterError("--predicates names no predicate")
        return chosen if chosen.include or chosen.exclude else None

    def keeps(self, fact: Fact) -> bool:
        """Tell whether a fact passes the filter (and count it)."""
        predicate = fact.predicate
        self.seen += 1
        if self.include:
            hits = [p for p in self.include if p.matches(predicate)]
            if not hits:
                return False
            for pattern in hits:
                pattern.matched += 1
        for pattern in self.exclude:
            if pattern.matches(predicate):
                pattern.matched += 1
                return False
        self.kept += 1
        return True

    def apply(self, facts: Iterable[Fact]) -> Iterator[Fact]:
        """Yield the facts that pass, one at a time."""
        return (fact for fact in facts if self.keeps(fact))

    def take_counts(self, seen: int, matched: Sequence[int]) -> None:
        """Take the counts a pass over the input made elsewhere (a sharded run's survey).

        ``matched`` holds, per pattern (include, then exclude), the facts it matched.
        """
        self.seen = seen
        for pattern, count in zip((*self.include, *self.exclude), matched, strict=False):
            pattern.matched = count

    def unmatched(self) -> list[str]:
        """Return the patterns that matched no fact so far."""
        return [p.text for p in (*self.include, *self.exclude) if not p.matched]

    def describe(self) -> dict[str, list[str]]:
        """Return the patterns as ``run.json`` records them."""
        return {key: [p.text for p in patterns] for key, patterns in
                (("predicates", self.include), ("exclude_predicates", self.exclude))
                if patterns}
