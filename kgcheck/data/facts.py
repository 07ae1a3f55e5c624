"""Facts and verdicts: what every layer passes on.

Graph state stays JSON-plain (``FactInput``/``VerdictDict`` TypedDicts) so that the LangGraph
server can show and edit it in Studio; nodes validate it into the pydantic models below.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Literal, NotRequired
from urllib.parse import unquote

from pydantic import BaseModel, Field, computed_field, field_validator
from typing_extensions import TypedDict

from kgcheck.data.input_limits import NAME_CHARS

# NA: no usable answer. NEI: the model says the evidence (or its knowledge) is not enough
# to decide, an answer only the not-enough-evidence prompt variants allow.
Label = Literal["T", "F", "NA", "NEI"]

# Longer terms are not sent to a model: upstream DBpedia holds a 1.5 M-character subject,
# while its longest real terms (abstracts used as objects) stay under 10,000 characters.
MAX_TERM_CHARS = 20_000

# Control characters (C0, DEL, C1) and the Unicode line and paragraph separators: an id
# holding one could end a line, a comment or a record in a file kgcheck writes it into.
_ID_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_DUP_SUFFIX = re.compile(r"__\d+$")
# A term that is an IRI (any scheme with //), or a path of one (Freebase's /people/person/...).
_IRI = re.compile(r"^(?:[A-Za-z][\w+.-]*:)?//|^/\S")
# A prefixed name with no space (concept:city:paris, dbo:birthPlace, wd:Q42): the prefixes go.
# Prefixes start lower-case so that a name such as "Paris:France" keeps its colon.
_PREFIXED = re.compile(r"^(?:[a-z][\w.-]*:)+(?P<local>[^\s:]+)$")
# Dotted identifier paths (people.person.place_of_birth): the last step names the term.
_DOTTED = re.compile(r"^[a-z_][a-z_]*(?:\.[a-z_][\w]*)+$")


@lru_cache(maxsize=65_536)  # a KG repeats its predicates and many terms: rendered once
def readable_term(raw: str) -> str:
    """Render a KG term for a person: strip namespaces and prefixes, split names.

    The rules hold for any KG's spelling: IRIs keep their last path step or fragment
    (percent-decoded), prefixed names lose their prefixes (``concept:city:new_york``,
    ``dbo:birthPlace``), dotted paths keep their last step, underscores become spaces,
    camelCase is split, YAGO's ``__1`` suffixes go.
    ``http://dbpedia.org/ontology/birthPlace`` -> ``birth place``;
    ``Maria_Feodorovna__Dagmar_of_Denmark_`` -> ``Maria Feodorovna (Dagmar of Denmark)``;
    ``concept:athletePlaysForTeam`` -> ``athlete plays for team``.
    """
    term = raw.strip()
    if term.startswith("<") and term.endswith(">"):
        term = term[1:-1].strip()
    if not any(c.isspace() for c in term):
        if _IRI.match(term):
            term = unquote(re.split(r"[/#]", term.rstrip("/#"))[-1])
        elif prefixed := _PREFIXED.match(term):
            term = prefixed["local"]
        if _DOTTED.match(term):
            term = term.rsplit(".", 1)[-1]
    term = _DUP_SUFFIX.sub("", term)
    # YAGO writes parentheses as "__X_": Maria_Feodorovna__Dagmar_of_Denmark_
    term = re.sub(r"__(.+?)_$", r" (\1)", term)
    term = term.replace("_", " ")
    if " " not in term and not term[:1].isupper() and any(c.isupper() for c in term):
        term = _CAMEL.sub(" ", term).lower()
    return re.sub(r"\s+", " ", term).strip()


def fact_id_problem(fact_id: str) -> str | None:
    """Say what makes ``fact_id`` unusable as a fact's id; None when it is a good one."""
    if (control := _ID_CONTROL.search(fact_id)) is not None:
        return (f"fact id {_shown_id(fact_id)} holds a control character "
                f"(U+{ord(control.group()):04X}); ids are one line of printable text")
    if len(fact_id) > (limit := NAME_CHARS.value()):
        return (f"fact id {_shown_id(fact_id)} is {len(fact_id):,} characters long, more "
                f"than {limit:,} ({NAME_CHARS.hint()})")
    return None


def checked_fact_id(fact_id: str, where: str, error: type[ValueError]) -> str:
    """Return ``fact_id`` if it can be a fact's id, else raise ``error`` naming ``where``.

    Every reader of fact ids (triples files, labels, imported verdicts) calls it, so a bad
    id is one line naming the input and the row; ``Fact`` itself refuses one as well.
    """
    if (problem := fact_id_problem(fact_id)) is not None:
        raise error(f"{where}: {problem}")
    return fact_id


def _shown_id(fact_id: str) -> str:
    return repr(fact_id if len(fact_id) <= 60 else fact_id[:57] + "...")


class Fact(BaseModel):
    """One KG triple to check, with its gold label when known."""

    id: str
    dataset: str = ""
    subject: str
    predicate: str
    object: str
    label: bool | None = None
    names: dict[str, str] | None = Field(
        default=None, description="Readable names of the terms (subject, predicate, object), "
        "e.g. from rdfs:label; preferred over names derived from the terms.")
    name_terms: dict[str, str] | None = Field(
        default=None, description="The names as the KG wrote them, N-Triples literals with "
        "their language tag or datatype (\"Köln\"@de), when read from RDF; exports keep them.")
    sentence: str | None = Field(default=None, description="A natural-language rendering, if any.")
    defect: str | None = Field(default=None, description="Why the triple cannot be sent.")
    rdf: dict[str, str] | None = Field(default=None, description="The triple's RDF terms in N-Triples syntax, when read from RDF.")
    rules: list[str] | None = Field(default=None, description="What the KG's rules say about the fact without deciding it, shown to the model as evidence.")

    @field_validator("id")
    @classmethod
    def _printable_id(cls, value: str) -> str:
        if (problem := fact_id_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @classmethod
    def from_triple(
        cls, fact_id: str, dataset: str, triple: list[Any], label: bool | None = None, **extra: Any
    ) -> Fact:
        """Build a fact from a raw triple, flagging defects instead of failing on them."""
        defects = []
        terms = []
        for name, value in zip(("subject", "predicate", "object"), triple, strict=False):
            if value is None or (isinstance(value, float) and math.isnan(value)):
                defects.append(f"{name} is missing")
                terms.append("")
                continue
            text = str(value)
            if len(text) > MAX_TERM_CHARS:
                defects.append(f"{name} is {len(text):,} characters long")
                text = text[:MAX_TERM_CHARS]
            terms.append(text)
        if len(triple) != 3:
            defects.append(f"triple has {len(triple)} terms, expected 3")
            terms += [""] * (3 - len(terms))
        return cls(
            id=str(fact_id),
            dataset=dataset,
            subject=terms[0],
            predicate=terms[1],
            object=terms[2],
            label=label,
            defect="; ".join(defects) or None,
            **extra,
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def readable(self) -> str:
        """The triple as readable text: ``subject predicate object``."""
        return " ".join(self.readable_terms())

    def readable_terms(self) -> tuple[str, str, str]:
        """Return the three terms rendered readable: a known name first, else from the term."""
        names = self.names or {}
        subject, predicate, obj = (
            names.get(key) or readable_term(value)
            for key, value in (("subject", self.subject), ("predicate", self.predicate),
                               ("object", self.object)))
        return subject, predicate, obj

    def as_input(self) -> FactInput:
        """Return the JSON-plain form used as graph input."""
        data: FactInput = {
            "id": self.id,
            "dataset": self.dataset,
            "subject": self.subject,
            "predicate": self.predicate,
            "object": self.object,
        }
        if self.sentence:
            data["sentence"] = self.sentence
        if self.defect:
            data["defect"] = self.defect
        if self.names:
            data["names"] = dict(self.names)
        if self.rdf:
            # The RDF terms (datatypes, languages) for graphs that read them: the rules.
            data["rdf"] = dict(self.rdf)
        if self.rules:
            data["rules"] = list(self.rules)
        return data


class Verdict(BaseModel):
    """What a strategy concluded about one fact, with the evidence of how."""

    fact_id: str
    label: Label
    method: str
    model: str
    raw: str | None = Field(default=None, description="The last raw model answer.")
    raws: list[str] = Field(default_factory=list, description="Every raw answer, in order.")
    attempts: int = 0
    seconds: float = 0.0
    tokens_in: int | None = None
    tokens_out: int | None = None
    cached: bool = Field(
        default=False, description="Every model call of this verdict was served from the "
        "answer cache: no model ran now, and ``seconds`` is what the calls took when made.")
    error: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    confidence: float | None = Field(
        default=None, description="Probability in [0, 1] that the fact is true, when known.")
    confidence_source: str | None = Field(
        default=None, description="Where the confidence comes from: logprobs, "
        "self-consistency or consensus (None: no confidence).")
    rationale: str | None = Field(default=None, description="The model's reason, when asked.")
    citations: list[dict[str, Any]] | None = Field(
        default=None, description="The evidence passages the model cited, when asked.")
    correction: dict[str, Any] | None = Field(
        default=None, description="The model's suggested correction of a false fact: the "
        "wrong part and the value it believes right, when asked.")
    conversation: list[dict[str, Any]] = Field(
        default_factory=list, description="Every message sent and received, in order.")
    answer_problems: list[str] = Field(
        default_factory=list, description="What was wrong with the model's answer beyond "
        "its label (an invented passage id, an invalid correction, ...).")


class FactInput(TypedDict):
    """A fact as a person fills it in Studio."""

    subject: str
    predicate: str
    object: str
    id: NotRequired[str]
    dataset: NotRequired[str]
    sentence: NotRequired[str]
    defect: NotRequired[str]
    names: NotRequired[dict[str, str]]
    rdf: NotRequired[dict[str, str]]
    rules: NotRequired[list[str]]


class VerdictDict(TypedDict, total=False):
    """``Verdict.model_dump()``: the JSON-plain verdict kept in graph state."""

    fact_id: str
    label: Label
    method: str
    model: str
    raw: str | None
    raws: list[str]
    attempts: int
    seconds: float
    tokens_in: int | None
    tokens_out: int | None
    cached: bool
    error: str | None
    details: dict[str, Any]
    confidence: float | None
    confidence_source: str | None
    rationale: str | None
    citations: list[dict[str, Any]] | None
    correction: dict[str, Any] | None
    conversation: list[dict[str, Any]]
    answer_problems: list[str]
