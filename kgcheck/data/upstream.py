"""Read FactCheck data in the upstream layout, from a folder or from the vendored bundles.

The upstream layout (``dataset/<Name>/data/kg.json``, ``results/paper_results/<METHOD>/...``)
is the one contract: a clone of FactCheck-AI/FactCheck, ``../shared/factcheck-data`` and the
compact copy in ``vendored/factcheck`` all answer the same relative paths. The compact copy
stores, per dataset, a gzipped JSON object that maps those relative paths to their parsed
content, so no file name in the project carries the upstream ``:`` characters.
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from kgcheck.data import safe_json
from kgcheck.vendored import FACTCHECK_DIR

VENDORED_DIR = FACTCHECK_DIR
DATA_ENV = "KGCHECK_DATA"

RESULTS_DIR = "results/paper_results"
JUDGES_PATH = f"{RESULTS_DIR}/consensus/full_higher_parameter_df_results.json"
TOKENS_PATH = f"{RESULTS_DIR}/RAG/tokens-time.json"
# <Dataset>_open-source_<model>_<method>.json; model names keep their colon (gemma2:9b).
RECORDED_RE = re.compile(
    r"^results/paper_results/(?P<folder>[^/]+)/(?P<dataset>[^_/]+)_open-source_(?P<model>.+)_(?P<suffix>[a-z-]+)\.json$"
)
# Judge "Mode" values in the consensus file, by method folder.
JUDGE_MODES = {
    "DKA": "baseline",
    "GIV-Z": "zeroshot_natural_inline",
    "GIV-F": "fewshot_natural_inline",
}


class DataError(ValueError):
    """Data that is missing or malformed; the message names the file and what is wrong."""


class DataSource(Protocol):
    """Relative-path access to data in the upstream layout."""

    location: str

    def exists(self, relpath: str) -> bool:
        """Tell whether ``relpath`` is present."""
        ...

    def read_json(self, relpath: str) -> Any:
        """Return the parsed JSON at ``relpath``."""
        ...

    def glob(self, pattern: str) -> list[str]:
        """List relative paths matching an fnmatch ``pattern``, sorted."""
        ...


def _load_json_text(text: str, where: str) -> Any:
    try:
        # Upstream DBpedia data holds a bare NaN: read, and flagged as its fact's defect.
        return safe_json.parse(text, nan_constants=True)
    except safe_json.JsonRefused as exc:
        raise DataError(f"{where}: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: malformed JSON at line {exc.lineno}: {exc.msg}") from None


class FolderSource:
    """A folder in the upstream layout (a clone of the upstream repository)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def exists(self, relpath: str) -> bool:
        """Tell whether ``relpath`` is a file under the folder."""
        return (self.root / relpath).is_file()

    def read_json(self, relpath: str) -> Any:
        """Return the parsed JSON file at ``relpath``."""
        path = self.root / relpath
        if path.is_dir():
            raise DataError(f"{path}: is a folder, expected a JSON file")
        if not path.is_file():
            raise DataError(f"{path}: file not found")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: cannot read it ({exc})") from None
        return _load_json_text(text, str(path))

    def glob(self, pattern: str) -> list[str]:
        """List paths under the folder whose relative path matches ``pattern``.

        Folders that match are listed too, so that a folder where a file belongs is
        reported when read rather than silently left out.
        """
        # Patterns here are shallow (dataset/*/data/kg.json); Path.glob handles them directly.
        return sorted(str(p.relative_to(self.root)) for p in self.root.glob(pattern))


class BundleSource:
    """The compact vendored copy: ``<Dataset>.json.gz`` files mapping relative paths to JSON."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)
        self._bundles = sorted(root.glob("*.json.gz"))
        if not self._bundles:
            raise DataError(f"{root}: no *.json.gz bundles found")
        # A shared upstream file (the judges' answers) is split across bundles by dataset.
        self._index: dict[str, list[Path]] = {}
        self._loaded: dict[Path, dict[str, Any]] = {}
        manifest = root / "manifest.json"
        if manifest.is_file():
            # The manifest lists each bundle's paths, so bundles load only when read.
            listing = _load_json_text(manifest.read_text(encoding="utf-8"), str(manifest))
            contents = {root / name: paths for name, paths in listing["bundles"].items()}
        else:
            contents = {bundle: list(self._bundle(bundle)) for bundle in self._bundles}
        for bundle, paths in contents.items():
            for rel in paths:
                self._index.setdefault(rel, []).append(bundle)

    def _bundle(self, bundle: Path) -> dict[str, Any]:
        if bundle not in self._loaded:
            with gzip.open(bundle, "rt", encoding="utf-8") as fh:
                self._loaded[bundle] = _load_json_text(fh.read(), str(bundle))
        return self._loaded[bundle]

    def exists(self, relpath: str) -> bool:
        """Tell whether a bundle holds ``relpath``."""
        return relpath in self._index

    def read_json(self, relpath: str) -> Any:
        """Return the content stored for ``relpath``."""
        if relpath not in self._index:
            raise DataError(f"{self.root}: {relpath} is not in the vendored data")
        parts = [self._bundle(b)[relpath] for b in self._index[relpath]]
        if len(parts) == 1:
            return parts[0]
        if all(isinstance(p, list) for p in parts):
            return [row for part in parts for row in part]
        return {k: v for part in parts for k, v in part.items()}

    def glob(self, pattern: str) -> list[str]:
        """List stored relative paths matching ``pattern``."""
        return sorted(p for p in self._index if fnmatch.fnmatchcase(p, pattern))


def resolve_data_dir(data: str | Path | None = None) -> Path:
    """Pick the data folder: the argument, then ``$KGCHECK_DATA``, then the vendored copy."""
    chosen = data or os.environ.get(DATA_ENV) or VENDORED_DIR
    return Path(chosen).expanduser().resolve()


@cache
def _open(path: Path) -> DataSource:
    if not path.exists():
        raise DataError(f"{path}: data folder not found (pass --data DIR in the upstream layout)")
    if (path / "dataset").is_dir() or (path / "results").is_dir():
        return FolderSource(path)
    if any(path.glob("*.json.gz")):
        return BundleSource(path)
    raise DataError(
        f"{path}: not in the upstream layout (expected dataset/<Name>/data/kg.json "
        "or vendored *.json.gz bundles)"
    )


def open_data(data: str | Path | None = None) -> DataSource:
    """Open a data folder (upstream layout or vendored bundles); cached per path."""
    return _open(resolve_data_dir(data))


def as_source(data: str | Path | DataSource | None) -> DataSource:
    """Accept an open ``DataSource`` or anything ``open_data`` takes."""
    if isinstance(data, FolderSource | BundleSource):
        return data
    return open_data(data)  # type: ignore[arg-type]


def dataset_names(src: DataSource) -> list[str]:
    """Names of the datasets present, as spelled by their folders (``FactBench``, ``YAGO``)."""
    return [p.split("/")[1] for p in src.glob("dataset/*/data/kg.json")]


def canonical_dataset(src: DataSource, name: str) -> str:
    """Map a case-insensitive dataset name to its folder name; unknown names list the known."""
    known = dataset_names(src)
    for candidate in known:
        if candidate.lower() == name.lower():
            return candidate
    raise DataError(
        f"unknown dataset {name!r} in {src.location}; known: {', '.join(known) or 'none'}"
    )


def dataset_path(dataset: str, filename: str) -> str:
    """Relative path of a dataset file (``kg.json``, ``gt.json``, ``kg_modified.json``)."""
    return f"dataset/{dataset}/data/{filename}"


@dataclass(frozen=True)
class RecordedFile:
    """One recorded-answer file: which method, dataset and model it holds."""

    method: str
    dataset: str
    model: str
    relpath: str


def recorded_files(src: DataSource) -> list[RecordedFile]:
    """Every recorded-answer file of the study present in ``src``."""
    found = []
    for rel in src.glob(f"{RESULTS_DIR}/*/*_open-source_*.json"):
        match = RECORDED_RE.match(rel)
        if match:
            found.append(
                RecordedFile(match["folder"], match["dataset"], match["model"], rel)
            )
    return found


def recorded_path(method: str, dataset: str, model: str) -> str:
    """Relative path of one model's recorded answers for a method and dataset."""
    return f"{RESULTS_DIR}/{method}/{dataset}_open-source_{model}_{method.lower()}.json"


def iter_records(src: DataSource, relpath: str) -> Iterator[dict[str, Any]]:
    """Yield the records of a recorded-answer file, checking each has an ``id``."""
    rows = src.read_json(relpath)
    if not isinstance(rows, list):
        raise DataError(f"{src.location}/{relpath}: expected a JSON list of records")
    for n, row in enumerate(rows):
        if not isinstance(row, dict) or "id" not in row:
            raise DataError(f"{src.location}/{relpath}: record {n} has no 'id'")
        yield row


def judge_fact_id(dataset: str, custom_id: str) -> str:
    """Turn a judge file's ``Custom_id`` (``yago_5``, or a bare id) into the fact id."""
    prefix = f"{dataset.lower()}_"
    return custom_id[len(prefix):] if custom_id.startswith(prefix) else custom_id
