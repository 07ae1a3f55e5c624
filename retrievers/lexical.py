"""BM25 over small text collections (one fact's documents or sentences), with bm25s."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import cache

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")
# A token that no text contains, so that bm25s never sees an empty document.
_EMPTY = "\u2400"


@cache
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def fold(text: str) -> str:
    """Lower-case and strip accents, so ``Gaytán`` matches ``Gaytan``."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def tokenize(text: str) -> list[str]:
    """Words of ``text`` without English stop words, accent-folded and lower-case."""
    stop = _stopwords()
    return [w for w in _WORD.findall(fold(text)) if w not in stop]


class LexicalIndex:
    """BM25 scores of queries against a fixed list of texts."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        self.size = len(texts)
        self._bm25 = bm25s.BM25()
        if self.size:
            corpus = [tokenize(t) or [_EMPTY] for t in texts]
            self._bm25.index(corpus, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """Score every text for ``query`` (zeros when nothing matches)."""
        if not self.size:
            return np.zeros(0, dtype=np.float32)
        words = [w for w in tokenize(query) if w in self._bm25.vocab_dict]
        if not words:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(words), dtype=np.float32)

    def top(self, query: str, k: int) -> list[tuple[int, float]]:
        """Return the ``k`` best texts with a positive score, best first (ties by position)."""
        scores = self.scores(query)
        order = np.lexsort((np.arange(self.size), -scores))[:k]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]
