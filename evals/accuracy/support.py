"""Whether labels support an accuracy estimate: one rule for every surface that shows one.

Human labels estimate a KG's accuracy only when they were taken at random. A review records
per decision how its fact was chosen (``labels.csv``'s design column); this rule keeps the
decisions an estimate may use, refuses when none may be used, and warns when the labels are
no random sample. ``kgcheck estimate``, ``kgcheck.estimate`` and the review page's running
estimate all apply it, so none shows a figure another refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from kgcheck.data.labels import FILTERED, LabelRow
from kgcheck.evals.accuracy.estimators import EstimateError

__all__ = ["needs_support_check", "supporting_rows"]


def needs_support_check(rows: Sequence[LabelRow]) -> bool:
    """Tell whether any decision was taken outside a random sample (queue order or --only).

    A file without designs, or of random samples alone, is read as drawn at random.
    """
    return any(row.design == "queue" or row.design.startswith(FILTERED) for row in rows)


def supporting_rows(source: str, rows: list[LabelRow], unlabeled: int, run_size: int,
                    warnings: list[str]) -> list[LabelRow]:
    """Keep the review decisions an estimate may use; refuse or warn when none is random.

    A decision records how its fact was chosen: ``srs`` (a random sample of every verdict)
    supports the estimate; ``filtered:...`` (only F, NA or ties were reviewed) cannot, since
    it never looks at the other verdicts; ``queue`` (the run's order, from the top) is a
    random sample only when every verdict was decided. Random decisions are used alone when
    there are some.
    """
    random_rows = [r for r in rows if r.design == "srs"]
    filtered = sorted({r.design.removeprefix(FILTERED) for r in rows
                       if r.design.startswith(FILTERED)})
    others = [r for r in rows if r.design != "srs" and not r.design.startswith(FILTERED)]
    if random_rows:
        left = len(rows) - len(random_rows)
        if left:
            warnings.append(f"{source}: {left} decisions not taken in a random sample (queue "
                            "order, or --only) are left out; the estimate uses the "
                            f"{len(random_rows)} decisions of the random sample")
        return random_rows
    if filtered and not others:
        raise EstimateError(
            f"{source}: its labels come from a review of the {' and '.join(filtered)} verdicts "
            "only (--only), which says nothing about the other verdicts: no accuracy can be "
            "estimated from them. Review a random sample (kgcheck review RUN --sample N, "
            "without --only) or draw one with kgcheck sample")
    if len(rows) + unlabeled < run_size:
        how = ("taken in queue order (the run's order, from the top)" if not filtered
               else "taken in queue order or from chosen verdicts only")
        warnings.append(
            f"NOT A RANDOM SAMPLE: the {len(rows)} labels of {source} were {how}, not drawn at "
            f"random, and cover {len(rows) + unlabeled} of the run's {run_size} facts; the "
            "intervals assume a random sample and may be biased. For a sound estimate review "
            "a random sample: kgcheck review RUN --sample N")
    return rows


