"""Gold labels from a separate file (``--labels FILE``), for facts read from RDF or SPARQL.

A CSV/TSV or JSON Lines file whose rows give a ``label`` and either the fact's ``id`` or its
triple (``subject``, ``predicate``, ``object``: plain values as kgcheck shows them, or RDF
terms in N-Triples syntax such as ``<http://ex.org/a>`` and ``"5"^^<...#integer>``).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgcheck.data.facts import Fact, checked_fact_id
from kgcheck.data.labels import label_word
from kgcheck.data.sources import (
    TriplesError,
    base_name,
    check_input,
    json_objects,
    text_lines,
)

TERMS = ("subject", "predicate", "object")


@dataclass
class GoldLabels:
    """Labels by fact id and by triple; ``apply`` sets them on the facts they match."""

    by_id: dict[str, bool] = field(default_factory=dict)
    by_triple: dict[tuple[str, str, str], bool] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.by_id) + len(self.by_triple)

    def label_of(self, fact: Fact) -> bool | None:
        """Return the gold label of a fact, matched by id, then RDF terms, then values."""
        if fact.id in self.by_id:
            return self.by_id[fact.id]
        if fact.rdf:
            key = (fact.rdf["subject"], fact.rdf["predicate"], fact.rdf["object"])
            if key in self.by_triple:
                return self.by_triple[key]
        return self.by_triple.get((fact.subject, fact.predicate, fact.object))

    def apply(self, facts: Iterable[Fact]) -> list[Fact]:
        """Return the facts with their gold labels set where this file has one."""
        out = []
        for fact in facts:
            label = self.label_of(fact)
            out.append(fact if label is None else fact.model_copy(update={"label": label}))
        return out


def _rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    suffix = base_name(path)[1]
    text = text_lines(path, TriplesError)  # read as a stream, each line within the cap
    if suffix in (".jsonl", ".ndjson"):
        for n, row in json_objects(text, path):
            yield f"{path}, line {n}", row
    elif suffix in (".csv", ".tsv"):
        reader = csv.reader(text, delimiter="\t" if suffix == ".tsv" else ",")
        try:
            header = [h.strip().lower() for h in next(reader, [])]
            for n, fields in enumerate(reader, start=2):
                if len(fields) > len(header) and any(f.strip() for f in fields[len(header):]):
                    raise TriplesError(f"{path}, row {n}: {len(fields)} fields but the header "
                                       f"has {len(header)}; quote fields holding the delimiter")
                if any(f.strip() for f in fields):
                    yield f"{path}, row {n}", dict(zip(header, fields, strict=False))
        except csv.Error as exc:
            raise TriplesError(f"{path}, line {reader.line_num}: malformed CSV ({exc})"
                               ) from None
    else:
        raise TriplesError(f"{path}: labels must be .csv, .tsv or .jsonl, not {suffix!r}")


def read_gold(path: str | Path) -> GoldLabels:
    """Read a labels file; each row needs a label and an id or a full triple."""
    path = check_input(path)
    gold = GoldLabels()
    for where, row in _rows(path):
        label = label_word(row.get("label"), where, TriplesError)
        if label is None:
            # A gold row is there to give a label: idk/na/empty is a mistake, not a skip.
            raise TriplesError(f"{where}: missing label" + (
                f" ({row['label']!r} is no label; give T or F)"
                if row.get("label") is not None and str(row["label"]).strip() else ""))
        if row.get("id") is not None and str(row["id"]).strip():
            gold.by_id[checked_fact_id(str(row["id"]).strip(), where, TriplesError)] = label
        elif all(row.get(k) is not None and str(row[k]).strip() for k in TERMS):
            subject, predicate, obj = (str(row[k]).strip() for k in TERMS)
            gold.by_triple[(subject, predicate, obj)] = label
        else:
            raise TriplesError(f"{where}: give the fact's id or its subject, predicate and "
                               "object")
    if not gold:
        raise TriplesError(f"{path}: no labels found")
    return gold
