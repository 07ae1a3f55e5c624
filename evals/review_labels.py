"""A person's decisions on a run's verdicts, as the review page writes them: ``RUN/labels.csv``.

One row per reviewed fact, columns ``fact_id,label,note,reviewer,reviewed_at``; ``label`` is
``T``, ``F`` or ``skip``. ``kgcheck review`` writes it (the whole file, atomically, after
each decision), ``kgcheck report``, ``kgcheck estimate --labels`` and ``kgcheck export``
read it. A file that does not follow this format is an error naming the file and the row.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

LABELS = "labels.csv"
COLUMNS = ("fact_id", "label", "note", "reviewer", "reviewed_at")
LABEL_VALUES = ("T", "F", "skip")


class LabelsError(ValueError):
    """A labels file that cannot be read, or that belongs to another run."""


class LabelRow(TypedDict):
    """One decision, as ``labels.csv`` keeps it."""

    fact_id: str
    label: str
    note: str
    reviewer: str
    reviewed_at: str


def read_labels(path: str | Path, run_fact_ids: Collection[str] | None = None
                ) -> dict[str, LabelRow]:
    """Read a labels file, by fact id; with ``run_fact_ids``, refuse labels of other facts.

    Raises:
        LabelsError: the header or a row is malformed, a fact is labelled twice, or (given
            ``run_fact_ids``) the file labels facts that the run did not check.

    """
    path = Path(path)
    if not path.is_file():
        raise LabelsError(f"{path}: labels file not found")
    rows: dict[str, LabelRow] = {}
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        header = tuple(reader.fieldnames or ())
        if header != COLUMNS:
            raise LabelsError(f"{path}: expected the columns {','.join(COLUMNS)}, found "
                              f"{','.join(header) or 'none'}")
        for n, raw in enumerate(reader, start=2):
            row = LabelRow(**{k: (raw.get(k) or "").strip() for k in COLUMNS})  # type: ignore[typeddict-item]
            if not row["fact_id"]:
                raise LabelsError(f"{path}, row {n}: no fact_id")
            if row["label"] not in LABEL_VALUES:
                raise LabelsError(f"{path}, row {n}: label {row['label']!r} is not one of "
                                  f"{', '.join(LABEL_VALUES)}")
            if row["fact_id"] in rows:
                raise LabelsError(f"{path}, row {n}: fact {row['fact_id']} is labelled twice")
            rows[row["fact_id"]] = row
    if run_fact_ids is not None:
        foreign = [fid for fid in rows if fid not in run_fact_ids]
        if foreign:
            raise LabelsError(
                f"{path} labels {len(foreign)} facts this run did not check (e.g. "
                f"{', '.join(foreign[:3])}): it belongs to another run; move it away or "
                "review the run it came from")
    return rows


def labels_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """Render rows as the CSV text of a labels file (header included)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k) or "" for k in COLUMNS})
    return out.getvalue()


def write_labels(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace the labels file atomically and durably: a crash leaves the old or the new."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        fh.write(labels_text(rows))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
