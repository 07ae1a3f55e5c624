"""Pre-filter a run with the KG's own rules: refuted facts are F without a model call.

``--prefilter schema`` checks every fact against the schema strategy's rules (an ontology,
SHACL shapes) before the run's strategy sees it. A fact a rule refutes gets the schema
verdict, F, under the run's method, its reason saying that the rules refuted it and no
model was asked (``details.prefilter``); every other fact goes to the model, with what
the rules found about it without deciding (a second value of a functional property, a
chain that entails it) in its prompt as evidence. The summary
counts the facts refuted and the calls saved (at least one per refuted fact: more for
strategies that ask several times).

The types of the terms come from the run's own input when it is RDF (the ``--triples``
file, or the ``--sparql`` endpoint and graph), unless the rules' settings name a source.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from kgcheck.arguments import Arg, ArgumentError, literal
from kgcheck.data.facts import Fact
from kgcheck.data.input_uri import is_input_uri
from kgcheck.data.rdf import RDF_SUFFIXES
from kgcheck.data.runfolder import amend_summary, read_verdicts
from kgcheck.graphs.strategies.schema import SchemaContext, checker_of, rules_verdict
from kgcheck.retrievers.rules import Finding

__all__ = ["PREFILTERS", "PrefilterError", "input_types", "is_prefiltered", "plan_prefilter",
           "prefilter_counts", "prefilter_figures", "prefiltered", "screener"]

PREFILTERS = ("schema",)
PREFILTER_NOTE = "refuted by the KG's rules before any model call"

Invoke = Callable[[Fact], Awaitable[dict[str, Any]]]
# A fact as the model will see it (with the rules' findings), or None: the rules refute it.
Screen = Callable[[Fact], Fact | None]


class PrefilterError(ArgumentError):
    """A pre-filter that cannot be used; the message says which setting and why."""


def _is_rdf(path: str | Path) -> bool:
    name = str(path).lower().removesuffix(".gz")
    return any(name.endswith(suffix) for suffix in RDF_SUFFIXES)


def input_types(values: Mapping[str, Any], *, triples: str | Path | None = None,
                sparql: str | None = None, graph: str | None = None) -> dict[str, Any]:
    """Point the rules at the run's input for the terms' types, unless they name a source.

    The input KG holds the types when it is RDF (a file) or a SPARQL endpoint.
    """
    if values.get("kg") or values.get("endpoint"):
        return {}
    if triples is not None and _is_rdf(triples):
        if is_input_uri(triples):
            raise PrefilterError(f"the rules read the terms' types from a local KG file, not "
                                 f"from the URL {literal(str(triples))}: set kg to a local "
                                 "copy of it, or endpoint to a SPARQL endpoint holding it")
        return {"kg": str(triples)}
    if sparql:
        return {"endpoint": sparql, "endpoint_graph": graph or ""}
    return {}


def plan_prefilter(name: str | None, rules: Mapping[str, Any] | None, *,
                   triples: str | Path | None = None, sparql: str | None = None,
                   graph: str | None = None) -> SchemaContext | None:
    """Check a pre-filter's name and rules; return its settings (None: no pre-filter).

    The rules' files are read here, so a malformed ontology or shapes file stops the run
    before any fact is sent.
    """
    if not name:
        if rules:
            raise PrefilterError("{rules} are the pre-filter's: add {prefilter}",
                                 rules=Arg("ontology"), prefilter=Arg("prefilter", "schema"))
        return None
    if name not in PREFILTERS:
        raise PrefilterError(f"{{prefilter}}: unknown pre-filter; known: "
                             f"{', '.join(PREFILTERS)}", prefilter=Arg("prefilter", name))
    values = {k: v for k, v in (rules or {}).items() if v not in (None, "")}
    known = {f.name for f in fields(SchemaContext)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise PrefilterError(f"unknown rule setting {', '.join(unknown)}; known: ontology, "
                             "shapes, kg, endpoint, endpoint_graph, types_complete")
    values.update(input_types(values, triples=triples, sparql=sparql, graph=graph))
    ctx = SchemaContext(**values)
    checker_of(ctx)
    return ctx


def _with_findings(fact: Fact, found: list[Finding]) -> Fact:
    # Findings that decide nothing (a second functional value, an entailing chain) go to
    # the model as evidence.
    return fact.model_copy(update={"rules": [f.text for f in found]}) if found else fact


def screener(ctx: SchemaContext) -> Screen:
    """Return the pre-filter's decision per fact, as a run makes it, without any model call.

    A dry run counts with it what the run will send: the fact with the rules' findings, or
    None for a fact the rules refute (no call).
    """
    checker = checker_of(ctx)

    def screen(fact: Fact) -> Fact | None:
        found = checker.check(fact)
        return None if any(f.refutes for f in found) else _with_findings(fact, found)

    return screen


def prefiltered(invoke: Invoke, ctx: SchemaContext, method: str) -> Invoke:
    """Wrap a run's per-fact call: facts the rules refute get F without calling ``invoke``."""
    checker = checker_of(ctx)

    async def check(fact: Fact) -> dict[str, Any]:
        found = await asyncio.to_thread(checker.check, fact)
        if not any(f.refutes for f in found):
            return await invoke(_with_findings(fact, found))
        verdict = rules_verdict(fact, found, method)
        details = verdict.setdefault("details", {})
        details["prefilter"] = "schema"
        details["reason"] = f"{PREFILTER_NOTE}: {details['reason']}"
        verdict["raw"] = details["reason"]
        return {"verdict": verdict}

    return check


def is_prefiltered(record: Mapping[str, Any]) -> bool:
    """Tell whether a verdict record was given by the pre-filter (no model was asked)."""
    return (record.get("details") or {}).get("prefilter") == "schema"


def prefilter_figures(total: int, refuted: int) -> dict[str, Any]:
    """Return the summary's ``prefilter`` entry: facts, refuted, sent to the model, saved."""
    return {"prefilter": {"name": "schema", "facts": total, "refuted": refuted,
                          "sent_to_model": total - refuted, "calls_saved": refuted}}


def prefilter_counts(out_dir: Path, total: int) -> dict[str, Any]:
    """Count a run folder's pre-filtered verdicts; record them in its summary."""
    refuted = sum(1 for r in read_verdicts(out_dir).values() if is_prefiltered(r))
    counts = prefilter_figures(total, refuted)
    amend_summary(out_dir, counts)
    return counts
