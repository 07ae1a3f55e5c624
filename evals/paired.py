"""Paired comparison of two runs over the same facts: McNemar's test on who got each fact right.

Only facts both runs answered and that carry a gold (or review) label count. The test is
statsmodels' ``mcnemar``: exact (binomial) when the discordant pairs are few, the
chi-square with continuity correction otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["EXACT_BELOW", "mcnemar_paired"]

# Discordant pairs below which the exact binomial test is used (statsmodels' advice).
EXACT_BELOW = 25


def mcnemar_paired(a_right: Sequence[bool], b_right: Sequence[bool]) -> dict[str, Any]:
    """Return the 2x2 table of (A right, B right), McNemar's statistic and p-value."""
    if len(a_right) != len(b_right):
        raise ValueError("the two runs' outcomes differ in length")
    both = sum(1 for a, b in zip(a_right, b_right, strict=True) if a and b)
    only_a = sum(1 for a, b in zip(a_right, b_right, strict=True) if a and not b)
    only_b = sum(1 for a, b in zip(a_right, b_right, strict=True) if b and not a)
    neither = len(a_right) - both - only_a - only_b
    table = [[both, only_a], [only_b, neither]]
    result: dict[str, Any] = {"n": len(a_right), "table": table, "only_a": only_a,
                              "only_b": only_b, "statistic": None, "p_value": None,
                              "exact": None}
    if only_a + only_b == 0:
        return result  # no discordant pair: nothing to test
    try:
        from statsmodels.stats.contingency_tables import mcnemar
    except ImportError:
        result["missing"] = "statsmodels is not installed: pip install 'kgcheck[view]'"
        return result
    exact = only_a + only_b < EXACT_BELOW
    test = mcnemar(table, exact=exact, correction=True)
    result.update(statistic=float(test.statistic), p_value=float(test.pvalue), exact=exact)
    return result
