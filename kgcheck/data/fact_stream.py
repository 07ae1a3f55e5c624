"""A whole input file's facts as a stream: read again at every pass, never held in memory.

A run over every fact of a large KG cannot keep the facts in a list (a pydantic ``Fact``
takes kilobytes). ``FactStream`` stands where that list stood: ``scan`` reads the input
once to fingerprint it (count and SHA-256, as ``input_fingerprint`` computes them), to see
whether any fact carries a gold label, and to find repeated fact ids (a line given twice)
with 8 bytes per fact, in memory up to a cap and on disk beyond it
(``kgcheck.data.hash_spill``); every later iteration reads the input again, naming terms and
setting gold labels a batch at a time, and drops the repeats as a list of facts would.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from kgcheck.data.facts import Fact

__all__ = ["FactStream", "batched", "fact_row", "input_fingerprint"]

# Facts named (and labelled) at once while the stream passes.
NAME_BATCH = 2_000

# Id hashes gathered before they go to the spilling set at once.
_PENDING_HASHES = 1 << 16

Batch = Callable[[list[Fact]], list[Fact]]


def fact_row(fact: Fact) -> bytes:
    """Return the bytes that identify a fact by content (id, terms, label, sentence)."""
    row = [fact.id, fact.dataset, fact.subject, fact.predicate, fact.object, fact.label,
           fact.sentence]
    return json.dumps(row, ensure_ascii=False).encode("utf-8")


def input_fingerprint(facts: Iterable[Fact]) -> dict[str, Any]:
    """Identify input facts by content: their count and a SHA-256 over ids, terms and labels."""
    digest = hashlib.sha256()
    count = 0
    for fact in facts:
        digest.update(fact_row(fact) + b"\n")
        count += 1
    return {"facts": count, "sha256": digest.hexdigest()}


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Yield lists of up to ``size`` items (``itertools.batched`` from Python 3.12)."""
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


class FactStream:
    """The facts of a re-readable source, one pass at a time (see the module docstring).

    Args:
        open_facts: Returns a fresh iterator over the source's facts.
        prepare: Turns a batch of read facts into the facts checked (names, gold labels).
        label: What ``scan`` does to a batch instead (gold labels only): the fingerprint
            holds no names, and a source whose names are complete only after a whole
            pass (an RDF file) would read itself again for each batch of the first one.
        batch: How many facts ``prepare`` gets at once.

    """

    def __init__(self, open_facts: Callable[[], Iterable[Fact]],
                 prepare: Batch | None = None, batch: int = NAME_BATCH, *,
                 label: Batch | None = None) -> None:
        self._open = open_facts
        self._prepare = prepare
        self._label = label if label is not None else prepare
        self._batch = batch
        self._count: int | None = None
        self._repeated: frozenset[int] = frozenset()
        self.repeats = 0
        self.labelled = False
        self.sha256 = ""

    def scan(self) -> dict[str, Any]:
        """Read the whole input once; return its fingerprint (``facts``, ``sha256``)."""
        from kgcheck.data.hash_spill import HashSpill  # (numpy: only once a stream is read)

        digest = hashlib.sha256()
        pending: array[int] = array("q")
        count = 0
        labelled = False
        with HashSpill() as hashes:
            for fact in self._pass(dedupe=False, prepare=self._label):
                digest.update(fact_row(fact) + b"\n")
                pending.append(hash(fact.id))
                if len(pending) == _PENDING_HASHES:
                    hashes.add(pending)
                    pending = array("q")
                labelled = labelled or fact.label is not None
                count += 1
            hashes.add(pending)
            self._repeated = hashes.repeated()
        self._count = count
        self.labelled = labelled
        self.sha256 = digest.hexdigest()
        # The repeats are left out of every later pass: one more pass fingerprints the rest.
        self.repeats = 0
        if self._repeated:
            kept = input_fingerprint(self._pass(dedupe=True, prepare=self._label))
            self.repeats = count - kept["facts"]
            self._count = kept["facts"]
            self.sha256 = kept["sha256"]
        return {"facts": self._count, "sha256": self.sha256}

    def __iter__(self) -> Iterator[Fact]:
        return self._pass(dedupe=True, prepare=self._prepare)

    def __len__(self) -> int:
        if self._count is None:
            self.scan()
        return self._count or 0

    def __bool__(self) -> bool:
        return len(self) > 0

    def _pass(self, *, dedupe: bool, prepare: Batch | None) -> Iterator[Fact]:
        seen: set[str] = set()
        for batch in batched(self._open(), self._batch):
            facts = prepare(batch) if prepare else batch
            for fact in facts:
                if dedupe and self._repeated and hash(fact.id) in self._repeated:
                    if fact.id in seen:
                        continue
                    seen.add(fact.id)
                yield fact
