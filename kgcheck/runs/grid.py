"""Sweep configurations: a grid of strategies x models x prompts x inputs x settings.

A sweep file (TOML or YAML) names the grid; every combination is a cell, and every cell is
a resumable run folder under ``OUT/cells/<cell>``::

    out = "runs/sweep"          # the sweep folder (``--out`` overrides it)
    parallel = 2                # cells run at once
    concurrency = 4             # facts at once within a cell
    limit = 200                 # the first N facts of each input (optional)

    [grid]
    strategies = ["dka", "giv-z"]
    models = ["replay:gemma2:9b", "replay:qwen2.5:7b"]
    prompts = ["default"]       # "default": each strategy's own prompt file
    datasets = ["yago"]         # and/or triples = ["facts.csv"]

    [grid.prompts]              # or per strategy (a strategy not named: its default)
    dka = ["default", "my-dka.txt"]

    [grid.settings]             # each value a list: one grid axis per setting
    temperature = [0.75]

Parsing checks the shape (unknown keys are named); the application layer checks that every
strategy, model, prompt file, input and setting exists before any cell runs.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CELLS_DIR", "Cell", "DEFAULT_PROMPT", "GRID_KEYS", "SweepConfig", "SweepConfigError",
           "TOP_KEYS", "load_sweep"]

TOP_KEYS = {"out", "parallel", "concurrency", "limit", "data", "grid", "judge"}
GRID_KEYS = {"strategies", "models", "prompts", "datasets", "triples", "settings"}
DEFAULT_PROMPT = "default"
CELLS_DIR = "cells"


class SweepConfigError(ValueError):
    """A sweep file that cannot be run: the message names the file and the key."""


@dataclass(frozen=True)
class Cell:
    """One run of the grid."""

    strategy: str
    model: str
    prompt: str
    dataset: str | None
    triples: str | None
    settings: tuple[tuple[str, Any], ...] = ()

    @property
    def source(self) -> str:
        """The input's name: a dataset or a triples file's stem."""
        return self.dataset or Path(self.triples or "facts").stem

    @property
    def name(self) -> str:
        """A folder name that says what the cell is."""
        parts = [self.source, self.strategy, self.model]
        if self.prompt != DEFAULT_PROMPT:
            parts.append(Path(self.prompt).stem)
        parts += [f"{k}={v}" for k, v in self.settings]
        return re.sub(r"[^A-Za-z0-9._=-]+", "-", "_".join(parts)).strip("-").lower()

    def run_settings(self) -> dict[str, Any]:
        """Return the cell's strategy settings, its prompt included."""
        values = dict(self.settings)
        if self.prompt != DEFAULT_PROMPT:
            values["prompt"] = self.prompt
        return values


@dataclass
class SweepConfig:
    """A parsed sweep file."""

    path: Path
    out: Path | None
    parallel: int
    concurrency: int
    limit: int | None
    data: str | None
    strategies: list[str]
    models: list[str]
    prompts: dict[str, list[str]]
    datasets: list[str]
    triples: list[str]
    settings: dict[str, list[Any]] = field(default_factory=dict)

    def cells(self) -> Iterator[Cell]:
        """Every combination of the grid, in a stable order."""
        inputs = [(d, None) for d in self.datasets] + [(None, t) for t in self.triples]
        names = sorted(self.settings)
        combos = list(itertools.product(*(self.settings[n] for n in names))) or [()]
        for strategy in self.strategies:
            prompts = self.prompts.get(strategy) or self.prompts.get("*") or [DEFAULT_PROMPT]
            for model, prompt, (dataset, triples), combo in itertools.product(
                    self.models, prompts, inputs, combos):
                yield Cell(strategy, model, prompt, dataset, triples,
                           tuple(zip(names, combo, strict=True)))


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SweepConfigError(f"{path}: sweep file not found")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".toml":
            data: Any = tomllib.loads(text)
        elif path.suffix.lower() in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        else:
            raise SweepConfigError(f"{path}: a sweep file is .toml, .yaml or .yml")
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise SweepConfigError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from None
    if not isinstance(data, dict):
        raise SweepConfigError(f"{path}: expected a table of settings at the top")
    return data


def _names(path: Path, grid: Mapping[str, Any], key: str, *, required: bool) -> list[str]:
    value = grid.get(key)
    if value is None:
        if required:
            raise SweepConfigError(f"{path}: grid.{key} is missing (a list of names)")
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise SweepConfigError(f"{path}: grid.{key} must be a non-empty list of names")
    return [v.strip() for v in value]


def _whole(path: Path, data: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = data.get(key, default)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SweepConfigError(f"{path}: {key} must be a whole number of at least 1, "
                               f"got {value!r}")
    return value


def _prompts(path: Path, grid: Mapping[str, Any], strategies: list[str]
             ) -> dict[str, list[str]]:
    """Read ``grid.prompts``: one list for every strategy ("*") or a list per strategy."""
    given = grid.get("prompts")
    if given is None:
        return {}
    table = given if isinstance(given, dict) else {"*": given}
    unknown = sorted(set(table) - set(strategies) - {"*"})
    if unknown:
        raise SweepConfigError(f"{path}: grid.prompts names {', '.join(unknown)}, which "
                               f"grid.strategies does not list ({', '.join(strategies)})")
    out = {}
    for strategy, files in table.items():
        names = _names(path, {"prompts": files}, "prompts", required=True)
        # Prompt files beside the sweep file are found from any folder.
        out[strategy] = [p if p == DEFAULT_PROMPT or not (path.parent / p).is_file()
                         else str(path.parent / p) for p in names]
    return out


def load_sweep(path: str | Path) -> SweepConfig:
    """Read and check a sweep file's shape; raise ``SweepConfigError`` naming what is wrong."""
    path = Path(path)
    data = _read(path)
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise SweepConfigError(f"{path}: unknown key {', '.join(unknown)}; known: "
                               f"{', '.join(sorted(TOP_KEYS))}")
    grid = data.get("grid")
    if not isinstance(grid, dict):
        raise SweepConfigError(f"{path}: a [grid] table is missing")
    unknown = sorted(set(grid) - GRID_KEYS)
    if unknown:
        raise SweepConfigError(f"{path}: unknown key grid.{', grid.'.join(unknown)}; known: "
                               f"{', '.join(sorted(GRID_KEYS))}")
    settings = grid.get("settings") or {}
    if not isinstance(settings, dict):
        raise SweepConfigError(f"{path}: grid.settings must be a table of lists")
    axes = {}
    for key, values in settings.items():
        values = values if isinstance(values, list) else [values]
        if not values:
            raise SweepConfigError(f"{path}: grid.settings.{key} is an empty list")
        axes[str(key)] = values
    datasets = _names(path, grid, "datasets", required=False)
    triples = _names(path, grid, "triples", required=False)
    if not datasets and not triples:
        raise SweepConfigError(f"{path}: the grid needs datasets or triples (or both)")
    # Triples files are relative to the sweep file, so a sweep runs from any folder.
    triples = [str((path.parent / t) if not Path(t).is_absolute() else Path(t))
               for t in triples]
    strategies = _names(path, grid, "strategies", required=True)
    prompts = _prompts(path, grid, strategies)
    out = data.get("out")
    return SweepConfig(
        path=path,
        out=Path(out) if out else None,
        parallel=_whole(path, data, "parallel", 1) or 1,
        concurrency=_whole(path, data, "concurrency", 4) or 4,
        limit=_whole(path, data, "limit", None),
        data=str(data["data"]) if data.get("data") else None,
        strategies=strategies,
        models=_names(path, grid, "models", required=True),
        prompts=prompts,
        datasets=datasets,
        triples=triples,
        settings=axes,
    )
