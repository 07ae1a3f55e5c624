"""Schema: check a fact against the KG's own rules (RDFS/OWL ontology, SHACL shapes), no model.

check_rules -> END. A broken rule makes the fact F with the rule as its reason (which
rule, which term, which type or value was found); when no rule decides, the verdict is
``NO_RULE_DECIDES`` with the reason "no rule decides" and any findings that decide nothing
(a conflicting functional value, an entailing chain). Never T: the absence of a violation
is no evidence that a fact is true. See ``kgcheck.retrievers.rules`` for the rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from kgcheck.data.facts import Fact, FactInput, Label, Verdict, VerdictDict
from kgcheck.graphs import verdicts
from kgcheck.graphs.context import Context, bind, context_of
from kgcheck.graphs.registry import AnyStateGraph, Strategy, register
from kgcheck.graphs.state import GraphInput, GraphOutput, read_fact
from kgcheck.retrievers.rules import (
    Finding,
    RuleChecker,
    RulesError,
    as_details,
    open_checker,
)

# The label of "no rule decides": not enough evidence (the rules neither refute nor confirm).
NO_RULE_DECIDES: Label = "NEI"
NO_RULE_REASON = "no rule decides"
RULES_MODEL = "rules"
NO_RULES = f"{NO_RULE_REASON}: no ontology or shapes given (set ontology or shapes)"


@dataclass(kw_only=True)
class SchemaContext(Context):
    """Settings of a schema check: the rules and where the terms' types come from."""

    METHOD: ClassVar[str] = "SCHEMA"
    REPLAYS: ClassVar[str | None] = None

    ontology: str = field(default="", metadata={
        "description": "RDFS/OWL ontology file (Turtle, N-Triples, RDF/XML): rdfs:domain, "
        "rdfs:range, owl:disjointWith, owl:inverseOf and property kinds."})
    shapes: str = field(default="", metadata={
        "description": "SHACL shapes file, run with pySHACL (kgcheck[rules])."})
    kg: str = field(default="", metadata={
        "description": "RDF file(s) of the KG, comma-separated: the terms' rdf:type "
        "statements and the other facts the rules look at."})
    endpoint: str = field(default="", metadata={
        "description": "A SPARQL endpoint to ask for the terms' types instead of kg."})
    endpoint_graph: str = field(default="", metadata={
        "description": "The endpoint's named graph (empty: the default graph)."})
    types_complete: bool = field(default=True, metadata={
        "description": "The KG's rdf:type statements are complete: a typed term of none of "
        "the expected classes breaks rdfs:domain/range. False: only owl:disjointWith does."})


class SchemaState(TypedDict):
    """A fact in, its verdict out."""

    fact: FactInput
    verdict: NotRequired[VerdictDict]


def checker_of(ctx: SchemaContext) -> RuleChecker:
    """Build (cached per files) the rule checker a Context describes."""
    return open_checker(ontology=ctx.ontology, shapes=ctx.shapes,
                        kg=[k.strip() for k in ctx.kg.split(",") if k.strip()],
                        endpoint=ctx.endpoint, graph=ctx.endpoint_graph,
                        types_complete=ctx.types_complete)


def rules_verdict(fact: Fact, found: list[Finding], method: str = "SCHEMA",
                  seconds: float = 0.0) -> VerdictDict:
    """Return the verdict the findings give: F with the broken rule, else "no rule decides"."""
    refuting = [f for f in found if f.refutes]
    label: Label = "F" if refuting else NO_RULE_DECIDES
    reason = refuting[0].text if refuting else NO_RULE_REASON
    verdict = Verdict(fact_id=fact.id, label=label, method=method, model=RULES_MODEL,
                      seconds=seconds, raw=reason,
                      details={"reason": reason, "rule": refuting[0].rule if refuting else None,
                               "findings": as_details(found)})
    return verdict.model_dump()  # type: ignore[return-value]


def check_rule_files(facts: Iterable[Fact], ctx: SchemaContext) -> list[str]:
    """Read the rules and the types before a run: a bad file stops it with one line."""
    checker_of(ctx)
    return []


async def check_rules(state: SchemaState, runtime: Runtime[SchemaContext], *,
                      context: type[SchemaContext] = SchemaContext) -> dict:
    """Check the fact against the rules (off the event loop: stores and pySHACL block)."""
    ctx = context_of(runtime, context)
    fact = read_fact(state)
    if fact.defect:
        return {"verdict": verdicts.defect(fact, ctx.METHOD, RULES_MODEL)}
    if not ctx.ontology and not ctx.shapes:
        # A graph called with no rules (Studio, a script): nothing can decide. A batch run
        # refuses this before it starts (check_rule_files).
        return {"verdict": rules_verdict(fact, [], ctx.METHOD) | {
            "raw": NO_RULES, "details": {"reason": NO_RULES, "rule": None, "findings": []}}}
    try:
        checker = await asyncio.to_thread(checker_of, ctx)
    except RulesError as exc:
        return {"verdict": verdicts.failed(fact.id, ctx.METHOD, RULES_MODEL, exc)}
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        found = await asyncio.to_thread(checker.check, fact)
    except RulesError as exc:
        # This fact's check failed (pySHACL reported a failure): its verdict says why.
        return {"verdict": verdicts.failed(fact.id, ctx.METHOD, RULES_MODEL, exc)}
    return {"verdict": rules_verdict(fact, found, ctx.METHOD, loop.time() - started)}


def build(context: type[SchemaContext] = SchemaContext) -> AnyStateGraph:
    """Build the schema graph for ``context`` (SchemaContext or a subclass)."""
    graph_builder = StateGraph(SchemaState, context_schema=context, input_schema=GraphInput,
                               output_schema=GraphOutput)
    graph_builder.add_node("check_rules", bind(check_rules, context))
    graph_builder.add_edge(START, "check_rules")
    graph_builder.add_edge("check_rules", END)
    return graph_builder


STRATEGY = register(Strategy(
    "schema", SchemaContext, build,
    description="The KG's own rules: RDFS/OWL domain, range, disjointness, property kinds "
    "and SHACL shapes; F with the broken rule, never T; no model.",
    preflight=check_rule_files, calls_model=False, labels=("F", NO_RULE_DECIDES, "NA")))
builder = STRATEGY.builder
graph = builder.compile(name="schema")
