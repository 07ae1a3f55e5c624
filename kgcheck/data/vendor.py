"""Write the compact vendored copy of upstream data (``vendored/factcheck/<Dataset>.json.gz``).

Each bundle maps upstream relative paths to their content, restricted to one dataset: its
triples (the benchmark subset), labels, sentences, every recorded-answer file, its rows of the
judges' file and its entry of the RAG token/time file. Record fields nobody reads
(timestamps) are dropped. Evidence documents are never vendored.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from kgcheck.data.atomic import atomic_output, write_text_atomic
from kgcheck.data.datasets import in_benchmark
from kgcheck.data.upstream import (
    JUDGES_PATH,
    TOKENS_PATH,
    as_source,
    canonical_dataset,
    dataset_path,
    recorded_files,
)

DROPPED_FIELDS = ("timestamp",)
PROVENANCE = (
    "FactCheck benchmark data from FactCheck-AI/FactCheck (MIT licence): datasets, gold "
    "labels, LLM-written sentences and the study's recorded model answers, restricted to "
    "the benchmark's facts. Evidence documents are not included."
)


def build_bundle(src_dir: str | Path, dataset: str) -> dict[str, Any]:
    """Collect one dataset's upstream files into a relative-path -> content mapping."""
    src = as_source(src_dir)
    name = canonical_dataset(src, dataset)
    bundle: dict[str, Any] = {}
    kg = src.read_json(dataset_path(name, "kg.json"))
    keep = {fid for fid in kg if in_benchmark(name, fid)}
    bundle[dataset_path(name, "kg.json")] = {k: v for k, v in kg.items() if k in keep}
    for filename in ("gt.json", "kg_modified.json"):
        rel = dataset_path(name, filename)
        if src.exists(rel):
            bundle[rel] = {k: v for k, v in src.read_json(rel).items() if k in keep}
    for rec in recorded_files(src):
        if rec.dataset == name:
            rows = src.read_json(rec.relpath)
            bundle[rec.relpath] = [
                {k: v for k, v in row.items() if k not in DROPPED_FIELDS} for row in rows
            ]
    if src.exists(JUDGES_PATH):
        bundle[JUDGES_PATH] = [r for r in src.read_json(JUDGES_PATH) if r.get("Dataset") == name]
    if src.exists(TOKENS_PATH):
        tokens = src.read_json(TOKENS_PATH)
        if name in tokens:
            bundle[TOKENS_PATH] = {name: tokens[name]}
    return bundle


def vendor(src_dir: str | Path, out_dir: str | Path, datasets: list[str]) -> list[Path]:
    """Write a bundle per dataset plus a provenance manifest; return the written paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    manifest: dict[str, Any] = {"provenance": PROVENANCE, "source": "FactCheck-AI/FactCheck",
                                "license": "MIT", "bundles": {}}
    for dataset in datasets:
        bundle = build_bundle(src_dir, dataset)
        name = next(iter(bundle)).split("/")[1]
        path = out / f"{name}.json.gz"
        # mtime=0 keeps the bytes reproducible, so re-vendoring makes no spurious diff.
        # The header names the file as GzipFile(path) would: the same bytes as before.
        with atomic_output(path) as sink, gzip.GzipFile(path.name, "wb", fileobj=sink,
                                                         mtime=0) as fh:
            fh.write(json.dumps(bundle, separators=(",", ":"), sort_keys=True).encode())
        manifest["bundles"][path.name] = sorted(bundle)
        written.append(path)
    write_text_atomic(out / "manifest.json", json.dumps(manifest, indent=1) + "\n")
    return written
