"""Sample an RDF file's facts over their parsed terms, building a fact for the chosen only.

Every mode reads the same facts: those of ``RdfReader.fact_chunks`` (pyoxigraph's parse of
the whole file, naming triples recognised by their parsed predicate, repeats of a quad
file's triples dropped by their parsed terms). A sample is drawn over them with the seed as
over the facts of a whole read, strata come from the parsed terms, and only the chosen
triples become ``Fact`` objects (about 10 us each, the cost a sample avoids). Every line is
parsed, so a malformed one is refused whatever is drawn, as a whole read refuses it; the
names of the chosen facts' terms are those the same pass collected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kgcheck.data.facts import Fact
from kgcheck.data.rdf import RdfReader, Statement, rdf_fact, term_value
from kgcheck.data.sampling import Reservoir


class RdfSampler:
    """The facts of an RDF file, also drawn from as parsed terms (``sampling.DrawnRecords``).

    Called, it streams the file's facts (``iter(reader)``). Its records are the facts'
    parsed statements, one per fact in the facts' order, so a seeded sample over them is the sample
    over the facts; after a draw ``reader`` holds the names of the whole file, as after a
    whole read.
    """

    def __init__(self, reader: RdfReader) -> None:
        self.reader = reader

    def __call__(self) -> Iterator[Fact]:
        """Stream the file's facts."""
        return iter(self.reader)

    def records(self) -> Iterator[Statement]:
        """Yield the file's facts as parsed statements, in order."""
        return self.reader.fact_statements()

    def record_key(self, stratify: str) -> Callable[[Statement], str]:
        """Return a record's stratum, as ``sampling.STRATA`` gives its fact's."""
        if stratify == "predicate":
            return lambda statement: term_value(statement.predicate)
        if stratify == "subject":
            return lambda statement: term_value(statement.subject)
        constant = self.reader.dataset if stratify == "dataset" else "unknown"
        return lambda _statement: constant

    def draw(self, reservoir: Reservoir) -> tuple[int, list[tuple[int, Any]]]:
        """Draw Algorithm R's sample over the facts while they are read (one pass).

        The reservoir advances by a chunk of facts at a time; the terms it newly keeps are
        taken from the chunk in hand, and those it drops are forgotten once as many.
        """
        kept: dict[int, Statement] = {}
        for chunk in self.reader.fact_chunks():
            first = reservoir.seen
            reservoir.advance(len(chunk))
            if new := [index for index in reservoir.kept if index >= first]:
                kept.update((index, chunk[index - first]) for index in new)
                if len(kept) > 2 * len(reservoir.kept):
                    kept = {index: kept[index] for index in reservoir.kept}
        return reservoir.seen, [(index, kept[index]) for index in sorted(reservoir.kept)]

    def parse_chosen(self, chosen: list[tuple[int, Any]]) -> list[tuple[int, Fact]]:
        """Build the facts of the chosen statements."""
        dataset = self.reader.dataset
        return [(n, rdf_fact(statement.subject, statement.predicate, statement.object, dataset))
                for n, statement in chosen]


def rdf_source(reader: RdfReader) -> RdfSampler:
    """Return the stream of an RDF file's facts, sampled over their parsed terms."""
    return RdfSampler(reader)


__all__ = ["RdfSampler", "rdf_source"]
