"""Read facts from RDF files with pyoxigraph's streaming parser, one triple at a time.

N-Triples, N-Quads, Turtle, TriG and RDF/XML are chosen by extension (``.gz`` too). Each
fact keeps its terms in N-Triples syntax (``Fact.rdf``) and their plain values in
``subject``/``predicate``/``object``; its id is a hash of the triple's N-Triples line, the
same in every run and every file. Triples naming a term (``rdfs:label``, ``skos:prefLabel``,
``schema:name``) are not facts to check: they give the readable names used in prompts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import pyoxigraph as ox

from kgcheck.data.facts import MAX_TERM_CHARS, Fact
from kgcheck.data.rdf_input import parse_rdf
from kgcheck.data.sources import TriplesError, open_binary

FORMATS = {
    ".nt": ox.RdfFormat.N_TRIPLES,
    ".nq": ox.RdfFormat.N_QUADS,
    ".ttl": ox.RdfFormat.TURTLE,
    ".trig": ox.RdfFormat.TRIG,
    ".rdf": ox.RdfFormat.RDF_XML,
    ".xml": ox.RdfFormat.RDF_XML,
    ".owl": ox.RdfFormat.RDF_XML,
}
RDF_SUFFIXES = tuple(FORMATS)
QUAD_FORMATS = (ox.RdfFormat.N_QUADS, ox.RdfFormat.TRIG)
# Naming predicates, best first: the first one a term has gives its readable name.
NAME_PREDICATES = (
    "http://www.w3.org/2000/01/rdf-schema#label",
    "http://www.w3.org/2004/02/skos/core#prefLabel",
    "https://schema.org/name",
    "http://schema.org/name",
)
_RANK = {iri: n for n, iri in enumerate(NAME_PREDICATES)}
# pyoxigraph gives anonymous blank nodes ([] and lists) random ids on every parse: a
# random 128-bit number in hex, without leading zeros.
_GENERATED_BNODE = re.compile(r"[0-9a-f]{20,32}")
TERMS = ("subject", "predicate", "object")

Term = ox.NamedNode | ox.BlankNode | ox.Literal


def fact_id(line: str) -> str:
    """Return the id of a triple: a 64-bit hash of its N-Triples line, as 16 hex digits."""
    return hashlib.blake2b(line.encode("utf-8"), digest_size=8).hexdigest()


def term_value(term: Any) -> str:
    """Return a term's plain value: the IRI, ``_:id`` for a blank node, a literal's text."""
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    value = getattr(term, "value", None)
    return str(term) if value is None else str(value)


# One triple as plain strings: the id, the three values, the three N-Triples terms.
TripleRow = tuple[str, str, str, str, str, str, str]


def rdf_fact(subject: Any, predicate: Any, obj: Any, dataset: str) -> Fact:
    """Build the fact of one RDF triple (pyoxigraph terms)."""
    return row_fact(triple_row(subject, predicate, obj), dataset)


def triple_row(subject: Any, predicate: Any, obj: Any) -> TripleRow:
    """Turn one RDF triple (pyoxigraph terms) into the strings its fact is made of."""
    terms = (str(subject), str(predicate), str(obj))
    return (fact_id(f"{terms[0]} {terms[1]} {terms[2]} ."), term_value(subject),
            term_value(predicate), term_value(obj), *terms)


def row_fact(row: TripleRow, dataset: str) -> Fact:
    """Build the fact of a triple row (rows travel from shard readers cheaper than facts)."""
    fact_id_, subject, predicate, obj, *terms = row
    rdf = dict(zip(TERMS, terms, strict=True))
    values = [subject, predicate, obj]
    if max(map(len, values)) > MAX_TERM_CHARS:
        return Fact.from_triple(fact_id_, dataset, values, rdf=rdf)  # flags the defect
    # Every triple of a large file passes here before sampling: the direct constructor costs
    # a third of from_triple's checks, which only RDF's overlong terms need.
    return Fact(id=fact_id_, dataset=dataset, subject=subject, predicate=predicate,
                object=obj, rdf=rdf)


def name_rank(obj: Any) -> int:
    """Rank a naming literal: untagged or English before other languages (lower is better)."""
    language = getattr(obj, "language", None)
    return 0 if not language or language.lower().startswith("en") else 1


_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
# A kept name: its rank, its text, and what follows the text in N-Triples (``@en``,
# ``^^<...#date>``; empty for a plain string), so exports keep the language tag or datatype.
NameEntry = tuple[tuple[int, int], str, str]


def literal_suffix(obj: ox.Literal) -> str:
    """Return what follows a literal's quoted text in N-Triples: ``@de``, ``^^<iri>`` or ""."""
    if obj.language:
        direction = getattr(obj, "direction", None)
        return f"@{obj.language}" + (f"--{direction.value}" if direction is not None else "")
    datatype = obj.datatype.value
    return "" if datatype == _XSD_STRING else f"^^<{datatype}>"


class Names:
    """The best readable name seen for each term (keyed by its N-Triples form).

    At most ``cap`` terms are kept: past that the names are dropped (``overflowed``) and
    looked up again for the chosen facts only, so memory stays flat on a huge KG.
    """

    def __init__(self, cap: int = 250_000) -> None:
        self._best: dict[str, NameEntry] = {}
        self.cap = cap
        self.overflowed = False

    def offer(self, term: str, predicate: str, obj: Any, *, bounded: bool = True) -> None:
        """Keep ``obj`` as the name of ``term`` if it beats the one kept so far."""
        if not isinstance(obj, ox.Literal) or (bounded and self.overflowed):
            return
        self._keep(term, (_RANK.get(predicate, len(_RANK)), name_rank(obj)), obj.value,
                   literal_suffix(obj), bounded=bounded)

    def _keep(self, term: str, rank: tuple[int, int], name: str, suffix: str, *,
              bounded: bool) -> None:
        kept = self._best.get(term)
        if kept is None or rank < kept[0]:
            if bounded and kept is None and len(self._best) >= self.cap:
                self.overflowed = True
                self._best.clear()
                return
            self._best[term] = (rank, name, suffix)

    @property
    def best(self) -> dict[str, NameEntry]:
        """Each term's best name with its rank (what a shard read hands back to merge)."""
        return self._best

    def merge(self, best: dict[str, NameEntry], *, overflowed: bool = False) -> None:
        """Take the names of a later part of the file (as if its triples came now)."""
        if overflowed:
            # As in one pass: past the cap the names are looked up again for chosen facts.
            self.overflowed = True
            self._best.clear()
        for term, (rank, name, suffix) in best.items():
            if self.overflowed:
                return
            self._keep(term, rank, name, suffix, bounded=True)

    def get(self, term: str) -> str | None:
        """Return the name of a term in N-Triples form, if one was seen."""
        kept = self._best.get(term)
        return kept[1] if kept else None

    def literal(self, term: str) -> str | None:
        """Return the name of a term as the KG wrote it, an N-Triples literal (``"Köln"@de``)."""
        kept = self._best.get(term)
        return str(ox.Literal(kept[1])) + kept[2] if kept else None

    def __len__(self) -> int:
        return len(self._best)

    def apply(self, facts: Iterable[Fact]) -> list[Fact]:
        """Return the facts with the names known for their terms (others unchanged)."""
        out = []
        for fact in facts:
            found = {key: name for key in TERMS
                     if fact.rdf and (name := self.get(fact.rdf[key]))}
            if found:
                literals = {key: self.literal(fact.rdf[key]) for key in found if fact.rdf}
                fact = fact.model_copy(update={
                    "names": {**(fact.names or {}), **found},
                    "name_terms": {**(fact.name_terms or {}), **literals}})
            out.append(fact)
        return out


def distinct_triples(facts: Iterable[Fact]) -> Iterator[Fact]:
    """Drop the facts already seen: in N-Quads and TriG one triple in two graphs is one fact."""
    seen: set[int] = set()
    for fact in facts:
        key = int(fact.id, 16)
        if key not in seen:
            seen.add(key)
            yield fact


def is_name_triple(predicate: Any) -> bool:
    """Return whether a triple names its subject rather than stating a fact."""
    return isinstance(predicate, ox.NamedNode) and predicate.value in _RANK


class RdfReader:
    """Iterate the facts of an RDF file, collecting the names it gives to terms.

    Iterating again reads the file again. In N-Quads and TriG the same triple in two named
    graphs is one fact (a set of the ids seen is kept for those formats only; a repeated
    line of a triples file is dropped when chosen, see ``sampling``). ``exhausted`` tells
    whether the last pass read the whole file, i.e. whether ``names`` has every name in it.
    """

    def __init__(self, path: str | Path, dataset: str = "") -> None:
        self.path = Path(path)
        self.dataset = dataset or self.path.stem
        name = self.path.name.lower().removesuffix(".gz")
        self.format = FORMATS[Path(name).suffix]
        self.names = Names()
        self.exhausted = False
        # A whole pass has been read: ``names`` holds every name of the file (unless
        # overflowed), also while a later pass goes on.
        self.names_complete = False

    def __iter__(self) -> Iterator[Fact]:
        self.exhausted = False
        facts = self._facts()
        yield from distinct_triples(facts) if self.format in QUAD_FORMATS else facts
        self.exhausted = self.names_complete = True

    def _facts(self) -> Iterator[Fact]:
        for subject, predicate, obj in self._triples():
            if is_name_triple(predicate):
                self.names.offer(str(subject), predicate.value, obj)
            else:
                yield rdf_fact(subject, predicate, obj, self.dataset)

    def named(self, facts: Iterable[Fact]) -> list[Fact]:
        """Return facts with readable names from the file (reading the rest of it if needed)."""
        facts = list(facts)
        if not (self.exhausted or self.names_complete) or self.names.overflowed:
            wanted = {f.rdf[k] for f in facts if f.rdf for k in TERMS}
            try:
                for subject, predicate, obj in self._triples():
                    if is_name_triple(predicate) and str(subject) in wanted:
                        self.names.offer(str(subject), predicate.value, obj, bounded=False)
            except TriplesError:
                # The chosen facts all come before the syntax error; reading them further
                # reports it. Names after it stay unknown (local names are used).
                pass
        return self.names.apply(facts)

    def _triples(self) -> Iterator[tuple[Any, Any, Any]]:
        """Yield (subject, predicate, object) terms; a syntax error names file and line."""
        try:
            with open_binary(self.path) as fh:
                yield from rdf_terms(fh, self.format, self.path)
        except (OSError, EOFError) as exc:
            raise TriplesError(f"{self.path}: cannot be read as {self.format.name} "
                               f"({exc})") from None


def rdf_terms(source: IO[bytes] | bytes, rdf_format: ox.RdfFormat, path: str | Path,
              first_line: int = 1) -> Iterator[tuple[Any, Any, Any]]:
    """Yield the (subject, predicate, object) terms of RDF text.

    The text starts at line ``first_line`` of ``path``; a syntax error names both.
    """
    anonymous: dict[str, ox.BlankNode] = {}

    def stable(term: Any) -> Any:
        # Number generated blank nodes by first appearance, so ids repeat across runs.
        if isinstance(term, ox.BlankNode) and _GENERATED_BNODE.fullmatch(term.value):
            return anonymous.setdefault(term.value, ox.BlankNode(f"anon{len(anonymous)}"))
        return term

    try:
        for quad in parse_rdf(source, rdf_format, path):
            yield stable(quad.subject), quad.predicate, stable(quad.object)
    except SyntaxError as exc:
        message = re.sub(r"^Parser error at line \d+ (between columns [\d ]+and \d+)?:?\s*",
                         "", str(exc.msg if hasattr(exc, "msg") else exc))
        where = f", line {exc.lineno + first_line - 1}" if exc.lineno else ""
        raise TriplesError(f"{path}{where}: malformed {rdf_format.name} "
                           f"({message})") from None
    except TriplesError:
        raise  # a guard's refusal (rdf_input), already naming the file
    except (OSError, EOFError, ValueError) as exc:
        raise TriplesError(f"{path}: cannot be read as {rdf_format.name} "
                           f"({exc})") from None
