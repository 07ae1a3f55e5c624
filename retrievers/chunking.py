"""Sentence-window chunks: each sentence is a chunk; its window is what the model reads.

As in the study (a sentence-window parser, window 3): a sentence is embedded and matched
on its own, then replaced by itself plus ``window`` sentences on each side, so the model
sees context while retrieval stays precise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kgcheck.retrievers.corpus import Document

# A sentence ends at . ! ? (optionally followed by a closing quote or bracket) before
# whitespace and an upper-case letter, digit or opening quote; blank lines always end one.
_BOUNDARY = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)\]]))\s+(?=[\"'“‘(\[]?[A-Z0-9À-Ý])"
)
# Abbreviations after which a full stop does not end the sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr vs no gen col lt sgt capt rev hon inc ltd co corp".split()
)
_BLANK = re.compile(r"\n\s*\n|\r\n\s*\r\n")
MAX_SENTENCE_CHARS = 400


@dataclass(frozen=True)
class Chunk:
    """One sentence of a document, with where it sits."""

    doc_id: str
    fact_id: str
    dataset: str
    index: int
    sentence: str

    @property
    def id(self) -> str:
        """The chunk's id: ``<doc id>#<sentence index>``."""
        return f"{self.doc_id}#{self.index}"


def _cap(sentence: str, limit: int) -> list[str]:
    """Cut an over-long run of text (menus, tables) into pieces at spaces."""
    if len(sentence) <= limit:
        return [sentence]
    pieces, current = [], ""
    for word in sentence.split():
        if current and len(current) + 1 + len(word) > limit:
            pieces.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        pieces.append(current)
    return pieces


def _merge_abbreviations(parts: list[str]) -> list[str]:
    merged: list[str] = []
    for part in parts:
        part = part.strip()
        if merged:
            last_word = merged[-1].rsplit(" ", 1)[-1].rstrip(".").lower()
            if merged[-1].endswith(".") and (last_word in _ABBREVIATIONS or len(last_word) == 1):
                merged[-1] = f"{merged[-1]} {part}"
                continue
        merged.append(part)
    return merged


def split_sentences(text: str, limit: int = MAX_SENTENCE_CHARS) -> list[str]:
    """Split text into sentences; lines and paragraphs without punctuation stay separate."""
    sentences: list[str] = []
    for block in _BLANK.split(text):
        for line in block.splitlines():
            line = " ".join(line.split())
            if not line:
                continue
            for part in _merge_abbreviations(_BOUNDARY.split(line)):
                # Fragments without letters (page furniture, separators) carry no evidence.
                if len(part) >= 3 and any(c.isalpha() for c in part):
                    sentences.extend(_cap(part, limit))
    return sentences


@dataclass(frozen=True)
class SplitDocument:
    """A document with its sentences."""

    document: Document
    sentences: tuple[str, ...]

    def chunks(self) -> list[Chunk]:
        """Every sentence as a chunk."""
        doc = self.document
        return [Chunk(doc.doc_id, doc.fact_id, doc.dataset, n, s)
                for n, s in enumerate(self.sentences)]

    def window(self, index: int, size: int) -> str:
        """Sentence ``index`` with ``size`` sentences on each side."""
        start, end = max(0, index - size), min(len(self.sentences), index + size + 1)
        return " ".join(self.sentences[start:end])


def split_document(doc: Document) -> SplitDocument:
    """Split a document into sentences (the title, when known, is not part of them)."""
    return SplitDocument(doc, tuple(split_sentences(doc.text)))
