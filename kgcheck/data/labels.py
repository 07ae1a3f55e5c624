"""Read label words and the files that carry them: annotators' CSVs, reviews, imported verdicts.

``label_word`` is kgcheck's one reader of a label word, wherever one is read: the ``label``
column of a user's triples, a gold labels file (``--labels``), an annotators' or review
labels file, imported verdicts. Its vocabulary, case-insensitive, surrounding blanks
ignored:

- true: ``T``, ``true``, ``1``, ``yes``, ``y``, ``correct`` (and JSON ``true``, ``1``);
- false: ``F``, ``false``, ``0``, ``no``, ``n``, ``incorrect`` (and JSON ``false``, ``0``);
- no label: an empty cell, ``idk``, ``na``, ``n/a``, ``skip``, ``skipped``, ``unknown``,
  ``?`` (and JSON ``null``).

Anything else is an error naming the file and the row. What "no label" means is the
reader's: a labels file leaves the row out and counts it, a triples file keeps the fact
unlabelled, a gold file refuses it (a gold row is there to give a label).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgcheck.data.cells import restore
from kgcheck.data.facts import checked_fact_id
from kgcheck.data.input_limits import NAME_CHARS, checked_text
from kgcheck.data.sources import json_objects, text_lines

TRUE_WORDS = frozenset({"t", "true", "1", "yes", "y", "correct"})
FALSE_WORDS = frozenset({"f", "false", "0", "no", "n", "incorrect"})
NO_LABEL_WORDS = frozenset({"", "idk", "na", "n/a", "skip", "skipped", "unknown", "?"})
LABEL_WORDS_HINT = ("use T/F, true/false, 1/0, yes/no, correct/incorrect, or idk/na/skip for "
                    "no label")
# The columns `kgcheck sample` writes; the review page writes fact_id,label,note,...
SAMPLE_COLUMNS = ("fact_id", "subject", "predicate", "object", "text", "label", "weight",
                  "stratum", "cluster", "design")


class LabelsError(ValueError):
    """A labels file that cannot be read, or that belongs to another run; says which row."""


def label_word(value: Any, where: str, error: type[Exception] = LabelsError) -> bool | None:
    """Read one label word: True, False, or None for idk/na/skip/empty.

    An unknown word raises ``error`` (the reader's own error class) naming ``where``.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    if text in NO_LABEL_WORDS:
        return None
    raise error(f"{where}: unknown label {value!r}; {LABEL_WORDS_HINT}")


def iter_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (where, row) for every row of a CSV, TSV or JSON Lines file."""
    if not path.is_file():
        raise LabelsError(f"{path}: file not found")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        for n, row in json_objects(text_lines(path, LabelsError), path, LabelsError):
            yield f"{path}, line {n}", {str(k).strip().lower(): v for k, v in row.items()}
    elif suffix in (".csv", ".tsv"):
        reader = csv.DictReader(text_lines(path, LabelsError),
                                delimiter="\t" if suffix == ".tsv" else ",")
        try:
            for n, raw in enumerate(reader, start=2):
                # Cells kgcheck wrote carry an apostrophe against formulas: drop it.
                yield f"{path}, row {n}", {str(k).strip().lower(): restore(v)
                                           if isinstance(v, str) else v
                                           for k, v in raw.items() if k is not None}
        except csv.Error as exc:
            raise LabelsError(f"{path}, row {reader.line_num}: malformed CSV ({exc})") from None
    else:
        raise LabelsError(f"{path}: unsupported format {suffix!r}; use .csv, .tsv or .jsonl")


@dataclass
class LabelRow:
    """One labelled fact from a labels file, with the design columns when present."""

    fact_id: str
    true: bool
    where: str
    stratum: str = ""
    cluster: str = ""
    weight: float | None = None
    # How the fact was chosen for labelling (the design column; "" when not said).
    design: str = ""


@dataclass
class LabelFile:
    """A labels file, read: usable labels, rows without a label, and the design it names."""

    path: Path
    rows: list[LabelRow] = field(default_factory=list)
    unlabeled: int = 0
    design: str = "srs"


# Designs of a review's labels.csv (``runfolder.LABEL_COLUMNS``): they may mix in one file,
# since each decision keeps the design of the queue it was taken in.
REVIEW_DESIGNS = ("srs", "queue")
FILTERED = "filtered:"


def is_review_design(design: str) -> bool:
    """Tell whether a design is one a review queue writes (srs, queue, filtered:...)."""
    return design in REVIEW_DESIGNS or design.startswith(FILTERED)


def read_labels(path: str | Path) -> LabelFile:
    """Read human labels: ``kgcheck sample``'s CSV, a review's ``labels.csv``, or JSONL.

    Needs ``fact_id`` and ``label`` columns; ``stratum``, ``cluster``, ``weight`` and
    ``design`` are kept when present. A fact labelled twice is an error naming both rows.
    """
    path = Path(path)
    out = LabelFile(path)
    seen: dict[str, str] = {}
    designs: set[str] = set()
    for where, row in iter_rows(path):
        if "fact_id" not in row or "label" not in row:
            raise LabelsError(f"{where}: needs fact_id and label columns (found: "
                              f"{', '.join(sorted(row))})")
        fact_id = str(row["fact_id"] or "").strip()
        if not fact_id:
            raise LabelsError(f"{where}: empty fact_id")
        checked_fact_id(fact_id, where, LabelsError)
        if fact_id in seen:
            raise LabelsError(f"{where}: fact {fact_id!r} is labelled again (first at "
                              f"{seen[fact_id].rsplit(', ', 1)[-1]})")
        seen[fact_id] = where
        if row.get("design"):
            designs.add(str(row["design"]).strip())
        value = label_word(row["label"], where)
        if value is None:
            out.unlabeled += 1
            continue
        weight = row.get("weight")
        try:
            weight_value = float(weight) if weight not in (None, "") else None
        except (TypeError, ValueError):
            raise LabelsError(f"{where}: weight {weight!r} is not a number") from None
        if weight_value is not None and not math.isfinite(weight_value):
            raise LabelsError(f"{where}: weight {weight!r} is not a finite number")
        stratum, cluster, design = (
            checked_text(str(row.get(name) or "").strip() if name == "design"
                         else str(row.get(name) or ""), NAME_CHARS, f"the {name}", where,
                         LabelsError) for name in ("stratum", "cluster", "design"))
        out.rows.append(LabelRow(fact_id, value, where, stratum, cluster, weight_value,
                                 design))
    if not seen:
        raise LabelsError(f"{path}: no rows")
    if len(designs) > 1 and not all(is_review_design(d) for d in designs):
        raise LabelsError(f"{path}: rows name different designs ({', '.join(sorted(designs))})")
    out.design = designs.pop() if len(designs) == 1 else ("review" if designs else "srs")
    return out
