"""Document selection (the study's cross-encoder step), pluggable by name.

``fusion`` (default) keeps the search engine's fused BM25 + dense order. A cross-encoder
(``cross-encoder:<model or path>``, e.g. ms-marco-MiniLM-L-6-v2 as in the study) rescores
each document's opening against the query; it needs sentence-transformers and a locally
available model, which is why it is not the default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from kgcheck.registry import Registry, UnknownNameError
from kgcheck.retrievers.corpus import Document
from kgcheck.retrievers.search.engine import SearchHit

CROSS_ENCODER_CHARS = 2000


class SelectionError(ValueError):
    """A selector spec that names no known selector, or whose model cannot be loaded."""


class DocumentSelector(Protocol):
    """Keep the ``k`` documents most relevant to a query."""

    name: str

    def select(self, query: str, hits: Sequence[SearchHit], documents: dict[str, Document],
               k: int) -> list[SearchHit]:
        """Return up to ``k`` hits, best first."""
        ...


class FusionSelector:
    """Keep the top ``k`` by the search engine's own fused score."""

    name = "fusion"

    def select(self, query: str, hits: Sequence[SearchHit], documents: dict[str, Document],
               k: int) -> list[SearchHit]:
        """Keep the first ``k`` hits in score order."""
        return sorted(hits, key=lambda h: (-h.score, h.doc_no))[:k]


class CrossEncoderSelector:
    """Rescore documents with a sentence-transformers cross-encoder."""

    def __init__(self, model: str) -> None:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise SelectionError(f"cross-encoder:{model} needs sentence-transformers "
                                 "(and torch): pip install sentence-transformers") from exc
        try:
            self._model: Any = CrossEncoder(model, device="cpu")
        except Exception as exc:  # noqa: BLE001 - loading errors vary by hub/cache state
            raise SelectionError(f"cross-encoder:{model}: cannot load the model ({exc})") from exc
        self.name = f"cross-encoder:{model}"

    def select(self, query: str, hits: Sequence[SearchHit], documents: dict[str, Document],
               k: int) -> list[SearchHit]:
        """Keep the ``k`` hits whose document opening the cross-encoder scores highest."""
        if not hits:
            return []
        pairs = [(query, documents[h.doc_id].text[:CROSS_ENCODER_CHARS]) for h in hits]
        scores = self._model.predict(pairs)
        ranked = sorted(zip(hits, scores, strict=True), key=lambda p: (-float(p[1]), p[0].doc_no))
        return [replace(h, score=float(s), rank=n) for n, (h, s) in enumerate(ranked[:k], 1)]


def fusion(argument: str = "") -> DocumentSelector:
    """``fusion``: keep the search engine's fused BM25 + dense order (offline, the default)."""
    if argument:
        raise SelectionError(f"fusion:{argument}: fusion takes no model")
    return FusionSelector()


def cross_encoder(model: str) -> DocumentSelector:
    """``cross-encoder:<model or path>``: rescore with a sentence-transformers cross-encoder."""
    if not model:
        raise SelectionError("cross-encoder needs a model: cross-encoder:<model or path>")
    return CrossEncoderSelector(model)


class UnknownSelectorError(SelectionError, UnknownNameError):
    """No document selector is registered under that name."""


SELECTORS: Registry[Callable[[str], DocumentSelector]] = Registry(
    "document selector", group="kgcheck.selectors", unknown=UnknownSelectorError)
SELECTORS.register("fusion", fusion)
SELECTORS.register("cross-encoder", cross_encoder)


def get_selector(spec: str = "fusion") -> DocumentSelector:
    """Return the selector ``spec`` names: ``fusion`` or ``cross-encoder:<model>``."""
    return SELECTORS.create(spec or "fusion")
