"""Significance groups: which of several systems cannot be told apart on their facts.

Every pair of systems is compared with McNemar's exact test on the facts both checked with
a gold label; Holm's step-down correction (statsmodels' ``multipletests``) keeps the chance
of any false "different" at ``alpha`` across all the pairs. Systems are then given letters
in rank order (a compact letter display): two systems that share a letter are not
significantly different; each letter spans the longest run of neighbours in which no pair
differs. A pair without a shared labelled fact cannot be tested and counts as different,
so it never shares a letter by default.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from kgcheck.evals.stats.errors import missing_extra
from kgcheck.evals.stats.paired import mcnemar_counts, mcnemar_exact

__all__ = ["ALPHA", "Groups", "PairTest", "letters", "significance_groups"]

ALPHA = 0.05


@dataclass(frozen=True)
class PairTest:
    """One pair's McNemar test; ``p_holm`` is None for a pair with no shared labelled fact."""

    a: str
    b: str
    facts: int
    b_only: int
    c_only: int
    p_value: float | None
    p_holm: float | None
    different: bool


@dataclass
class Groups:
    """Letters per system (in the order given) and the pairwise tests behind them."""

    letters: dict[str, str]
    pairs: list[PairTest] = field(default_factory=list)
    alpha: float = ALPHA


def _holm(p_values: Sequence[float], alpha: float) -> tuple[list[bool], list[float]]:
    try:
        # Imported on use: statsmodels is part of the optional `stats` extra.
        from statsmodels.stats.multitest import multipletests
    except ImportError:
        raise missing_extra("statsmodels") from None
    reject, corrected, _, _ = multipletests(list(p_values), alpha=alpha, method="holm")
    return [bool(r) for r in reject], [float(p) for p in corrected]


def letters(order: Sequence[str], different: Mapping[frozenset[str], bool]) -> dict[str, str]:
    """Give letters to systems in rank ``order`` so that systems sharing one do not differ."""
    spans: list[tuple[int, int]] = []
    for i in range(len(order)):
        j = i
        while j + 1 < len(order) and not any(
                different.get(frozenset((order[k], order[j + 1])), True) for k in range(i, j + 1)):
            j += 1
        if not spans or j > spans[-1][1]:  # a span inside the previous one adds nothing
            spans.append((i, j))
    alphabet = string.ascii_lowercase
    found = {name: "" for name in order}
    for n, (i, j) in enumerate(spans):
        letter = alphabet[n] if n < len(alphabet) else f"({n + 1})"
        for k in range(i, j + 1):
            found[order[k]] += letter
    return found


def significance_groups(systems: Sequence[tuple[str, Mapping[str, str], Mapping[str, str]]],
                        *, alpha: float = ALPHA) -> Groups:
    """Group systems given best first as ``(name, gold by fact, verdict by fact)``.

    Gold labels are "T"/"F" (facts without one are left out); a verdict other than the gold
    label (NA included) is wrong.
    """
    names = [name for name, _, _ in systems]
    if len(set(names)) < len(names):
        raise ValueError(f"system names must be distinct: {names}")
    tests: list[tuple[str, str, int, int, int, float | None]] = []
    for (na, gold_a, lab_a), (nb, gold_b, lab_b) in combinations(systems, 2):
        facts = [f for f in lab_a if f in lab_b and gold_a.get(f) in ("T", "F")
                 and gold_a.get(f) == gold_b.get(f)]
        if not facts:
            tests.append((na, nb, 0, 0, 0, None))
            continue
        b, c = mcnemar_counts([gold_a[f] for f in facts], [lab_a[f] for f in facts],
                              [lab_b[f] for f in facts])
        tests.append((na, nb, len(facts), b, c, mcnemar_exact(b, c)))
    tested = [t for t in tests if t[5] is not None]
    reject, corrected = _holm([t[5] for t in tested], alpha) if tested else ([], [])  # type: ignore[misc]
    verdict = {(t[0], t[1]): (r, p) for t, r, p in zip(tested, reject, corrected, strict=True)}
    pairs = []
    for na, nb, n, b, c, p in tests:
        r, p_holm = verdict.get((na, nb), (True, None))
        pairs.append(PairTest(na, nb, n, b, c, p, p_holm, r))
    different = {frozenset((t.a, t.b)): t.different for t in pairs}
    return Groups(letters(names, different), pairs, alpha)
