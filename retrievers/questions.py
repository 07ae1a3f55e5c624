"""Statements of facts and template questions about them (when no model writes questions)."""

from __future__ import annotations


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
