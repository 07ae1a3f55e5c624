"""The files an error analysis writes (``kgcheck errors --out DIR``), and their reader.

- ``errors.jsonl``: one record per analysed error: ``run``, ``fact_id``, ``explanation``,
  ``cluster`` (an integer, -1 for noise), ``cluster_label`` and, in taxonomy mode,
  ``category``; with the verdict's ``label``, ``truth``, ``predicate`` and ``model``;
- ``clusters.json``: each cluster's size, keywords and name, the seed and the settings;
- ``tables.md`` / ``tables.json``: error rates per slice and, in taxonomy mode, Table 9;
- ``umap.png`` / ``umap.svg``: the 2-D UMAP of the explanations, coloured by cluster;
- ``explanations.jsonl``: every explanation as it is obtained, so a stopped analysis
  resumes without asking the model again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgcheck.data.sources import json_objects, text_lines

__all__ = ["CLUSTERS_FILE", "ERRORS_FILE", "EXPLANATIONS_FILE", "ErrorsInputError",
           "read_errors"]

ERRORS_FILE = "errors.jsonl"
CLUSTERS_FILE = "clusters.json"
EXPLANATIONS_FILE = "explanations.jsonl"
TABLES_MD = "tables.md"
TABLES_JSON = "tables.json"
SCATTER = "umap"


class ErrorsInputError(ValueError):
    """An error analysis's input or output that cannot be used; the message says why."""


def read_errors(folder: str | Path) -> list[dict[str, Any]]:
    """Read ``errors.jsonl`` of an analysis folder (records with a run, a fact and a cluster)."""
    path = Path(folder) / ERRORS_FILE
    if not path.is_file():
        raise ErrorsInputError(f"{folder}: no {ERRORS_FILE}; run `kgcheck errors RUN --out "
                               f"{folder}` first")
    records = []
    # Lines within the line cap, JSON within safe_json's bounds: one line naming the line.
    for n, record in json_objects(text_lines(path, ErrorsInputError), path, ErrorsInputError):
        if not {"run", "fact_id", "cluster"} <= set(record):
            raise ErrorsInputError(f"{path}, line {n}: expected run, fact_id and cluster")
        records.append(record)
    return records
