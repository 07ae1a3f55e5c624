"""Statements of facts and template questions about them (when no model writes questions).

``is_statement_about`` tells a model's rewrite of a triple from junk, so that the RAG
strategy can fall back to the rule-based sentence.
"""

from __future__ import annotations

from kgcheck.retrievers.lexical import tokenize

# A rewrite may be this many times longer than the rule-based sentence (plus some slack for
# short triples) before it counts as more than one sentence about the triple.
MAX_LENGTH_FACTOR = 3
LENGTH_SLACK = 80


def is_statement_about(sentence: str, subject: str, obj: str, rule: str = "") -> bool:
    """Tell whether ``sentence`` is one plain sentence stating a triple about subject and object.

    A model asked for one sentence may answer ``T``, an apology, a question, a preamble
    ("Here is the sentence:") or a paragraph; such text would become the query of every
    search and the claim of every question. A statement is one line of at least three
    words, not a question, that names the subject and the object (a word of each, when
    they have words) and is not much longer than the rule-based sentence ``rule``.
    """
    lines = [line for line in sentence.splitlines() if line.strip()]
    if len(lines) != 1:
        return False
    text = lines[0].strip()
    if len(text.split()) < 3 or text.endswith("?"):
        return False
    if rule and len(text) > MAX_LENGTH_FACTOR * len(rule) + LENGTH_SLACK:
        return False
    words = set(tokenize(text))
    for term in (subject, obj):
        named = set(tokenize(term))
        if named and not named & words:
            return False
    return True


def template_questions(subject: str, obj: str, sentence: str) -> list[str]:
    """Write questions whose answers would confirm or refute ``sentence``."""
    claim = sentence.strip().rstrip(".")
    return [
        f"Is it true that {claim}?",
        f"What is the relationship between {subject} and {obj}?",
        f"What is {subject} known for?",
        f"What is {obj}?",
        f"Which sources connect {subject} with {obj}?",
    ]


class FactStatements:
    """The statement of each fact (rank-0 question): its sentence, else its readable triple."""

    def __init__(self, data: str | None = None) -> None:
        self.data = data
        self._cache: dict[str, dict[str, tuple[str, str, str]]] = {}

    def _load(self, dataset: str) -> dict[str, tuple[str, str, str]]:
        from kgcheck.data.facts import Fact
        from kgcheck.data.upstream import DataError, canonical_dataset, dataset_path, open_data

        try:
            src = open_data(self.data)
            name = canonical_dataset(src, dataset)
            kg = src.read_json(dataset_path(name, "kg.json"))
            path = dataset_path(name, "kg_modified.json")
            sentences = src.read_json(path) if src.exists(path) else {}
        except DataError:
            return {}
        out = {}
        for fact_id, value in kg.items():
            triple = value[0] if value and isinstance(value[0], list) else value
            fact = Fact.from_triple(fact_id, name, list(triple))
            subject, _, obj = fact.readable_terms()
            out[str(fact_id)] = (sentences.get(fact_id) or f"{fact.readable}.", subject, obj)
        return out

    def get(self, dataset: str, fact_id: str) -> tuple[str, str, str]:
        """Return (statement, subject, object) of a fact; the fact id when it is unknown."""
        key = dataset.lower()
        if key not in self._cache:
            self._cache[key] = self._load(key)
        return self._cache[key].get(fact_id, (fact_id, fact_id, ""))
