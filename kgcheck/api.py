"""kgcheck's Python API: what the CLI, the benchmarks and scripts call.

```python
import kgcheck

facts = kgcheck.load_dataset("yago")[:20]
verdicts = kgcheck.check(facts, strategy="giv-f", model="replay:gemma2:9b")
result = kgcheck.run(dataset="factbench", strategy="dka", out="runs/fb-dka")
```

Every function checks its settings before any fact is sent (unknown strategies, models and
settings, missing prompt files, replay models without recordings) and raises a
``ValueError`` subclass whose message names the input and what is wrong.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from kgcheck.data.datasets import DatasetInfo, describe_datasets, load_facts
from kgcheck.data.facts import Fact, Verdict
from kgcheck.data.recordings import has_recordings, recorded_models
from kgcheck.data.triples import read_triples as _read_triples
from kgcheck.data.upstream import as_source, canonical_dataset
from kgcheck.evals.consensus_run import run_consensus
from kgcheck.evals.cost import load_pricing
from kgcheck.evals.estimate import Estimate
from kgcheck.evals.estimate import estimate as _estimate
from kgcheck.evals.export import Exported, export_run
from kgcheck.evals.report import Outputs, build_report, reproduce_tables
from kgcheck.evals.runner import (
    RECURSION_LIMIT,
    VERDICTS,
    RunInfo,
    RunResult,
    read_verdicts,
    run_facts,
    verdict_of,
)
from kgcheck.graphs.consensus import settings_class
from kgcheck.graphs.context import DEFAULT_MODEL, Context
from kgcheck.graphs.judges import CONS_JUDGES, JUDGE_NONE
from kgcheck.graphs.registry import Strategy, get_strategy
from kgcheck.graphs.registry import strategies as _strategies
from kgcheck.prompts import prompt_path
from kgcheck.providers import redact_url, resolve_model, split_spec

FactLike = Fact | Mapping[str, Any]
Warn = Callable[[str], None]


class SettingsError(ValueError):
    """A setting that the strategy does not have, or a combination that cannot run."""


class KgcheckWarning(UserWarning):
    """Something found before a run that will make part of it come out NA."""


def strategies() -> dict[str, Strategy]:
    """Every registered strategy by name (built-in and from installed plugins)."""
    return _strategies()


def strategy(name: str) -> Strategy:
    """Look up one strategy; an unknown name lists the known ones."""
    return get_strategy(name)


def settings(name: str) -> list[dict[str, Any]]:
    """List a strategy's settings: ``name``, ``type``, ``default``, ``description``."""
    out = []
    for item in dataclasses.fields(get_strategy(name).context):
        default = item.default if item.default is not dataclasses.MISSING else (
            item.default_factory() if item.default_factory is not dataclasses.MISSING else None)
        out.append({"name": item.name, "type": _type_name(item.type), "default": default,
                    "description": item.metadata.get("description", "")})
    return out


def _type_name(annotation: Any) -> str:
    text = str(annotation)
    text = re.sub(r"Annotated\[([^,\]]+),.*\]", r"\1", text)
    return text.replace("typing.", "").replace("<class '", "").replace("'>", "")


def load_dataset(name: str, data: str | Path | None = None) -> list[Fact]:
    """Load a dataset of the upstream layout with its gold labels (``yago``, ``factbench``).

    ``data`` is a folder in the upstream layout (a clone of FactCheck-AI/FactCheck); by
    default ``$KGCHECK_DATA``, else the compact copy shipped with kgcheck.
    """
    src = as_source(data)
    return load_facts(canonical_dataset(src, name), src)


def datasets(data: str | Path | None = None) -> list[DatasetInfo]:
    """Describe every dataset of a data folder: facts, labels, true share, defects."""
    return describe_datasets(data)


def read_triples(path: str | Path, dataset: str = "") -> list[Fact]:
    """Read your own facts from a ``.csv``, ``.tsv`` or ``.jsonl`` file."""
    return _read_triples(path, dataset)


def as_facts(facts: Iterable[FactLike]) -> list[Fact]:
    """Accept ``Fact`` objects or mappings with subject, predicate, object (id, dataset)."""
    out = []
    for n, item in enumerate(facts, 1):
        if isinstance(item, Fact):
            out.append(item)
        else:
            payload = {"id": str(n), "dataset": "", **dict(item)}
            out.append(Fact.model_validate(payload))
    return out


def make_context(chosen: Strategy, model: str, values: Mapping[str, Any],
                 context_class: type[Context] | None = None) -> Context:
    """Build a strategy's Context from settings, refusing names it does not have."""
    cls = context_class or chosen.context
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise SettingsError(f"{chosen.name} has no setting {', '.join(unknown)}; its settings: "
                            f"{', '.join(sorted(known))}")
    return chosen.make_context(**{**values, "model": model})


def check_models(specs: Sequence[str], ctx: Context) -> None:
    """Build every model once, so a missing key, URL or provider fails before the run."""
    for spec in specs:
        resolve_model(spec, ctx)


def check_prompt_files(ctx: Context) -> None:
    """Fail before the run when a prompt-file setting names no file."""
    for item in dataclasses.fields(ctx):
        value = getattr(ctx, item.name)
        if (item.name == "prompt" or item.name.endswith("_prompt")) and value:
            prompt_path(value)


def check_replay(models: Sequence[str], chosen: Strategy, facts: Sequence[Fact],
                 data: str | Path | None, *, own_file: bool = False) -> None:
    """Fail early, with the alternatives, when a replay model has nothing recorded."""
    folder = str(data) if data else None
    for spec in models:
        provider, name = split_spec(spec)
        if provider != "replay":
            continue
        if own_file:
            raise SettingsError(f"{spec} only answers facts of a recorded dataset, not your own; "
                                "pick a live model (ollama:..., openai:...)")
        if not chosen.replays:
            raise SettingsError(f"{spec} has no recorded answers for the {chosen.name} strategy "
                                "(the study ran dka, giv-z, giv-f and rag); pick a live model")
        for dataset in sorted({f.dataset for f in facts}):
            if not has_recordings(folder, name, dataset, chosen.replays):
                raise SettingsError(
                    f"{spec} has no recorded {chosen.replays} answers for "
                    f"{dataset or 'facts without a dataset'}; replay answers only the study's "
                    "facts. Recorded models: " + ", ".join(recorded_models(folder)))


def recordable(values: Mapping[str, Any]) -> dict[str, Any]:
    """Return the settings to write into run.json: no data path, no URL credentials."""
    kept = {k: v for k, v in values.items() if k != "data_dir"}
    if kept.get("base_url"):
        kept["base_url"] = redact_url(kept["base_url"])
    return kept


async def acheck(facts: Iterable[FactLike], strategy: str = "dka", model: str = DEFAULT_MODEL,
                 *, concurrency: int = 8, data: str | Path | None = None,
                 **settings: Any) -> list[Verdict]:
    """Check facts with a strategy; return their verdicts in the order of ``facts``.

    ``settings`` are the strategy's Context fields (``max_attempts=5``, ``temperature=0``).
    A fact whose check fails gets an NA verdict whose ``error`` says why; settings that
    cannot work raise before any fact is sent.
    """
    chosen = get_strategy(strategy)
    items = as_facts(facts)
    if concurrency < 1:
        raise SettingsError(f"concurrency must be at least 1, got {concurrency}")
    values = {**settings, "data_dir": str(data) if data else settings.get("data_dir", "")}
    ctx = make_context(chosen, model, values)
    check_replay([model], chosen, items, data)
    check_models([model], ctx)
    check_prompt_files(ctx)
    graph = chosen.compile()
    run_id = uuid.uuid4().hex[:12]
    gate = asyncio.Semaphore(concurrency)

    async def invoke(fact: Fact) -> dict[str, Any]:
        return await graph.ainvoke({"fact": fact.as_input()}, context=ctx,
                                   config={"recursion_limit": RECURSION_LIMIT,
                                           "metadata": {"kgcheck_run_id": run_id}})

    async def one(fact: Fact) -> Verdict:
        async with gate:
            return Verdict.model_validate(await verdict_of(invoke, fact, chosen.label, model))

    return list(await asyncio.gather(*(one(f) for f in items)))


def check(facts: Iterable[FactLike], strategy: str = "dka", model: str = DEFAULT_MODEL, *,
          concurrency: int = 8, data: str | Path | None = None, **settings: Any) -> list[Verdict]:
    """Check facts with a strategy (see ``acheck``); for scripts without an event loop."""
    return asyncio.run(acheck(facts, strategy, model, concurrency=concurrency, data=data,
                              **settings))


@dataclass
class RunPlan:
    """A batch run, checked and ready: what ``arun`` executes."""

    facts: list[Fact]
    strategy: Strategy
    members: list[str]
    judge: str
    values: dict[str, Any]
    info: RunInfo
    out_dir: Path
    notes: list[str]


def default_out_dir(source: str, strategy: str, models: Sequence[str]) -> Path:
    """``runs/<source>-<strategy>-<model>``, with characters unsafe in file names replaced."""
    label = models[0] if len(models) == 1 else f"consensus{len(models)}"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{source}-{strategy}-{label}").strip("-")
    return Path("runs") / slug.lower()


def plan_run(*, dataset: str | None = None, triples: str | Path | None = None,
             facts: Iterable[FactLike] | None = None, strategy: str = "dka",
             model: str = DEFAULT_MODEL, consensus: Sequence[str] | None = None,
             judge: str = JUDGE_NONE, data: str | Path | None = None,
             limit: int | None = None, out: str | Path | None = None,
             settings: Mapping[str, Any] | None = None,
             pricing: str | Path | None = None) -> RunPlan:
    """Check a run's inputs and settings and load its facts; nothing is sent yet.

    Exactly one of ``dataset`` (a name in the data folder), ``triples`` (a file of your
    own) or ``facts`` (in memory) gives the facts. ``consensus`` lists member models that
    vote (with ``judge`` breaking ties); otherwise ``model`` answers alone. ``pricing`` is
    a pricing file for the summary's cost (default: ``kgcheck/pricing.json``).
    """
    if sum(x is not None for x in (dataset, triples, facts)) != 1:
        raise SettingsError("give exactly one of a dataset, a triples file or facts")
    if limit is not None and limit < 1:
        raise SettingsError(f"limit must be at least 1, got {limit}")
    values = dict(settings or {})
    prices = load_pricing(pricing) if pricing else None
    if float(values.get("replay_latency") or 0) < 0:
        raise SettingsError(f"replay_latency must be 0 or more, got {values['replay_latency']}")
    if judge != JUDGE_NONE and not consensus:
        raise SettingsError(f"judge {judge} needs consensus members (the models whose ties "
                            "it breaks)")
    chosen = get_strategy(strategy)
    members = [m.strip() for m in consensus if m.strip()] if consensus else [model]
    fixed_judge = [judge] if judge not in (JUDGE_NONE, *CONS_JUDGES) else []
    for spec in members + fixed_judge:
        split_spec(spec)

    if triples is not None:
        loaded = _read_triples(triples)
        source_name, source = loaded[0].dataset, str(Path(triples).resolve())
    elif facts is not None:
        loaded = as_facts(facts)
        source_name = loaded[0].dataset if loaded and loaded[0].dataset else "facts"
        source = "memory"
    else:
        src = as_source(data)
        source_name = canonical_dataset(src, dataset or "")
        loaded, source = load_facts(source_name, src), src.location
    if limit is not None:
        loaded = loaded[:limit]
    if not loaded:
        raise SettingsError("there are no facts to check")
    check_replay(members, chosen, loaded, data, own_file=triples is not None)

    values.setdefault("data_dir", str(data) if data else "")
    context_class = settings_class(chosen.context) if consensus else chosen.context
    ctx = make_context(chosen, members[0], values, context_class)
    check_models(members + fixed_judge, ctx)
    check_prompt_files(ctx)
    notes = chosen.preflight(loaded, ctx) if chosen.preflight else []
    out_dir = Path(out) if out else default_out_dir(source_name, chosen.name, members)
    info = RunInfo(dataset=source_name, strategy=chosen.name, method=chosen.label,
                   models=members, judge=judge if consensus else None, source=source,
                   settings=recordable({**values, "model": members[0]}), pricing=prices)
    return RunPlan(loaded, chosen, members, judge, {**values, "model": members[0]}, info,
                   out_dir, notes)


async def execute(plan: RunPlan, *, concurrency: int = 4, resume: bool = False,
                  fresh: bool = False, show_progress: bool = False) -> RunResult:
    """Run a checked plan into its folder (resumable: see ``arun``)."""
    if resume and fresh:
        raise SettingsError("resume and fresh contradict each other; pick one")
    if len(plan.members) > 1:
        return await run_consensus(
            plan.facts, strategy=plan.strategy, members=plan.members, judge=plan.judge,
            values=plan.values, info=plan.info, out_dir=plan.out_dir, concurrency=concurrency,
            resume=resume, fresh=fresh, show_progress=show_progress)
    ctx = plan.strategy.make_context(**plan.values)
    graph = plan.strategy.compile()
    config: RunnableConfig = {"recursion_limit": RECURSION_LIMIT,
                              "metadata": {"kgcheck_run_id": plan.info.run_id}}

    async def invoke(fact: Fact) -> dict[str, Any]:
        return await graph.ainvoke({"fact": fact.as_input()}, context=ctx, config=config)

    return await run_facts(plan.facts, invoke, plan.info, plan.out_dir, concurrency=concurrency,
                           resume=resume, fresh=fresh, show_progress=show_progress)


async def arun(*, concurrency: int = 4, resume: bool = False, fresh: bool = False,
               show_progress: bool = False, warn: Warn | None = None,
               **plan: Any) -> RunResult:
    """Check many facts into a run folder, resumably; return the run's verdicts and summary.

    Takes what ``plan_run`` takes (``dataset=``, ``strategy=``, ``model=``, ``out=``, ...).
    Each verdict is appended to ``OUT/verdicts.jsonl`` as it completes; ``resume=True``
    continues a stopped run in the same folder, ``fresh=True`` starts it over. ``warn``
    receives warnings found before the run (e.g. facts without evidence).
    """
    checked = plan_run(**plan)
    for message in checked.notes:
        if warn is None:
            warnings.warn(message, KgcheckWarning, stacklevel=2)
        else:
            warn(message)
    return await execute(checked, concurrency=concurrency, resume=resume, fresh=fresh,
                         show_progress=show_progress)


def run(**kwargs: Any) -> RunResult:
    """Check many facts into a run folder (see ``arun``); for scripts without an event loop."""
    return asyncio.run(arun(**kwargs))


def report(run_dirs: Sequence[str | Path], out: str | Path, *, with_recorded: bool = False,
           data: str | Path | None = None, plots: bool = True) -> Outputs:
    """Build the study's tables (and figures) from run folders, optionally beside its rows."""
    return build_report(run_dirs, out, with_recorded=with_recorded, data=data, plots=plots)


def reproduce(out: str | Path, *, data: str | Path | None = None,
              datasets: Sequence[str] | None = None, plots: bool = True) -> Outputs:
    """Recompute the study's tables 5 to 8 and figures from its recorded answers."""
    return reproduce_tables(out, data=data, datasets=datasets, plots=plots)


def estimate_run(plan: RunPlan, *, resume: bool = False) -> Estimate:
    """Estimate what a checked plan will send: facts, calls, tokens and cost; sends nothing.

    With ``resume`` the facts the run folder already holds verdicts for are left out.
    """
    done: set[str] = set()
    if resume:
        done = {fid for fid, r in read_verdicts(plan.out_dir / VERDICTS).items()
                if not r.get("error")}
    contexts = {m: plan.strategy.make_context(**{**plan.values, "model": m})
                for m in plan.members}
    found = _estimate(plan.facts, contexts, plan.info.pricing, done=done)
    if len(plan.members) > 1 and plan.judge != JUDGE_NONE:
        found.notes.append("consensus: the judge's calls on ties are not counted (ties are "
                           "known only once the members have voted)")
    return found


def estimate(*, resume: bool = False, **plan: Any) -> Estimate:
    """Estimate a run before it starts (takes what ``plan_run`` takes); sends nothing."""
    return estimate_run(plan_run(**plan), resume=resume)


def export(run_dir: str | Path, format: str = "csv", out: str | Path | None = None, *,
           only: str | Sequence[str] | None = None, rdf: str = "annotated") -> Exported:
    """Export a run's verdicts as ``csv``, ``jsonl``, ``nt`` or ``ttl`` (see ``evals.export``).

    ``only`` keeps the verdicts given (``"F"`` or ``["T", "NA"]``); ``rdf`` is
    ``annotated`` (reified verdicts with model, method and time) or ``plain`` (the triples).
    ``out`` None writes to standard output.
    """
    return export_run(run_dir, format, out, only=only, shape=rdf)
