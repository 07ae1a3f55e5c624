"""Sweeps: run every cell of a grid as a resumable run, then rank the cells.

``kgcheck.sweep("sweep.toml")`` checks every cell first (strategy, model, prompt file,
input, settings), so a typo fails before anything runs; then it runs ``parallel`` cells at
once, each a run folder under ``OUT/cells/`` that ``--resume`` semantics continue, and
writes ``OUT/leaderboard.json``, ``OUT/tables.md`` and the leaderboard plots. A cell that
fails does not stop the others; its row says why.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgcheck import event_loop
from kgcheck.data import safe_json
from kgcheck.data.atomic import write_text_atomic
from kgcheck.data.runfolder import SUMMARY, RunError, read_verdicts
from kgcheck.evals.leaderboard import leaderboard_row, ranked, write_leaderboard
from kgcheck.runs.grid import CELLS_DIR, Cell, SweepConfig, SweepConfigError, load_sweep
from kgcheck.runs.launch import run_spec
from kgcheck.runs.plan import CacheChoice, RunPlan, SettingsError, plan_run
from kgcheck.runs.spec import RunSpec

__all__ = ["OnCell", "SWEEP_INFO", "SweepResult", "asweep", "cell_spec", "leaderboard",
           "plan_sweep", "sweep"]

SWEEP_INFO = "sweep.json"
OnCell = Callable[[Cell, dict[str, Any]], None]


@dataclass
class SweepResult:
    """A finished sweep: its folder, its ranked rows and the files written."""

    out_dir: Path
    rows: list[dict[str, Any]]
    files: list[Path] = field(default_factory=list)

    @property
    def failed(self) -> list[dict[str, Any]]:
        """The rows of cells that did not finish."""
        return [r for r in self.rows if r.get("error")]


def _describe(cell: Cell) -> dict[str, Any]:
    return {"cell": cell.name, "strategy": cell.strategy, "model": cell.model,
            "prompt": cell.prompt, "input": cell.source, "settings": dict(cell.settings)}


def cell_spec(sweep: SweepConfig, cell: Cell, out_dir: Path,
              cache: CacheChoice = True) -> RunSpec:
    """Return a cell's run, into its folder under ``OUT/cells/``.

    Always resumable: a finished cell is read back, a stopped one continues.
    """
    return RunSpec(dataset=cell.dataset, triples=cell.triples, strategy=cell.strategy,
                   model=cell.model, data=sweep.data, limit=sweep.limit,
                   out=out_dir / CELLS_DIR / cell.name, settings=cell.run_settings(),
                   concurrency=sweep.concurrency, resume=True, cache=cache)


def plan_sweep(config: str | Path | SweepConfig, out: str | Path | None = None
               ) -> tuple[SweepConfig, Path, list[tuple[Cell, RunPlan]]]:
    """Check every cell of a sweep; nothing runs. Errors name the file and the cell."""
    sweep = config if isinstance(config, SweepConfig) else load_sweep(config)
    out_dir = Path(out) if out else (sweep.out or Path("runs") / sweep.path.stem)
    plans: list[tuple[Cell, RunPlan]] = []
    seen: set[str] = set()
    for cell in sweep.cells():
        if cell.name in seen:
            raise SweepConfigError(f"{sweep.path}: the grid holds cell {cell.name} twice")
        seen.add(cell.name)
        try:
            plan = plan_run(cell_spec(sweep, cell, out_dir))
        except (SettingsError, RunError, LookupError, ValueError, OSError) as exc:
            raise SweepConfigError(f"{sweep.path}: cell {cell.name}: {exc}") from None
        plans.append((cell, plan))
    return sweep, out_dir, plans


async def asweep(config: str | Path | SweepConfig, out: str | Path | None = None, *,
                 parallel: int | None = None, cache: CacheChoice = True, plots: bool = True,
                 on_cell: OnCell | None = None) -> SweepResult:
    """Run a sweep (see the module docstring); ``on_cell`` hears of each finished cell."""
    sweep, out_dir, plans = plan_sweep(config, out)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / SWEEP_INFO, json.dumps({
        "config": str(sweep.path), "cells": [_describe(c) for c, _ in plans],
        "parallel": parallel or sweep.parallel, "concurrency": sweep.concurrency,
    }, indent=1) + "\n")
    gate = asyncio.Semaphore(parallel or sweep.parallel)
    verdicts: dict[str, list[dict[str, Any]]] = {}

    async def one(cell: Cell, plan: RunPlan) -> dict[str, Any]:
        row = _describe(cell)
        async with gate:
            try:
                result = await run_spec(cell_spec(sweep, cell, out_dir, cache), plan=plan)
                row = leaderboard_row(row, result.summary, result.records)
                verdicts[row["cell"]] = list(result.records)
                if result.aborted:
                    row["error"] = result.aborted
            except (RunError, SettingsError, OSError) as exc:
                row = {**leaderboard_row(row, _stored_summary(plan.out_dir), []),
                       "error": str(exc)}
        if on_cell is not None:
            on_cell(cell, row)
        return row

    rows = await asyncio.gather(*(one(c, p) for c, p in plans))
    files = write_leaderboard(rows, out_dir, f"Sweep {sweep.path.name}", plots=plots,
                              verdicts=verdicts)
    return SweepResult(out_dir, ranked(rows, verdicts), files)


def _stored_summary(out_dir: Path) -> dict[str, Any]:
    path = out_dir / SUMMARY
    try:
        return safe_json.parse(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError):
        return {}


def sweep(config: str | Path | SweepConfig, out: str | Path | None = None,
          **kwargs: Any) -> SweepResult:
    """Run a sweep (see ``asweep``); for scripts without an event loop."""
    return event_loop.run(asweep(config, out, **kwargs))


def leaderboard(out_dir: str | Path, *, plots: bool = True) -> SweepResult:
    """Rebuild a sweep's leaderboard from its cell folders, without running anything."""
    out_dir = Path(out_dir)
    info_path = out_dir / SWEEP_INFO
    if not info_path.is_file():
        raise SweepConfigError(f"{out_dir} is not a sweep folder (no {SWEEP_INFO})")
    info = safe_json.parse(info_path.read_text(encoding="utf-8"))
    rows, verdicts = [], {}
    for cell in info["cells"]:
        folder = out_dir / CELLS_DIR / cell["cell"]
        records = list(read_verdicts(folder).values())
        rows.append(leaderboard_row(cell, _stored_summary(folder), records))
        verdicts[cell["cell"]] = records
    files = write_leaderboard(rows, out_dir, f"Sweep {Path(info['config']).name}",
                              plots=plots, verdicts=verdicts)
    return SweepResult(out_dir, ranked(rows, verdicts), files)
