"""Run a ``RunSpec``: the one orchestration the command line, the API and sweeps share.

``run_spec`` starts the engine only when needed (a bad input fails before a cluster
starts), plans the run (``plan_run``), tells the caller of the plan's notes and runs it
(``execute``); ``dry_run_spec`` plans and estimates without starting an engine.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable

from kgcheck.runs.dry_run import Estimate as CostEstimate
from kgcheck.runs.engines import Engine
from kgcheck.runs.plan import (
    EngineOnDemand,
    KgcheckWarning,
    RunPlan,
    Warn,
    dry_run_of,
    execute,
    plan_run,
)
from kgcheck.runs.runner import RunResult
from kgcheck.runs.spec import RunSpec

__all__ = ["dry_run_spec", "notify", "run_spec"]


def notify(notes: Iterable[str], warn: Warn | None, *, stacklevel: int = 4) -> None:
    """Hand each note to ``warn``, or issue it as a ``KgcheckWarning``."""
    for message in notes:
        if warn is None:
            warnings.warn(message, KgcheckWarning, stacklevel=stacklevel)
        else:
            warn(message)


async def run_spec(spec: RunSpec, *, warn: Warn | None = None, plan: RunPlan | None = None,
                   on_plan: Callable[[RunPlan], None] | None = None) -> RunResult:
    """Plan and run ``spec`` into its run folder; return the run.

    Args:
        spec: The run.
        warn: Receives the plan's notes and what the run had to ignore; by default they are
            issued as ``KgcheckWarning``.
        plan: The spec's plan, when the caller has made it already (a sweep checks every
            cell before any runs).
        on_plan: Called with the plan before the run starts (the command line reports it).

    Returns:
        The run: its folder, verdict records and summary.

    """
    engine: str | Engine = spec.engine
    runner = EngineOnDemand(engine, cache=spec.cache, options=spec.engine_settings())
    try:
        checked = plan or plan_run(spec, parallel_read=runner.parallel_read)
        notify(checked.notes, warn)
        if on_plan is not None:
            on_plan(checked)
        return await execute(checked, concurrency=spec.concurrency,
                             max_concurrency=spec.max_concurrency, resume=spec.resume,
                             fresh=spec.fresh, show_progress=spec.show_progress,
                             cache=spec.cache, engine=runner.get(), warn=warn)
    finally:
        runner.close()


def dry_run_spec(spec: RunSpec, *, warn: Warn | None = None) -> tuple[RunPlan, CostEstimate]:
    """Plan ``spec`` (reading its input here: no engine starts) and estimate its cost.

    Args:
        spec: The run.
        warn: Receives the plan's notes; by default they are issued as ``KgcheckWarning``.

    Returns:
        The plan and its estimate: facts, calls, tokens and cost.

    """
    checked = plan_run(spec)
    notify(checked.notes, warn)
    return checked, dry_run_of(checked, resume=spec.resume)
