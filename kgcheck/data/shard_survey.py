"""A whole file's facts settled shard by shard: a survey first, then each shard's facts.

A run that checks every fact of a large file on a cluster reads the file in shards
(``kgcheck.data.shards``) twice, each time one task per shard. The survey settles what
needs the whole file and hands back small results only: per shard a count and a digest of
its facts (which fingerprint the input, ``combine_digests``), the names its naming triples
give to terms (merged in file order by ``merge_names``), and a 16-byte digest of each fact
id, in partitions by digest, so that ``find_repeats`` (one task per partition) finds the ids
repeated anywhere in the file with memory for its partition only. ``shard_facts`` then
gives one shard's facts as a one-pass read of the file gives them: parsed, kept by the
predicate filter, with their gold labels, named as after a pass over the whole file, and
without the facts that repeat an earlier one (a triple given twice, or in two graphs).
JSON Lines ids must be unique: a repeat is the error one pass raises (``repeated_id``).
"""

from __future__ import annotations

import copy
import hashlib
import io
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgcheck.data.fact_stream import NAME_BATCH, batched, fact_row
from kgcheck.data.facts import Fact
from kgcheck.data.gold import GoldLabels
from kgcheck.data.input_uri import is_input_uri, read_blocks
from kgcheck.data.predicates import PredicateFilter
from kgcheck.data.rdf import (
    FORMATS,
    NameEntry,
    Names,
    RdfReader,
    is_name_triple,
    rdf_terms,
    row_fact,
)
from kgcheck.data.rdf import triple_row as _triple_row
from kgcheck.data.shards import Shard, shard_bytes
from kgcheck.data.sources import TriplesError
from kgcheck.data.triples import jsonl_facts, repeated_id

__all__ = ["DROP_DTYPE", "ID_DTYPE", "Repeats", "ShardSource", "ShardSurvey", "Survey",
           "combine_digests", "fact_id_at", "find_repeats", "head_facts", "merge_names",
           "shard_drops", "shard_facts", "survey_shard"]

# One fact id as the survey hands it on: its digest (two halves), where the fact is (shard,
# and place among the shard's parsed facts) and whether the predicate filter keeps it.
ID_DTYPE = np.dtype([("hi", "<u8"), ("lo", "<u8"), ("shard", "<u4"), ("ordinal", "<u4"),
                     ("kept", "u1")])
# A fact left out because it repeats an earlier one: its shard and place.
DROP_DTYPE = np.dtype([("shard", "<u4"), ("ordinal", "<u4")])
# The fingerprint of a sequence of facts: sum of h_i * R^(n-1-i) modulo P, h_i the SHA-256
# of fact i's row. Parts of the sequence combine into the whole (``combine_digests``), so
# shards fingerprint the file wherever it is cut.
_P = 2**255 - 19
_R = int.from_bytes(hashlib.sha256(b"kgcheck input digest").digest(), "big") % _P
DIGEST_OF = "SHA-256 of each fact, in file order, combined as a polynomial modulo 2^255-19"

# A shard's names (the best per term, as ``Names.best``) and whether they overflowed the cap.
NamesPart = tuple[dict[str, NameEntry], bool]


@dataclass(frozen=True)
class ShardSource:
    """What every shard task needs to know of the input: the file and how facts are kept."""

    path: str
    dataset: str
    gold: GoldLabels | None = None
    predicates: PredicateFilter | None = None
    # The ETag of an input at a URL as the run was planned (every read checks it); "": local.
    stamp: str = ""

    @property
    def suffix(self) -> str:
        """The file's format, by extension."""
        return Path(self.path).suffix.lower()

    @property
    def rdf(self) -> bool:
        """Whether the file is RDF (N-Triples, N-Quads): its facts' terms have names."""
        return self.suffix in FORMATS


@dataclass
class ShardSurvey:
    """What the survey of one shard hands back (besides its names and id digests)."""

    index: int
    # Facts parsed (ids of JSON Lines are counted over these), and those the filter keeps.
    parsed: int = 0
    kept: int = 0
    digest: int = 0
    labelled: bool = False
    # Per pattern of the predicate filter (include, then exclude): facts it matched.
    matched: list[int] = field(default_factory=list)


@dataclass
class Repeats:
    """What one partition of the id digests holds: repeats of kept facts, and the first one.

    ``first`` is ``((shard, ordinal) of the earliest repeat, (shard, ordinal) of the fact it
    repeats)``; None when no id repeats.
    """

    repeats: int = 0
    first: tuple[tuple[int, int], tuple[int, int]] | None = None


@dataclass
class Survey:
    """A whole file surveyed: the facts to check, the fingerprint, and what the shards need.

    ``names`` and ``drops`` are the engine's handles on the merged names and the repeats'
    places (Ray object references for the Ray engine); the driver never holds their data.
    """

    shards: list[Shard]
    facts: int
    repeats: int
    digest: int
    labelled: bool
    seen: int
    matched: list[int]
    names: Any = None
    drops: Any = None

    def fingerprint(self) -> dict[str, Any]:
        """Return the input's identity as ``run.json`` keeps it."""
        return {"facts": self.facts, "digest": f"{self.digest:064x}", "digest_of": DIGEST_OF}


def combine_digests(parts: Iterable[tuple[int, int]]) -> int:
    """Combine (digest, count) of consecutive parts into the digest of their sequence."""
    total = 0
    for digest, count in parts:
        total = (total * pow(_R, count, _P) + digest) % _P
    return total


def _parsed(source: ShardSource, shard: Shard, data: bytes,
            names: Names | None = None) -> Iterator[Fact]:
    """Yield a shard's facts in order; the naming triples go to ``names`` (RDF)."""
    where = source.path  # as given: a URL stays whole in messages
    if source.rdf:
        for subject, predicate, obj in rdf_terms(data, FORMATS[source.suffix], where,
                                                 shard.first_line):
            if is_name_triple(predicate):
                if names is not None:
                    names.offer(str(subject), predicate.value, obj)
            else:
                yield row_fact(_triple_row(subject, predicate, obj), source.dataset)
        return
    yield from jsonl_facts(io.BytesIO(data), where, source.dataset, shard.first_line)


def head_facts(source: ShardSource, block: int = 1024 * 1024) -> Iterator[Fact]:
    """Yield a file's facts from its start, read block by block (a look at a file at a URL).

    The naming triples are passed over; the predicate filter and gold labels are not applied.
    """
    start, first_line, rest = 0, 1, b""
    for data in itertools.chain(read_blocks(source.path, block), [None]):
        # Whole lines only, but the last one whatever it ends with.
        held = rest + data if data is not None else rest
        cut = held.rfind(b"\n") + 1 if data is not None else len(held)
        part, rest = held[:cut], held[cut:]
        if part:
            yield from _parsed(source, Shard(source.path, source.dataset, start,
                                             start + cut, first_line), part)
        start += cut
        first_line += part.count(b"\n")


def _labelled(fact: Fact, gold: GoldLabels | None) -> Fact:
    label = gold.label_of(fact) if gold is not None else None
    return fact if label is None else fact.model_copy(update={"label": label})


def _id_digest(fact_id: str) -> tuple[int, int]:
    raw = hashlib.blake2b(fact_id.encode("utf-8"), digest_size=16).digest()
    return int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")


def survey_shard(source: ShardSource, shard: Shard, index: int, partitions: int
                 ) -> tuple[ShardSurvey, NamesPart, list[np.ndarray]]:
    """Survey one shard: its counts and digest, its names, its ids in ``partitions`` parts.

    Raises:
        TriplesError: a malformed line, naming the file and its line.

    """
    chooser = copy.deepcopy(source.predicates)
    names = Names()
    found = ShardSurvey(index)
    digest = 0
    his: list[int] = []
    los: list[int] = []
    kept_flags: list[int] = []
    for fact in _parsed(source, shard, shard_bytes(shard, source.stamp), names):
        hi, lo = _id_digest(fact.id)
        his.append(hi)
        los.append(lo)
        keep = chooser is None or chooser.keeps(fact)
        kept_flags.append(keep)
        if not keep:
            continue
        fact = _labelled(fact, source.gold)
        found.kept += 1
        found.labelled = found.labelled or fact.label is not None
        row = int.from_bytes(hashlib.sha256(fact_row(fact) + b"\n").digest(), "big")
        digest = (digest * _R + row) % _P
    found.parsed = len(his)
    found.digest = digest
    if chooser is not None:
        found.matched = [p.matched for p in (*chooser.include, *chooser.exclude)]
    ids = np.empty(found.parsed, ID_DTYPE)
    ids["hi"] = np.array(his, dtype=np.uint64)
    ids["lo"] = np.array(los, dtype=np.uint64)
    ids["shard"] = index
    ids["ordinal"] = np.arange(found.parsed, dtype=np.uint32)
    ids["kept"] = np.array(kept_flags, dtype=np.uint8)
    part = ids["hi"] % np.uint64(max(1, partitions))
    parts = [ids[part == j] for j in range(max(1, partitions))]
    return found, (names.best, names.overflowed), parts


def merge_names(parts: Iterable[NamesPart]) -> NamesPart:
    """Merge the shards' names in file order, as one pass over the file keeps them."""
    names = Names()
    for best, overflowed in parts:
        names.merge(best, overflowed=overflowed)
    return names.best, names.overflowed


def find_repeats(parts: Sequence[np.ndarray]) -> tuple[np.ndarray, Repeats]:
    """Find, among one partition's ids of every shard, the facts that repeat an earlier one.

    Returns their places (sorted by shard and ordinal) and the count of repeated kept
    facts with the earliest repeat.
    """
    ids = np.concatenate(parts) if parts else np.empty(0, ID_DTYPE)
    if len(ids) < 2:
        return np.empty(0, DROP_DTYPE), Repeats()
    ordered = ids[np.lexsort((ids["ordinal"], ids["shard"], ids["lo"], ids["hi"]))]
    same = ((ordered["hi"][1:] == ordered["hi"][:-1])
            & (ordered["lo"][1:] == ordered["lo"][:-1]))
    at = np.flatnonzero(same) + 1  # every fact of a group but its first (in file order)
    drops = np.empty(len(at), DROP_DTYPE)
    drops["shard"] = ordered["shard"][at]
    drops["ordinal"] = ordered["ordinal"][at]
    drops.sort(order=["shard", "ordinal"])
    found = Repeats(int(ordered["kept"][at].sum()))
    if len(at):
        earliest = int(at[np.lexsort((ordered["ordinal"][at], ordered["shard"][at]))[0]])
        first = earliest
        while first > 0 and same[first - 1]:
            first -= 1
        found.first = ((int(ordered["shard"][earliest]), int(ordered["ordinal"][earliest])),
                       (int(ordered["shard"][first]), int(ordered["ordinal"][first])))
    return drops, found


def shard_drops(parts: Sequence[np.ndarray], index: int) -> set[int]:
    """Return the places of shard ``index``'s facts that repeat an earlier fact."""
    dropped: set[int] = set()
    for drops in parts:
        low, high = np.searchsorted(drops["shard"], [index, index + 1])
        dropped.update(int(n) for n in drops["ordinal"][low:high])
    return dropped


def repeated_ids(source: ShardSource, shards: Sequence[Shard], parsed: Sequence[int],
                 first: tuple[tuple[int, int], tuple[int, int]]) -> Exception:
    """Return the error one pass raises for the earliest repeated JSON Lines id."""
    (shard, ordinal), (earlier_shard, earlier) = first
    before = [sum(parsed[:i]) for i in (shard, earlier_shard)]
    fact_id = fact_id_at(source, shards[shard], ordinal)
    return repeated_id(source.path, fact_id, before[1] + earlier + 1,
                       before[0] + ordinal + 1)


def fact_id_at(source: ShardSource, shard: Shard, ordinal: int) -> str:
    """Return the id of the fact at ``ordinal`` among a shard's parsed facts."""
    for n, fact in enumerate(_parsed(source, shard, shard_bytes(shard, source.stamp))):
        if n == ordinal:
            return fact.id
    raise IndexError(f"{shard.path}: no fact {ordinal} in bytes {shard.start}-{shard.end}")


def shard_facts(source: ShardSource, shard: Shard, drops: set[int],
                names: NamesPart | None) -> Iterator[Fact]:
    """Yield the facts of one shard to check, as a one-pass read of the file gives them.

    ``drops`` are the places of the repeats (``shard_drops``); ``names`` the merged names
    (``merge_names``). Past the names' cap the shard's terms are looked up in the file's
    naming triples (a parse of the file), as one pass does for the facts it keeps.
    """
    chooser = copy.deepcopy(source.predicates)
    data = shard_bytes(shard, source.stamp)

    def kept() -> Iterator[Fact]:
        for ordinal, fact in enumerate(_parsed(source, shard, data)):
            if ordinal not in drops and (chooser is None or chooser.keeps(fact)):
                yield _labelled(fact, source.gold)

    if not source.rdf or names is None:
        yield from kept()
        return
    best, overflowed = names
    found = Names()
    if overflowed:
        if is_input_uri(source.path):
            raise TriplesError(f"{source.path}: names more than {Names().cap:,} terms; the "
                               "names past that are looked up in a local file only: give a "
                               "local copy of it")
        wanted = {term for fact in kept() if fact.rdf for term in fact.rdf.values()}
        found = RdfReader(source.path, source.dataset).names_of(wanted)
    else:
        found.merge(best)
    for batch in batched(kept(), NAME_BATCH):
        yield from found.apply(batch)
