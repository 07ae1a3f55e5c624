"""Read facts from RDF files with pyoxigraph's streaming parser, one triple at a time.

N-Triples, N-Quads, Turtle, TriG and RDF/XML are chosen by extension (``.gz`` too). Each
fact keeps its terms in N-Triples 1.2 syntax (``Fact.rdf``; a triple term as
``<<( s p o )>>``) and their plain values in ``subject``/``predicate``/``object``; its id is
a hash of the triple's N-Triples line, the same in every run and every reading mode.
Triples naming a term (``rdfs:label``, ``skos:prefLabel``, ``schema:name``, recognised by
their parsed predicate) are not facts to check: they give the readable names used in
prompts.

Blank nodes: N-Triples and N-Quads keep the file's labels (every blank node there has
one). In Turtle, TriG and RDF/XML the parser labels anonymous nodes (``[]``, lists,
reifiers) with random hex digits, so every blank node of those files whose label is hex
digits only is numbered by first appearance (``_:b0``, ``_:b1``, ...; see
``BlankNodeNumbers``): the same in every read, and never a label the file keeps.
Relative IRIs of those formats resolve against the file's own URI unless a base IRI is
given.
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
NAME_NODES = frozenset(ox.NamedNode(iri) for iri in NAME_PREDICATES)
# One fact per line, every blank node labelled by the file: nothing is renumbered.
LINE_FORMATS = (ox.RdfFormat.N_TRIPLES, ox.RdfFormat.N_QUADS)
# Blank node labels the parser may have made up (random hex): numbered by first appearance.
_HEX_LABEL = re.compile(r"[0-9a-f]+")
# Facts handed on together by ``RdfReader.fact_chunks`` (a sample advances by a chunk).
CHUNK = 8192
TERMS = ("subject", "predicate", "object")

Term = ox.NamedNode | ox.BlankNode | ox.Literal


def fact_id(line: str) -> str:
    """Return the id of a triple: a 64-bit hash of its N-Triples line, as 16 hex digits."""
    return hashlib.blake2b(line.encode("utf-8"), digest_size=8).hexdigest()


def term_text(term: Any) -> str:
    """Return a term in N-Triples 1.2 syntax: a triple term as ``<<( s p o )>>``."""
    # pyoxigraph writes a triple term nested in another with its brackets, a top one without.
    return f"<<( {term} )>>" if isinstance(term, ox.Triple) else str(term)


def term_value(term: Any) -> str:
    """Return a term's plain value: the IRI, ``_:id`` for a blank node, a literal's text.

    A triple term has no plain value: its N-Triples text stands for it.
    """
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    if isinstance(term, ox.Triple):
        return term_text(term)
    value = getattr(term, "value", None)
    return str(term) if value is None else str(value)


# One triple as plain strings: the id, the three values, the three N-Triples terms.
TripleRow = tuple[str, str, str, str, str, str, str]


def rdf_fact(subject: Any, predicate: Any, obj: Any, dataset: str) -> Fact:
    """Build the fact of one RDF triple (pyoxigraph terms)."""
    return row_fact(triple_row(subject, predicate, obj), dataset)


def triple_row(subject: Any, predicate: Any, obj: Any) -> TripleRow:
    """Turn one RDF triple (pyoxigraph terms) into the strings its fact is made of."""
    terms = (term_text(subject), str(predicate), term_text(obj))
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
        """Keep ``obj`` as the name of ``term`` if it beats the one kept so far (blank: no name)."""
        if (not isinstance(obj, ox.Literal) or not obj.value.strip()
                or (bounded and self.overflowed)):
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

    def merge(self, best: dict[str, NameEntry], *, overflowed: bool = False,
              bounded: bool = True) -> None:
        """Take the names of a later part of the file (as if its triples came now).

        ``bounded=False`` takes names looked up for chosen facts, past the cap.
        """
        if overflowed:
            # As in one pass: past the cap the names are looked up again for chosen facts.
            self.overflowed = True
            self._best.clear()
        for term, (rank, name, suffix) in best.items():
            if bounded and self.overflowed:
                return
            self._keep(term, rank, name, suffix, bounded=bounded)

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
    """Drop the facts already seen: in N-Quads and TriG one triple in two graphs is one fact.

    (By id, for readers of shards; ``RdfReader`` drops them by their parsed terms.)
    """
    seen: set[int] = set()
    for fact in facts:
        key = int(fact.id, 16)
        if key not in seen:
            seen.add(key)
            yield fact


def is_name_triple(predicate: Any) -> bool:
    """Return whether a triple names its subject rather than stating a fact."""
    return predicate in NAME_NODES


def file_base_iri(path: Path, rdf_format: ox.RdfFormat) -> str | None:
    """Return the base IRI of a file's relative IRIs: its own URI (none in line formats).

    N-Triples and N-Quads allow absolute IRIs only, so they are parsed without a base.
    """
    return None if rdf_format in LINE_FORMATS else path.resolve().as_uri()


# The terms of one triple: subject, predicate, object (pyoxigraph terms).
Terms = tuple[Any, Any, Any]
# One parsed statement: a pyoxigraph ``Quad`` or ``Triple`` (its ``subject``, ``predicate``
# and ``object``). Kept whole rather than as a tuple of its terms: one object per fact is
# what a sample holds while it draws, and tuples made the draw half again as slow.
Statement = Any


class RdfReader:
    """Iterate the facts of an RDF file, collecting the names it gives to terms.

    Iterating again reads the file again. The facts are the file's triples less the naming
    ones; in N-Quads and TriG the same triple in two named graphs is one fact (a set of
    the triples' hashes is kept for those formats only; a triple written twice in a
    triples file is dropped when chosen, see ``sampling``). A file without facts is
    refused. ``exhausted`` tells whether the last pass read the whole file, i.e. whether
    ``names`` has every name in it. Every reading mode (a whole read, ``--limit``, a
    sample, strata) reads the facts of ``fact_chunks``, so all give the same facts and ids.
    """

    def __init__(self, path: str | Path, dataset: str = "", base_iri: str | None = None
                 ) -> None:
        self.path = Path(path)
        self.dataset = dataset or self.path.stem
        name = self.path.name.lower().removesuffix(".gz")
        self.format = FORMATS[Path(name).suffix]
        self.base_iri = base_iri or file_base_iri(self.path, self.format)
        self.names = Names()
        self.exhausted = False
        # A whole pass has been read: ``names`` holds every name of the file (unless
        # overflowed), also while a later pass goes on.
        self.names_complete = False

    def __iter__(self) -> Iterator[Fact]:
        dataset = self.dataset
        for statement in self.fact_statements():
            yield rdf_fact(statement.subject, statement.predicate, statement.object, dataset)

    def fact_statements(self) -> Iterator[Statement]:
        """Yield the file's facts as parsed statements in file order, reading no further."""
        for chunk in self.fact_chunks(1):
            yield from chunk

    def fact_chunks(self, size: int = CHUNK) -> Iterator[list[Statement]]:
        """Yield the file's facts as parsed statements, in lists of up to ``size``.

        Naming triples go to ``names``; in N-Quads and TriG a triple already seen is left
        out. A file holding no fact is a ``TriplesError``. A list is handed on once full,
        so ``size`` is how far the parse reads ahead of the facts taken.
        """
        self.exhausted = False
        names = self.names
        seen: set[int] | None = set() if self.format in QUAD_FORMATS else None
        chunk: list[Statement] = []
        facts = 0
        for statement in self._triples():
            predicate = statement.predicate
            if predicate in NAME_NODES:
                names.offer(str(statement.subject), predicate.value, statement.object)
                continue
            if seen is not None:
                # The triple without its graph (a TriG statement comes as a Triple).
                key = hash(statement.triple if isinstance(statement, ox.Quad) else statement)
                if key in seen:
                    continue
                seen.add(key)
            chunk.append(statement)
            if len(chunk) >= size:
                facts += len(chunk)
                yield chunk
                chunk = []
        if chunk:
            facts += len(chunk)
            yield chunk
        self.exhausted = self.names_complete = True
        if not facts:
            raise TriplesError(f"{self.path}: no facts found (only names, comments or blank "
                               "lines)")

    def named(self, facts: Iterable[Fact]) -> list[Fact]:
        """Return facts with readable names from the file (reading the rest of it if needed)."""
        facts = list(facts)
        if not (self.exhausted or self.names_complete) or self.names.overflowed:
            # The names seen so far are partial or were dropped: look the terms up again.
            found = self.names_of({f.rdf[k] for f in facts if f.rdf for k in TERMS})
            self.names.merge(found.best, bounded=False)
        return self.names.apply(facts)

    def names_of(self, terms: set[str]) -> Names:
        """Return the names the file gives to these terms (N-Triples form), best first.

        The whole file is parsed; a syntax error ends the search (the chosen facts all come
        before it, and reading them further reports it; names after it stay unknown).
        """
        names = Names(self.names.cap)
        try:
            for statement in self._triples():
                if (statement.predicate in NAME_NODES
                        and (text := str(statement.subject)) in terms):
                    names.offer(text, statement.predicate.value, statement.object,
                                bounded=False)
        except TriplesError:
            pass
        return names

    def _triples(self) -> Iterator[Statement]:
        """Yield the file's parsed statements; a syntax error names file and line."""
        try:
            with open_binary(self.path) as fh:
                yield from rdf_statements(fh, self.format, self.path, base_iri=self.base_iri)
        except (OSError, EOFError) as exc:
            raise TriplesError(f"{self.path}: cannot be read as {self.format.name} "
                               f"({exc})") from None


class BlankNodeNumbers:
    """Number a document's parser-labelled blank nodes by first appearance: ``_:b0``, ...

    The parser labels anonymous nodes with random hex digits, which a file's own label may
    also be: every label made of hex digits only (``b0`` included, so none of the numbers
    given here is a label the file keeps) is numbered, inside triple terms too; the others
    are kept as written. Distinct nodes stay distinct, and a file read again gets the same
    labels (the parser's order is the file's).
    """

    def __init__(self) -> None:
        self.labels: dict[str, ox.BlankNode] = {}

    def __call__(self, term: Any) -> Any:
        """Return the term with its blank nodes renumbered."""
        if isinstance(term, ox.BlankNode):
            if not _HEX_LABEL.fullmatch(term.value):
                return term
            label = self.labels.get(term.value)
            if label is None:
                label = self.labels[term.value] = ox.BlankNode(f"b{len(self.labels)}")
            return label
        if isinstance(term, ox.Triple):
            return ox.Triple(self(term.subject), term.predicate, self(term.object))
        return term


def rdf_terms(source: IO[bytes] | bytes, rdf_format: ox.RdfFormat, path: str | Path,
              first_line: int = 1, base_iri: str | None = None) -> Iterator[Terms]:
    """Yield the (subject, predicate, object) terms of RDF text (see ``rdf_statements``)."""
    for statement in rdf_statements(source, rdf_format, path, first_line, base_iri):
        yield statement.subject, statement.predicate, statement.object


def rdf_statements(source: IO[bytes] | bytes, rdf_format: ox.RdfFormat, path: str | Path,
                   first_line: int = 1, base_iri: str | None = None) -> Iterator[Statement]:
    """Yield the parsed statements of RDF text: N-Quads quads, else triples.

    The text starts at line ``first_line`` of ``path``; a syntax error names both.
    Relative IRIs resolve against ``base_iri`` (none: refused). Outside N-Triples and
    N-Quads the parser's blank node labels are renumbered (``BlankNodeNumbers``).
    """
    try:
        quads = parse_rdf(source, rdf_format, path, base_iri=base_iri)
        if rdf_format in LINE_FORMATS:
            yield from quads
        else:
            number = BlankNodeNumbers()
            for quad in quads:
                yield ox.Triple(number(quad.subject), quad.predicate, number(quad.object))
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
