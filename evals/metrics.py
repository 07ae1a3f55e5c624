"""Scores of verdicts against gold labels and across models (REFERENCE.md section 3).

Every metric is a small pure function over plain sequences, so graphs, reports and tests
share one definition. Labels are ``"T"``, ``"F"`` or ``"NA"`` (invalid); gold labels are
``True``/``False`` (``None`` = unlabelled, skipped).

NA answers are neither T nor F: each counts as a miss for its gold class in F1 (a false
negative, never a false positive), and is also reported on its own (``invalid``). A class
absent from the gold labels has no precision, recall or F1 (None, printed "-"), not 0.

NEI (not enough evidence, from the abstaining prompt variants) is counted the study's way
in the study's scores: like NA, a miss for its gold class. Beside them, ``coverage`` is the
share of answers that are not NEI, and ``accuracy_covered`` / ``f1_*_covered`` score only
the covered facts (those a model did not abstain on), so a model that abstains where it
does not know is not scored as if it had guessed wrong.

Consensus: a fact's votes are tallied by ``kgcheck.graphs.votes.tally``, the same rule the
consensus graph and self-consistency use (a strict majority of the T/F votes; an even split
is a tie; NA votes take no side).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from kgcheck.graphs.votes import TIE, tally

# The verdicts that are answers, the classes scored (NA is counted apart, as no answer).
ANSWER_LABELS = ("T", "F")
# A record's gold mark as a label (anything else: unlabelled).
GOLD = {"T": True, "F": False}
# The labels besides T and F, in the order tables give them columns.
OTHER_LABELS = ("NEI", "NA")


class MetricInputError(ValueError):
    """Inputs to a metric that do not fit together (lengths, labels)."""


# How many facts have each (gold, answer) pair: the counts every score is computed from, so
# that scores of many verdicts need memory for the pairs, not for the verdicts.
Pairs = Mapping[tuple[Any, str], int]
# How many verdict records have each (predicate, gold mark, label): what a run's summary
# scores are computed from (``score_counts``), mergeable across parts of a run.
KeyCounts = Mapping[tuple[Any, Any, str], int]


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _check_lengths(gold: Sequence[Any], pred: Sequence[Any]) -> None:
    if len(gold) != len(pred):
        raise MetricInputError(f"gold has {len(gold)} labels but pred has {len(pred)}")


def pair_counts(gold: Sequence[bool | None], pred: Sequence[str]) -> Counter[tuple[Any, str]]:
    """Count the (gold, answer) pairs of two aligned sequences."""
    _check_lengths(gold, pred)
    return Counter(zip(gold, pred, strict=True))


def _scored(pairs: Pairs) -> dict[tuple[Any, str], int]:
    """Keep the labelled pairs (gold not None)."""
    return {(g, p): n for (g, p), n in pairs.items() if g is not None and n}


def precision(tp: int, fp: int) -> float:
    """Share of a class's predictions that are right; 0 when the class is never predicted."""
    return _ratio(tp, tp + fp)


def recall(tp: int, fn: int) -> float:
    """Share of a class's gold members found; 0 when the class never occurs."""
    return _ratio(tp, tp + fn)


def f1(tp: int, fp: int, fn: int) -> float:
    """F1 from counts; 0 when the class never occurs and is never predicted."""
    return _ratio(2 * tp, 2 * tp + fp + fn)


def confusion_of(pairs: Pairs, cls: str) -> tuple[int, int, int]:
    """Count ``(tp, fp, fn)`` of class ``"T"`` or ``"F"`` from (gold, answer) counts."""
    if cls not in ANSWER_LABELS:
        raise MetricInputError(f"class must be 'T' or 'F', got {cls!r}")
    truth = cls == "T"
    tp = fp = fn = 0
    for (g, p), n in _scored(pairs).items():
        tp += n if g is truth and p == cls else 0
        fp += n if g is not truth and p == cls else 0
        fn += n if g is truth and p != cls else 0
    return tp, fp, fn


def confusion(gold: Sequence[bool | None], pred: Sequence[str], cls: str) -> tuple[int, int, int]:
    """Count ``(tp, fp, fn)`` for class ``"T"`` or ``"F"``; NA is a miss for its gold class."""
    return confusion_of(pair_counts(gold, pred), cls)


def _class_scores_of(pairs: Pairs, cls: str) -> dict[str, float | None]:
    tp, fp, fn = confusion_of(pairs, cls)
    if tp + fn == 0:
        return {"precision": None, "recall": None, "f1": None}
    return {"precision": precision(tp, fp), "recall": recall(tp, fn), "f1": f1(tp, fp, fn)}


def class_scores(gold: Sequence[bool | None], pred: Sequence[str],
                 cls: str) -> dict[str, float | None]:
    """Precision, recall and F1 of one class (``"T"`` or ``"F"``).

    A class absent from the gold labels has no score (None, shown as "-"): a run whose
    facts are all true says nothing about how well false facts are found.
    """
    return _class_scores_of(pair_counts(gold, pred), cls)


def _f1_pair_of(pairs: Pairs) -> tuple[float | None, float | None]:
    return _class_scores_of(pairs, "T")["f1"], _class_scores_of(pairs, "F")["f1"]


def f1_true_false(gold: Sequence[bool | None],
                  pred: Sequence[str]) -> tuple[float | None, float | None]:
    """F1(T) and F1(F), the study's pair of scores (None for a class absent from gold)."""
    return _f1_pair_of(pair_counts(gold, pred))


def _balanced_accuracy_of(pairs: Pairs) -> float | None:
    recalls = []
    for cls in ANSWER_LABELS:
        tp, _, fn = confusion_of(pairs, cls)
        if tp + fn:
            recalls.append(recall(tp, fn))
    return sum(recalls) / len(recalls) if recalls else None


def balanced_accuracy(gold: Sequence[bool | None], pred: Sequence[str]) -> float | None:
    """Mean recall over the gold classes present (None when nothing is labelled)."""
    return _balanced_accuracy_of(pair_counts(gold, pred))


def _accuracy_of(pairs: Pairs) -> float | None:
    scored = _scored(pairs)
    total = sum(scored.values())
    if not total:
        return None
    return sum(n for (g, p), n in scored.items() if p == ("T" if g else "F")) / total


def accuracy(gold: Sequence[bool | None], pred: Sequence[str]) -> float | None:
    """Share of labelled facts answered right; an NA answer is wrong (None: no labels)."""
    return _accuracy_of(pair_counts(gold, pred))


def _macro_f1_of(pairs: Pairs) -> float | None:
    scores = [s for s in _f1_pair_of(pairs) if s is not None]
    return sum(scores) / len(scores) if scores else None


def macro_f1(gold: Sequence[bool | None], pred: Sequence[str]) -> float | None:
    """Mean F1 over the classes present in the gold labels (None when nothing is labelled)."""
    return _macro_f1_of(pair_counts(gold, pred))


def _confusion_matrix_of(pairs: Pairs) -> dict[str, dict[str, int]]:
    matrix = {g: {p: 0 for p in (*ANSWER_LABELS, "NA")} for g in ANSWER_LABELS}
    for (g, p), n in _scored(pairs).items():
        matrix["T" if g else "F"][p if p in ANSWER_LABELS else "NA"] += n
    return matrix


def confusion_matrix(gold: Sequence[bool | None],
                     pred: Sequence[str]) -> dict[str, dict[str, int]]:
    """Count labelled facts by gold class (rows ``T``, ``F``) and answer (``T``, ``F``, ``NA``)."""
    return _confusion_matrix_of(pair_counts(gold, pred))


def invalid_count(pred: Iterable[str]) -> int:
    """Count the answers that are neither T nor F."""
    return sum(1 for p in pred if p not in ANSWER_LABELS)


def invalid_rate(pred: Sequence[str]) -> float:
    """Share of answers that are neither T nor F (0 for no answers)."""
    return _ratio(invalid_count(pred), len(pred))


def nei_count(pred: Iterable[str]) -> int:
    """Count the answers that abstain (NEI)."""
    return sum(1 for p in pred if p == "NEI")


def coverage(pred: Sequence[str]) -> float | None:
    """Share of answers that are not NEI (None for no answers)."""
    return 1.0 - nei_count(pred) / len(pred) if pred else None


def _answers_of(pairs: Pairs) -> tuple[int, int, int]:
    """Count all answers, those neither T nor F, and the NEI ones."""
    total = invalid = nei = 0
    for (_, p), n in pairs.items():
        total += n
        invalid += n if p not in ANSWER_LABELS else 0
        nei += n if p == "NEI" else 0
    return total, invalid, nei


def covered(gold: Sequence[bool | None],
            pred: Sequence[str]) -> tuple[list[bool | None], list[str]]:
    """Keep the facts that were not answered NEI."""
    _check_lengths(gold, pred)
    kept = [(g, p) for g, p in zip(gold, pred, strict=True) if p != "NEI"]
    return [g for g, _ in kept], [p for _, p in kept]


def _covered_scores_of(pairs: Pairs) -> dict[str, Any]:
    total, _, nei = _answers_of(pairs)
    kept = {(g, p): n for (g, p), n in pairs.items() if p != "NEI"}
    f1_t, f1_f = _f1_pair_of(kept)
    return {"nei": nei, "coverage": 1.0 - nei / total if total else None,
            "accuracy_covered": _accuracy_of(kept), "f1_true_covered": f1_t,
            "f1_false_covered": f1_f}


def covered_scores(gold: Sequence[bool | None], pred: Sequence[str]) -> dict[str, Any]:
    """Coverage, and accuracy and F1 over the covered facts (labelled ones; NA stays a miss)."""
    return _covered_scores_of(pair_counts(gold, pred))


def _classification_report_of(pairs: Pairs) -> dict[str, Any]:
    scored = _scored(pairs)
    total, invalid, _ = _answers_of(scored)
    report: dict[str, Any] = {"n": total}
    for name, cls in (("true", "T"), ("false", "F")):
        scores = _class_scores_of(scored, cls)
        report[f"precision_{name}"] = scores["precision"]
        report[f"recall_{name}"] = scores["recall"]
        report[f"f1_{name}"] = scores["f1"]
    report["accuracy"] = _accuracy_of(scored)
    report["balanced_accuracy"] = _balanced_accuracy_of(scored)
    report["macro_f1"] = _macro_f1_of(scored)
    report["confusion"] = _confusion_matrix_of(scored)
    # ``invalid`` stays the study's count of answers that are not T/F (NEI included).
    report["invalid"] = invalid
    report["invalid_rate"] = _ratio(invalid, total)
    report.update(_covered_scores_of(scored))
    return report


def classification_report(gold: Sequence[bool | None],
                          pred: Sequence[str]) -> dict[str, Any]:
    """Per-class precision, recall and F1, accuracies, macro-F1, confusion and NA counts.

    ``gold`` holds True/False (None = unlabelled, skipped); ``pred`` holds "T", "F" or "NA".
    Scores of a class absent from the gold labels are None.
    """
    return _classification_report_of(pair_counts(gold, pred))


def key_counts(records: Iterable[Mapping[str, Any]]) -> Counter[tuple[Any, Any, str]]:
    """Count verdict records by (predicate, gold mark, label), what ``score_counts`` takes."""
    return Counter((r.get("predicate"), r.get("gold"), str(r.get("label", "NA")))
                   for r in records)


def _by_predicate_of(counts: KeyCounts) -> list[dict[str, Any]]:
    groups: dict[str, Counter[tuple[Any, str]]] = {}
    for (predicate, gold, label), n in counts.items():
        if predicate is not None and n:
            pairs = groups.setdefault(str(predicate), Counter())
            pairs[(GOLD.get(str(gold)), label)] += n
    rows = []
    for predicate, pairs in groups.items():
        total, invalid, _ = _answers_of(pairs)
        f1_t, f1_f = _f1_pair_of(pairs)
        cover = _covered_scores_of(pairs)
        rows.append({
            "predicate": predicate,
            "n": total,
            "judged_true": sum(n for (_, p), n in pairs.items() if p == "T") / total,
            "judged_false": sum(n for (_, p), n in pairs.items() if p == "F") / total,
            "na": invalid,
            "scored": sum(n for (g, _), n in pairs.items() if g is not None),
            "accuracy": _accuracy_of(pairs),
            "f1_true": f1_t,
            "f1_false": f1_f,
            "nei": cover["nei"],
            "coverage": cover["coverage"],
            "accuracy_covered": cover["accuracy_covered"],
        })
    return sorted(rows, key=lambda r: (-r["n"], r["predicate"]))


def label_columns(declared: Iterable[str], counts: Mapping[str, int] | None = None
                  ) -> list[str]:
    """Return the labels besides T and F that a table gives a column each.

    A label has a column when the strategy declares it (``Strategy.labels``) or when the
    run holds some (NEI from an abstaining prompt variant): each column counts its label
    alone, so a schema run's NEI are never shown under NA.
    """
    wanted = set(declared)
    return [label for label in OTHER_LABELS
            if label in wanted or (counts or {}).get(label)]


def other_label_counts(row: Mapping[str, Any]) -> dict[str, int]:
    """Split a ``by_predicate`` row's answers neither T nor F into NEI and NA (the rest)."""
    return {"NEI": int(row["nei"]), "NA": int(row["na"]) - int(row["nei"])}


def by_predicate(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Break verdict records down per predicate: facts, share judged true, scores if labelled.

    Each record needs ``predicate`` and ``label`` (``gold`` ``"T"``/``"F"`` when labelled);
    records without a predicate are left out. Sorted by the number of facts, largest first.
    """
    return _by_predicate_of(key_counts(records))


SUMMARY_SCORES = ("f1_true", "f1_false", "precision_true", "recall_true", "precision_false",
                  "recall_false", "accuracy", "balanced_accuracy", "macro_f1")


def score_counts(counts: KeyCounts) -> dict[str, Any]:
    """Score verdicts counted by (predicate, gold mark, label) for a run's summary.

    Returns ``scored`` (labelled facts), the scores of ``SUMMARY_SCORES`` (None without
    labels, or for a class the labels lack), ``confusion`` (gold row, answer column; None
    without labels) and ``by_predicate`` (see ``by_predicate``). Counts of parts of a run
    add up to the counts of the run, so its summary scores come from the parts' counts.
    """
    pairs: Counter[tuple[Any, str]] = Counter()
    for (_, gold, label), n in counts.items():
        pairs[(gold == "T" if gold in ANSWER_LABELS else None, label)] += n
    report = _classification_report_of(pairs)
    covers = _covered_scores_of(pairs)
    return {
        "scored": report["n"],
        **{k: report[k] for k in SUMMARY_SCORES},
        # Coverage over every verdict; the covered scores over the labelled ones.
        "nei": covers["nei"],
        "coverage": covers["coverage"],
        **{k: report[k] for k in ("accuracy_covered", "f1_true_covered", "f1_false_covered")},
        "confusion": report["confusion"] if report["n"] else None,
        "by_predicate": _by_predicate_of(counts),
    }


def score_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Score verdict records (``label``, ``gold``, ``predicate``) for a run's summary.

    What ``score_counts`` gives for the records' counts.
    """
    return score_counts(key_counts(records))


# --- explained verdicts ---------------------------------------------------------------

_WHO = re.compile(r"^(?:sample \d+|judge|[^\s]+): (?=\S)")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def problem_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Count the verdicts' answer problems by kind (an invented id, a missing reason, ...).

    Who had the problem (a sample, a member) and quoted values are left out of the kind.
    """
    counts: dict[str, int] = {}
    for record in records:
        for problem in record.get("answer_problems") or []:
            kind = _QUOTED.sub("'...'", _WHO.sub("", str(problem)))
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


# --- consensus -------------------------------------------------------------------------


def tie_rate(votes: Sequence[Mapping[str, str]]) -> float:
    """Share of facts whose votes split evenly (0 for no facts).

    ``votes`` holds one mapping per fact, model -> label.
    """
    return _ratio(sum(1 for v in votes if tally(v.values())["decision"] == TIE), len(votes))


def consensus_alignment(votes: Sequence[Mapping[str, str]]) -> dict[str, float]:
    """CA_M per model: share of the facts with a majority where the model voted with it.

    Ties are left out of the denominator; a model's NA vote on a decided fact counts as
    not aligned. A model that never voted on a decided fact scores 0. ``votes`` holds one
    mapping per fact, model -> label.
    """
    models = sorted({m for v in votes for m in v})
    agree = dict.fromkeys(models, 0)
    decided = 0
    for v in votes:
        majority = tally(v.values())["decision"]
        if majority == TIE:
            continue
        decided += 1
        for model, label in v.items():
            agree[model] += label == majority
    return {m: _ratio(agree[m], decided) for m in models}


# --- time and tokens -------------------------------------------------------------------


def iqr_filter(times: Iterable[float]) -> list[float]:
    """Keep the times inside [Q1 - 1.5 IQR, Q3 + 1.5 IQR] (numpy's linear quartiles)."""
    values = np.asarray([float(t) for t in times if t is not None], dtype=float)
    if values.size == 0:
        return []
    q1, q3 = np.percentile(values, [25, 75])
    spread = 1.5 * (q3 - q1)
    kept = values[(values >= q1 - spread) & (values <= q3 + spread)]
    return kept.tolist()


def iqr_mean(times: Iterable[float]) -> float | None:
    """Mean of the IQR-filtered times; None when there are none."""
    kept = iqr_filter(times)
    return float(np.mean(kept)) if kept else None


def token_totals(records: Iterable[Mapping[str, Any]]) -> dict[str, int | None]:
    """Sum ``tokens_in`` and ``tokens_out`` over records; None where no record has a count."""
    totals: dict[str, int | None] = {"tokens_in": None, "tokens_out": None}
    for record in records:
        for key in totals:
            value = record.get(key)
            if value is not None:
                totals[key] = (totals[key] or 0) + int(value)
    return totals


def random_guess_f1(true_share: float) -> tuple[float, float]:
    """F1(T) and F1(F) of a fair coin on a dataset with this share of true facts."""
    if not 0.0 <= true_share <= 1.0:
        raise MetricInputError(f"true_share must be within [0, 1], got {true_share}")
    # A coin has recall 1/2 on each class and precision equal to the class's share.
    return (_ratio(true_share, true_share + 0.5),
            _ratio(1.0 - true_share, 1.0 - true_share + 0.5))
