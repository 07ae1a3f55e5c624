"""The verdict record a run appends to ``verdicts.jsonl``: the verdict with its fact.

A record carries the triple as given (``subject``, ``predicate``, ``object``, and ``rdf``,
the N-Triples terms, when the fact was read from RDF) and the time it was checked, so that
a curator can act on ``verdicts.jsonl`` (or ``kgcheck export``) without joining it back to
the input.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kgcheck.data.facts import Fact

__all__ = ["checked_now", "verdict_record"]


def checked_now() -> str:
    """Return the current UTC time in ISO 8601, to the second (``2026-12-01T20:18:08Z``)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def verdict_record(fact: Fact, verdict: dict[str, Any], run_id: str,
                   gold: str | None) -> dict[str, Any]:
    """Build the record of one verdict: the verdict, its fact's triple, gold mark and time."""
    record = {**verdict, "fact_id": fact.id, "dataset": fact.dataset, "gold": gold,
              "run_id": run_id, "subject": fact.subject, "predicate": fact.predicate,
              "object": fact.object, "checked_at": checked_now()}
    if fact.rdf:
        record["rdf"] = dict(fact.rdf)
    if fact.names:
        # The KG's own names of the terms (rdfs:label ...), for exports and the review page.
        record["names"] = dict(fact.names)
    if fact.name_terms:
        # The same names with their language tag or datatype, for RDF exports.
        record["name_terms"] = dict(fact.name_terms)
    return record
