"""Choose which facts of a stream to check, without holding the stream in memory.

``--limit N`` takes the first N; ``--sample N --seed S`` a uniform random sample in one pass
(reservoir sampling, Algorithm R); ``--stratify KEY`` a sample per stratum, either
proportional to the strata (a counting pass, then one reservoir per stratum) or
``--per-stratum K``; ``--ids`` the facts with the given ids. The same seed over the same
stream gives the same sample, and the chosen facts keep the stream's order.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from kgcheck.arguments import Arg, ArgumentError, ArgumentNote, Placeholder, literal
from kgcheck.data.facts import Fact

Stream = Callable[[], Iterable[Fact]]
Item = TypeVar("Item")


@runtime_checkable
class RawRecords(Protocol):
    """A stream of facts that can also be sampled as unparsed records (lines of a file).

    Its records come in the order of its facts, one per fact, so a sample drawn over them
    with a seed is the sample drawn over the facts with that seed; only the chosen records
    are parsed.
    """

    def __call__(self) -> Iterable[Fact]:
        """Return a fresh iterator of the facts (the streaming parser)."""
        ...

    def records(self) -> Iterator[Any]:
        """Yield the records of the facts, unparsed, in one fresh pass."""
        ...

    def record_key(self, stratify: str) -> Callable[[Any], str]:
        """Return the stratum of a record, as ``STRATA[stratify]`` gives that of its fact."""
        ...

    def parse_chosen(self, chosen: list[tuple[int, Any]]) -> list[tuple[int, Fact]] | None:
        """Parse the chosen records into facts; None when only the full parse can."""
        ...


def label_stratum(label: bool | None) -> str:
    """Return the stratum of a gold label: ``T``, ``F`` or ``unknown``."""
    return "unknown" if label is None else ("T" if label else "F")


STRATA: dict[str, Callable[[Fact], str]] = {
    "predicate": lambda f: f.predicate,
    "subject": lambda f: f.subject,
    "dataset": lambda f: f.dataset,
    "label": lambda f: label_stratum(f.label),
}


class SelectionError(ArgumentError):
    """A selection that cannot be made (bad sizes, an unknown key, ids not in the input)."""


@dataclass
class Selection:
    """The chosen facts, in input order, and notes about the choice for the user."""

    facts: list[Fact]
    seen: int | None = None
    notes: list[str] = field(default_factory=list)


def parse_ids(text: str) -> list[str]:
    """Read ``ID,ID,...`` or ``@FILE`` (one id per line, or comma-separated) into ids."""
    text = text.strip()
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise SelectionError(f"--ids {path}: cannot be read ({exc})") from None
    ids = [part.strip() for line in text.splitlines() for part in line.split(",")]
    ids = [i for i in ids if i]
    if not ids:
        raise SelectionError("--ids names no id")
    return ids


def _stratum_key(name: str) -> Callable[[Fact], str]:
    try:
        return STRATA[name]
    except KeyError:
        raise SelectionError(f"{{stratify}}: unknown key; known: {', '.join(sorted(STRATA))}",
                             stratify=Arg("stratify", name)) from None


@runtime_checkable
class CountedRecords(RawRecords, Protocol):
    """Raw records that can be counted, and picked by index, without a step per record."""

    def count_records(self) -> int:
        """Return how many records (facts) there are, in one fresh pass."""
        ...

    def pick(self, indices: Sequence[int]) -> list[tuple[int, Any]]:
        """Return ``(index, record)`` for the records at these indices (ascending)."""
        ...


@runtime_checkable
class DrawnRecords(RawRecords, Protocol):
    """Raw records that are drawn from while they are counted, in one pass."""

    def draw(self, reservoir: Reservoir) -> tuple[int, list[tuple[int, Any]]]:
        """Advance the reservoir over the records; return their count and the kept ones.

        The kept records come as ``(index, record)``, ascending.
        """
        ...


def reservoir_indices(total: int, size: int, rng: random.Random) -> list[int]:
    """Return the indices ``_reservoir`` keeps of ``total`` items, from the count alone.

    Algorithm R draws the same random numbers whatever the items are (one per item past
    the first ``size``), so the kept positions follow from how many items there are.
    """
    reservoir = Reservoir(size, rng)
    reservoir.advance(total)
    return reservoir.kept


class Reservoir:
    """The indices Algorithm R keeps, advanced by a count of items at a time.

    Advancing by counts ``a`` then ``b`` keeps what advancing by ``a + b`` keeps, with the
    same draws: a stream read block by block is drawn from as it is read.
    """

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size = size
        self.rng = rng
        self.seen = 0
        self.kept: list[int] = []

    def advance(self, items: int) -> None:
        """Draw for the next ``items`` items."""
        size, rng, kept = self.size, self.rng, self.kept
        last = self.seen + items
        kept.extend(range(len(kept), min(size, last)))
        seen = max(self.seen, size) + 1
        self.seen = last
        if type(rng) is not random.Random:  # a subclass may draw its numbers otherwise
            for count in range(seen, last + 1):
                slot = rng.randrange(count)
                if slot < size:
                    kept[slot] = count - 1
            return
        seen = _draw_one_by_one(rng, kept, size, seen, min(last, _BULK_FROM - 1))
        seen = _draw_in_bulk(rng, kept, size, seen, min(last, 2**32 - 1))
        _draw_one_by_one(rng, kept, size, seen, last)


# From this many items on, Algorithm R's draws are made from words drawn in bulk.
_BULK_FROM = 4096
_BULK_WORDS = 1 << 16


def _draw_one_by_one(rng: random.Random, kept: list[int], size: int, seen: int, last: int
                     ) -> int:
    """Draw Algorithm R's slots for items ``seen`` to ``last``; return the next item's count."""
    # randrange(n) is getrandbits(n.bit_length()) drawn until below n (Random._randbelow);
    # done inline, the bit count fixed per power of two.
    bits = rng.getrandbits
    while seen <= last:
        width = seen.bit_length()
        top = min(last, (1 << width) - 1)
        for count in range(seen, top + 1):
            slot = bits(width)
            while slot >= count:
                slot = bits(width)
            if slot < size:
                kept[slot] = count - 1
        seen = top + 1
    return seen


def _draw_in_bulk(rng: random.Random, kept: list[int], size: int, seen: int, last: int) -> int:
    """Draw as ``_draw_one_by_one`` does, from the generator's 32-bit words drawn in bulk.

    ``getrandbits(k)`` for k up to 32 is the next word's top k bits, and
    ``getrandbits(32 * n)`` is the next n words, the first the lowest: the same slots come
    from words drawn many at once. A word is rejected when its slot is not below the
    item's count; the count of a chunk's k-th word lies between its first count and k
    more, so only the words between are judged one by one. The generator is left after
    the words used, as the draws one by one leave it.
    """
    state = rng.getstate()
    words = np.empty(0, dtype=np.uint32)
    used = 0
    count = seen
    while count <= last:
        width = count.bit_length()
        top = min(last, (1 << width) - 1)
        while count <= top:
            if used == len(words):
                state = rng.getstate()
                drawn = rng.getrandbits(32 * _BULK_WORDS).to_bytes(4 * _BULK_WORDS, "little")
                words, used = np.frombuffer(drawn, dtype="<u4"), 0
            # At most as many words as items left, so that the chunk ends within the width.
            chunk = min(top - count + 1, max(1, count >> 6), len(words) - used)
            slots = (words[used:used + chunk] >> (32 - width)).astype(np.int64)
            used += chunk
            taken = slots < count  # below the least count a word can meet: an item's slot
            unsure = np.flatnonzero(~taken & (slots < count + np.arange(chunk)))
            if len(unsure):
                # The items sure before each unsure word, then those it and the others add.
                last_unsure = int(unsure[-1]) + 1
                before: list[int] = (np.cumsum(taken[:last_unsure])
                                     - taken[:last_unsure])[unsure].tolist()
                positions: list[int] = unsure.tolist()
                unsure_slots: list[int] = slots[unsure].tolist()
                more = 0
                for at, slot, sure in zip(positions, unsure_slots, before, strict=True):
                    if slot < count + sure + more:
                        taken[at] = True
                        more += 1
            items = slots[taken]
            for index in np.flatnonzero(items < size).tolist():
                kept[int(items[index])] = count + index - 1
            count += len(items)
    rng.setstate(state)
    if used:
        rng.getrandbits(32 * used)
    return count


def _reservoir(items: Iterable[tuple[int, Item]], size: int, rng: random.Random
               ) -> tuple[list[tuple[int, Item]], int]:
    """Keep a uniform sample of ``size`` items (Algorithm R); return it and the count seen."""
    kept: list[tuple[int, Item]] = []
    seen = 0
    for seen, item in enumerate(items, start=1):  # noqa: B007 - seen is the total
        if len(kept) < size:
            kept.append(item)
        else:
            slot = rng.randrange(seen)
            if slot < size:
                kept[slot] = item
    return kept, seen


def largest_remainder(sizes: Mapping[str, int], total: int, *, minimum: int = 0
                      ) -> dict[str, int]:
    """Split ``total`` over strata in proportion to their sizes (largest remainders).

    Each stratum gets the whole part of its exact share, at least ``minimum`` (never more
    than its size); the units still to give go one each to the largest remainders, ties
    by stratum name, round after round while a stratum has room. Minimums that push the
    sum past ``total`` are paid back by the strata furthest over their exact share. The
    one allocator of sampling (``kgcheck sample``) and of the accuracy designs.
    """
    size = sum(sizes.values())
    if size <= 0:
        return dict.fromkeys(sizes, 0)
    exact = {key: total * n / size for key, n in sizes.items()}
    counts = {key: min(sizes[key], max(minimum, math.floor(exact[key]))) for key in sizes}
    order = sorted(sizes, key=lambda k: (-(exact[k] - math.floor(exact[k])), k))
    grew = True
    while sum(counts.values()) < total and grew:
        grew = False
        for key in order:
            if sum(counts.values()) >= total:
                break
            if counts[key] < sizes[key]:
                counts[key] += 1
                grew = True
    while sum(counts.values()) > total:
        over = [k for k in sorted(counts) if counts[k] > minimum]
        if not over:
            break
        counts[max(over, key=lambda k: counts[k] - exact[k])] -= 1
    return counts


def _stratified(stream: Callable[[], Iterable[Item]], key: Callable[[Item], str],
                rng: random.Random, *, total: int | None, per_stratum: int | None,
                notes: list[str]) -> tuple[list[tuple[int, Item]], int]:
    if per_stratum is not None:
        quota: Callable[[str], int] = lambda _k: per_stratum  # noqa: E731
        counts = None
    else:
        counts = Counter(key(f) for f in stream())
        quotas = largest_remainder(counts, min(total or 0, sum(counts.values())))
        quota = quotas.__getitem__
    reservoirs: dict[str, list[tuple[int, Item]]] = {}
    seen: Counter[str] = Counter()
    n = -1
    for n, item in enumerate(stream()):
        stratum = key(item)
        size = quota(stratum)
        seen[stratum] += 1
        kept = reservoirs.setdefault(stratum, [])
        if len(kept) < size:
            kept.append((n, item))
        elif size:
            slot = rng.randrange(seen[stratum])
            if slot < size:
                kept[slot] = (n, item)
    small = sorted(k for k, c in seen.items() if per_stratum and c < per_stratum)
    if small:
        notes.append(f"{len(small)} of {len(seen)} strata have fewer than {per_stratum} facts "
                     f"(e.g. {small[0]!r}): all of their facts are checked")
    chosen = [item for kept in reservoirs.values() for item in kept]
    if counts is not None and len(counts) > len(chosen):
        notes.append(ArgumentNote(
            f"{len(counts)} strata but a sample of {len(chosen)}: the smallest strata get no "
            "fact; use {per_stratum} for K facts of each",
            per_stratum=Arg("per_stratum", Placeholder("K"))))
    return chosen, n + 1


def select_facts(facts: Iterable[Fact] | Stream, *, limit: int | None = None,
                 sample: int | None = None, seed: int | None = 0,
                 stratify: str | None = None, per_stratum: int | None = None,
                 ids: Sequence[str] | None = None) -> Selection:
    """Choose facts from a stream; see the module docstring for each way.

    ``facts`` is an iterable, or a function returning a fresh iterator (needed only for a
    proportional ``stratify``, which counts the strata first). ``ids`` filters first, then
    ``sample``/``stratify`` draw, then ``limit`` caps the result. A ``RawRecords`` stream
    (an N-Triples, N-Quads, JSON Lines, CSV or TSV file) is drawn from over its unparsed
    lines, with the same choice as over its facts.
    """
    for name, value in (("limit", limit), ("sample", sample), ("per_stratum", per_stratum)):
        if value is not None and value < 1:
            raise SelectionError("{value} must be at least 1", value=Arg(name, value))
    if per_stratum is not None and stratify is None:
        raise SelectionError("{per_stratum} needs {stratify}",
                             per_stratum=Arg("per_stratum", per_stratum),
                             stratify=Arg("stratify", Placeholder("KEY")))
    if stratify is not None and sample is None and per_stratum is None:
        raise SelectionError("{stratify} needs {sample} (proportional) or {per_stratum}",
                             stratify=Arg("stratify", stratify),
                             sample=Arg("sample", Placeholder("N")),
                             per_stratum=Arg("per_stratum", Placeholder("K")))
    key = _stratum_key(stratify) if stratify is not None else None
    if callable(facts):
        opener: Stream = facts
    elif isinstance(facts, Sequence):
        opener = lambda: facts  # noqa: E731 - a list can be read twice
    else:
        once = facts
        opener = lambda: once  # noqa: E731 - a one-shot iterator: read once only
        if key is not None and per_stratum is None:
            kept_all = list(once)
            opener = lambda: kept_all  # noqa: E731
    wanted = set(ids) if ids else None

    def stream() -> Iterator[Fact]:
        source = iter(opener())
        if wanted is None:
            return source
        return _by_ids(source, wanted)

    notes: list[str] = []
    rng = random.Random(seed)
    seen: int | None = None
    drawn = None
    if (wanted is None and isinstance(facts, RawRecords)
            and (sample is not None or per_stratum is not None)):
        drawn = _draw_records(facts, rng, stratify, sample=sample, per_stratum=per_stratum,
                              notes=notes)
        if drawn is None:  # the chosen records need the whole file parsed: draw again
            notes, rng = [], random.Random(seed)
    if drawn is not None:
        chosen, seen = drawn
    elif key is not None:
        chosen, seen = _stratified(stream, key, rng, total=sample, per_stratum=per_stratum,
                                   notes=notes)
    elif sample is not None:
        chosen, seen = _reservoir(enumerate(stream()), sample, rng)
        if seen <= sample:
            notes.append(ArgumentNote(f"{{sample}} asks for more facts than there are "
                                      f"({seen:,}): all of them are checked",
                                      sample=Arg("sample", sample)))
    else:
        source: Iterable[Fact] = stream()
        if limit is not None and wanted is None:
            # Read no further than needed: the first N of a huge file are there at once.
            source, limit = islice(source, limit), None
        chosen = list(enumerate(source))
    result = _distinct([fact for _n, fact in sorted(chosen, key=lambda item: item[0])], notes)
    if wanted is not None:
        found = {f.id for f in result} if sample is None and key is None else None
        if found is not None and (missing := [i for i in ids or [] if i not in found]):
            raise SelectionError(f"{{ids}}: {len(missing)} id(s) not in the input, e.g. "
                                 f"{literal(', '.join(missing[:3]))}", ids=Arg("ids"))
    if limit is not None:
        result = result[:limit]
    return Selection(result, seen, notes)


def _draw_records(records: RawRecords, rng: random.Random, stratify: str | None, *,
                  sample: int | None, per_stratum: int | None, notes: list[str]
                  ) -> tuple[list[tuple[int, Fact]], int] | None:
    """Draw over unparsed records as over facts (same rng calls), then parse the chosen."""
    if stratify is not None:
        chosen, seen = _stratified(records.records, records.record_key(stratify), rng,
                                   total=sample, per_stratum=per_stratum, notes=notes)
    elif isinstance(records, DrawnRecords):
        seen, chosen = records.draw(Reservoir(sample or 0, rng))
    elif isinstance(records, CountedRecords):
        seen = records.count_records()
        chosen = records.pick(sorted(reservoir_indices(seen, sample or 0, rng)))
    else:
        chosen, seen = _reservoir(enumerate(records.records()), sample or 0, rng)
    facts = records.parse_chosen(sorted(chosen, key=lambda item: item[0]))
    if facts is None:
        return None
    if stratify is None and seen <= (sample or 0):
        notes.append(ArgumentNote(f"{{sample}} asks for more facts than there are "
                                  f"({seen:,}): all of them are checked",
                                  sample=Arg("sample", sample)))
    return facts, seen


def _distinct(facts: list[Fact], notes: list[str]) -> list[Fact]:
    """Drop repeats of a fact id among the chosen (a line repeated in an RDF file)."""
    first: dict[str, Fact] = {}
    for fact in facts:
        first.setdefault(fact.id, fact)
    kept = list(first.values())
    if len(kept) < len(facts):
        notes.append(f"{len(facts) - len(kept)} chosen fact(s) repeat another (the same "
                     "triple twice in the input): each is checked once")
    return kept


def _by_ids(facts: Iterator[Fact], wanted: set[str]) -> Iterator[Fact]:
    """Yield the facts whose id is wanted, stopping once all of them were found."""
    left = set(wanted)
    for fact in facts:
        if fact.id in left:
            left.discard(fact.id)
            yield fact
            if not left:
                return


__all__ = ["STRATA", "CountedRecords", "DrawnRecords", "RawRecords", "Reservoir", "Selection",
           "SelectionError", "label_stratum", "parse_ids", "reservoir_indices", "select_facts"]
