"""Read a user's own facts: CSV, TSV or JSON Lines with subject, predicate, object.

Optional columns: ``id`` (default: the row number) and ``label`` (true/false, 1/0, T/F).
A malformed row is an error naming the file and the row, never a silent skip.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from kgcheck.data.facts import Fact

REQUIRED = ("subject", "predicate", "object")
TRUE_WORDS = {"1", "true", "t", "yes", "y"}
FALSE_WORDS = {"0", "false", "f", "no", "n"}


class TriplesError(ValueError):
    """A triples file that cannot be read as facts."""


def _label(value: Any, where: str) -> bool | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise TriplesError(f"{where}: label {value!r} is not true/false, 1/0 or T/F")


def _fact(row: dict[str, Any], where: str, row_number: int, dataset: str) -> Fact:
    missing = [k for k in REQUIRED if row.get(k) is None or not str(row.get(k)).strip()]
    if missing:
        raise TriplesError(f"{where}: missing {', '.join(missing)}")
    fact_id = str(row.get("id") or row_number)
    return Fact.from_triple(
        fact_id, dataset, [str(row[k]).strip() for k in REQUIRED], _label(row.get("label"), where)
    )


def read_triples(path: str | Path, dataset: str = "") -> list[Fact]:
    """Load facts from a .csv, .tsv or .jsonl file; ``dataset`` defaults to the file stem."""
    path = Path(path)
    if not path.is_file():
        raise TriplesError(f"{path}: file not found")
    dataset = dataset or path.stem
    suffix = path.suffix.lower()
    facts: list[Fact] = []
    if suffix in (".jsonl", ".ndjson"):
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TriplesError(f"{path}, line {n}: malformed JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise TriplesError(f"{path}, line {n}: expected a JSON object")
                facts.append(_fact(row, f"{path}, line {n}", n, dataset))
    elif suffix in (".csv", ".tsv"):
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",")
            header = [h.strip().lower() for h in reader.fieldnames or []]
            absent = [k for k in REQUIRED if k not in header]
            if absent:
                raise TriplesError(
                    f"{path}: header lacks {', '.join(absent)} (found: {', '.join(header)})"
                )
            for n, raw in enumerate(reader, start=2):
                row = {str(k).strip().lower(): v for k, v in raw.items() if k is not None}
                facts.append(_fact(row, f"{path}, row {n}", n - 1, dataset))
    else:
        raise TriplesError(f"{path}: unsupported format {suffix!r}; use .csv, .tsv or .jsonl")
    ids = [f.id for f in facts]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise TriplesError(f"{path}: fact id {dup!r} appears more than once")
    if not facts:
        raise TriplesError(f"{path}: no facts found")
    return facts
