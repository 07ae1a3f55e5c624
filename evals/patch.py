"""A run's verdicts as changes to the KG: a SPARQL 1.1 Update or an RDF Patch.

- Deleted: every triple judged false, by the person's review when it says T or F, else by
  the model. NEI and NA are never deleted (a fact to look into is not a false one), nor is
  a fact the person confirmed.
- Inserted: for a deleted triple whose suggested correction the person accepted (or
  edited) in ``kgcheck review``, the triple with the corrected part.

``sparql`` writes ``DELETE DATA { ... } ; INSERT DATA { ... }`` (SPARQL 1.1 Update);
``patch`` writes an RDF Patch (``TX .``, ``D`` / ``A`` rows, ``TC .``). Both name the
triples by the terms the KG has (the ``rdf`` terms of facts read from RDF; the export's
IRIs otherwise), so applied to the N-Triples export of the same run (or the KG the run
read) they remove exactly those triples. A corrected value keeps the kind of the term it
replaces: a literal keeps its datatype or language tag, an IRI stays an IRI in the same
namespace (a name becomes ``namespace + name`` with spaces as underscores), unless the
value is itself an IRI. A value that looks like an IRI (``http:``, ``urn:`` ...) is one only
if pyoxigraph, which writes it, accepts it; otherwise the correction is left out. A triple
with a blank node cannot be named in ``DELETE DATA``: it is left out and counted.

What is left out is listed in ``# left out:`` comments of the SPARQL Update, each on one
line whatever its fact id or value holds (``kgcheck.data.rdf_terms.comment_text``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import quote

import pyoxigraph as ox

from kgcheck.data.rdf_terms import comment_text, iri_problem, is_iri, looks_like_iri
from kgcheck.evals.export_terms import TERM, mint_iri, triple_terms

PATCH_FORMATS = ("sparql", "patch")
PARTS = ("subject", "predicate", "object")


class CorrectionTermError(ValueError):
    """A corrected value that cannot be made into an RDF term of its part."""


@dataclass
class Changes:
    """The triples to delete and insert, and what had to be left out."""

    delete: list[ox.Triple] = field(default_factory=list)
    insert: list[ox.Triple] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def effective_label(record: Mapping[str, Any], review: Mapping[str, Any] | None) -> str:
    """Return the label that counts: the person's T or F, else the model's."""
    decided = str((review or {}).get("label") or "")
    return decided if decided in ("T", "F") else str(record.get("label") or "NA")


def _namespace(iri: str) -> str:
    cut = max(iri.rfind("/"), iri.rfind("#"))
    return iri[:cut + 1] if cut >= 0 else iri


def corrected_term(old: Any, value: str, dataset: str, part: str) -> Any:
    """Make ``value`` an RDF term of the same kind as ``old`` (see the module's rules)."""
    text = value.strip()
    if not text:
        raise CorrectionTermError("the corrected value is empty")
    try:
        if isinstance(old, ox.Literal):
            if part != "object":
                raise CorrectionTermError(f"a literal cannot be the {part}")
            if old.language:
                return ox.Literal(text, language=old.language)
            return ox.Literal(text, datatype=old.datatype)
        if is_iri(text):
            return ox.NamedNode(text)
        if looks_like_iri(text):
            # An IRI the writer would refuse is no name either: never percent-encode it.
            raise CorrectionTermError(iri_problem(text) or "an IRI needs // after its scheme")
        if isinstance(old, ox.NamedNode) and old.value.startswith(TERM):
            # A minted name (YAGO, FactBench): the KG writes its names with underscores.
            return mint_iri(dataset, text.replace(" ", "_"))
        if isinstance(old, ox.NamedNode):
            return ox.NamedNode(_namespace(old.value) + quote(text.replace(" ", "_"), safe=""))
    except ValueError as exc:  # pyoxigraph rejects an invalid IRI or language tag
        raise CorrectionTermError(str(exc)) from None
    raise CorrectionTermError(f"cannot replace a {type(old).__name__} term")


def _accepted(review: Mapping[str, Any] | None,
              record: Mapping[str, Any]) -> tuple[str, str] | None:
    """Return (part, value) of a correction the person accepted or edited, if any."""
    review = review or {}
    decision = str(review.get("correction") or "")
    suggestion = record.get("correction") or {}
    if decision not in ("accept", "edit") or suggestion.get("part") not in PARTS:
        return None
    value = str(review.get("corrected_value") or "") or (
        str(suggestion.get("value") or "") if decision == "accept" else "")
    return (str(suggestion["part"]), value) if value else None


def changes(rows: Iterable[Mapping[str, Any]], records: Mapping[str, Mapping[str, Any]],
            review: Mapping[str, Mapping[str, Any]]) -> Changes:
    """Collect the deletions and insertions of export ``rows`` (see the module's rules)."""
    out = Changes()
    for row in rows:
        fid = str(row["fact_id"])
        record, decided = records[fid], review.get(fid)
        if effective_label(record, decided) != "F":
            continue
        terms = triple_terms(row)
        if any(isinstance(t, ox.BlankNode) for t in terms):
            out.skipped.append(f"fact {fid}: a blank node cannot be named in DELETE DATA")
            continue
        out.delete.append(ox.Triple(*terms))
        accepted = _accepted(decided, record)
        if accepted is None:
            continue
        part, value = accepted
        index = PARTS.index(part)
        new = list(terms)
        try:
            new[index] = corrected_term(terms[index], value, str(row.get("dataset") or ""),
                                        part)
            out.insert.append(ox.Triple(*new))
        except (CorrectionTermError, TypeError) as exc:
            out.skipped.append(f"fact {fid}: correction {value!r} is not a valid {part} ({exc})")
    return out


def _lines(triples: Iterable[ox.Triple], prefix: str = "  ") -> Iterator[str]:
    for triple in triples:
        yield f"{prefix}{triple.subject} {triple.predicate} {triple.object} .\n"


def sparql_update(found: Changes) -> str:
    """Render the changes as a SPARQL 1.1 Update (an empty one when there are none)."""
    parts = []
    if found.delete:
        parts.append("DELETE DATA {\n" + "".join(_lines(found.delete)) + "}")
    if found.insert:
        parts.append("INSERT DATA {\n" + "".join(_lines(found.insert)) + "}")
    # Free text in a comment: one line, whatever a fact id or an error message holds.
    header = "".join(f"# left out: {comment_text(s)}\n" for s in found.skipped)
    return header + (" ;\n".join(parts) + "\n" if parts else "")


def rdf_patch(found: Changes) -> str:
    """Render the changes as an RDF Patch: one transaction of deletes, then adds."""
    lines = [f"H id <urn:uuid:{uuid.uuid4()}> .\n", "TX .\n"]
    lines += _lines(found.delete, "D ")
    lines += _lines(found.insert, "A ")
    lines.append("TC .\n")
    return "".join(lines)


def write_changes(rows: Iterable[Mapping[str, Any]], records: Mapping[str, Mapping[str, Any]],
                  review: Mapping[str, Mapping[str, Any]], fmt: str, sink: IO[bytes]) -> int:
    """Write the changes in ``fmt`` (sparql or patch); return how many triples change."""
    found = changes(rows, records, review)
    text = sparql_update(found) if fmt == "sparql" else rdf_patch(found)
    sink.write(text.encode("utf-8"))
    return len(found.delete) + len(found.insert)
