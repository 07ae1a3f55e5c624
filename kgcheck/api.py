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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgcheck.data.datasets import DatasetInfo, describe_datasets, load_facts
from kgcheck.data.facts import Fact, Verdict
from kgcheck.data.runfolder import (
    checked_facts,
    read_run_info,
)
from kgcheck.data.sampling import select_facts as _select_facts
from kgcheck.data.sparql import SparqlClient, SparqlReader
from kgcheck.data.triples import iter_triples as _iter_triples
from kgcheck.data.triples import read_triples as _read_triples
from kgcheck.data.upstream import as_source, canonical_dataset
from kgcheck.evals.accuracy.audit import (
    EstimateResult,
    SampleResult,
    estimate_run,
    run_verdicts,
    write_sample,
)
from kgcheck.evals.accuracy.estimators import EstimateError
from kgcheck.evals.export import Exported, export_run
from kgcheck.evals.report import Outputs, build_report, reproduce_tables
from kgcheck.graphs.context import DEFAULT_MODEL
from kgcheck.graphs.registry import Strategy, compile_graph, get_strategy
from kgcheck.graphs.registry import strategies as _strategies
from kgcheck.providers.cache import use_cache
from kgcheck.retrievers.sources.base import CORPUS, EVIDENCE_SOURCES
from kgcheck.retrievers.store import CorpusStore, Fetched, default_store_path
from kgcheck.review.session import ReviewSession, parse_only
from kgcheck.runs.dry_run import Estimate as CostEstimate
from kgcheck.runs.engines import Engine
from kgcheck.runs.importing import VerdictImportError, import_run, read_verdict_file
from kgcheck.runs.plan import (
    CacheChoice,
    EngineOnDemand,
    FactLike,
    KgcheckWarning,
    SettingsError,
    Warn,
    _source,
    as_facts,
    as_facts_lazy,
    cache_path,
    check_models,
    check_prompt_files,
    check_replay,
    dry_run_of,
    execute,
    make_context,
    own_kg_name,
    plan_run,
)
from kgcheck.runs.runner import (
    RECURSION_LIMIT,
    RunResult,
    verdict_of,
)


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


def read_triples(path: str | Path, dataset: str = "", *,
                 data: str | Path | None = None) -> list[Fact]:
    """Read your own facts from CSV, TSV, JSON Lines or RDF (``.nt .nq .ttl .trig .rdf``).

    RDF terms are kept in N-Triples syntax in ``Fact.rdf``; names the file gives its terms
    (``rdfs:label``, ``skos:prefLabel``, ``schema:name``) are in ``Fact.names``. ``dataset``
    names their KG; by default the file's stem (``own_kg_name``), never a benchmark's name
    unless given here.
    """
    return _read_triples(path, dataset or own_kg_name(path, data))


def iter_triples(path: str | Path, dataset: str = "") -> Iterator[Fact]:
    """Yield the facts of a triples file one by one (without names; see ``select_facts``)."""
    return _iter_triples(path, dataset)


def read_sparql(url: str, *, graph: str | None = None, where: str | None = None,
                limit: int | None = None, sample: int | None = None, seed: int | None = 0,
                page_size: int = 10_000, timeout: float = 30.0, retries: int = 3
                ) -> list[Fact]:
    """Read facts from a SPARQL 1.1 endpoint, with their names from the same endpoint.

    ``graph`` restricts to a named graph, ``where`` is a pattern binding ``?s ?p ?o``
    (``?s a <http://dbpedia.org/ontology/Person> . ?s ?p ?o``); ``limit`` and ``sample``
    choose as in ``select_facts``.
    """
    reader = SparqlReader(SparqlClient(url, timeout=timeout, retries=retries), graph=graph,
                          where=where, page_size=page_size)
    return reader.named(_select_facts(lambda: iter(reader), limit=limit, sample=sample,
                                      seed=seed).facts)


def select_facts(facts: str | Path | Iterable[FactLike] | Callable[[], Iterable[Fact]], *,
                 limit: int | None = None, sample: int | None = None, seed: int | None = 0,
                 stratify: str | None = None, per_stratum: int | None = None,
                 ids: Sequence[str] | None = None) -> list[Fact]:
    """Choose facts from a file or a stream: the first ``limit``, a seeded ``sample``, ``ids``.

    ``facts`` is a triples file (read as a stream, with the names it gives its terms), facts,
    or a function returning a fresh iterator of them. ``stratify="predicate"`` with
    ``sample=N`` draws in proportion to the predicates, with ``per_stratum=K`` K facts of
    each. Memory holds only the chosen facts.
    """
    named: Callable[[list[Fact]], list[Fact]] = list
    source: Iterable[Fact] | Callable[[], Iterable[Fact]]
    if isinstance(facts, str | Path):
        origin = _source(None, facts, None, None, None, None, None)
        source, named = origin.open, origin.named
    else:
        source = facts if callable(facts) else as_facts_lazy(facts)
    return named(_select_facts(source, limit=limit, sample=sample, seed=seed,
                               stratify=stratify, per_stratum=per_stratum, ids=ids).facts)


async def acheck(facts: Iterable[FactLike], strategy: str = "dka", model: str = DEFAULT_MODEL,
                 *, concurrency: int = 8, data: str | Path | None = None,
                 cache: CacheChoice = True, **settings: Any) -> list[Verdict]:
    """Check facts with a strategy; return their verdicts in the order of ``facts``.

    ``settings`` are the strategy's Context fields (``max_attempts=5``, ``temperature=0``).
    A fact whose check fails gets an NA verdict whose ``error`` says why; settings that
    cannot work raise before any fact is sent. Live models' answers are cached (``cache``:
    see ``cache_path``), so asking the same again costs nothing.
    """
    chosen = get_strategy(strategy)
    items = as_facts(facts)
    if concurrency < 1:
        raise SettingsError(f"concurrency must be at least 1, got {concurrency}")
    values = {**settings, "data_dir": str(data) if data else settings.get("data_dir", "")}
    ctx = make_context(chosen, model, values)
    check_replay([model], chosen, items, data)
    check_prompt_files(ctx)
    check_models([model], ctx)
    graph = compile_graph(("strategy", chosen.name))
    run_id = uuid.uuid4().hex[:12]
    gate = asyncio.Semaphore(concurrency)

    async def invoke(fact: Fact) -> dict[str, Any]:
        return await graph.ainvoke({"fact": fact.as_input()}, context=ctx,
                                   config={"recursion_limit": RECURSION_LIMIT,
                                           "metadata": {"kgcheck_run_id": run_id}})

    async def one(fact: Fact) -> Verdict:
        async with gate:
            return Verdict.model_validate(await verdict_of(invoke, fact, chosen.label, model))

    with use_cache(cache_path(cache)):
        return list(await asyncio.gather(*(one(f) for f in items)))


def check(facts: Iterable[FactLike], strategy: str = "dka", model: str = DEFAULT_MODEL, *,
          concurrency: int = 8, data: str | Path | None = None, cache: CacheChoice = True,
          **settings: Any) -> list[Verdict]:
    """Check facts with a strategy (see ``acheck``); for scripts without an event loop."""
    return asyncio.run(acheck(facts, strategy, model, concurrency=concurrency, data=data,
                              cache=cache, **settings))


async def arun(*, concurrency: int | str = 4, max_concurrency: int = 64, resume: bool = False,
               fresh: bool = False, show_progress: bool = False, warn: Warn | None = None,
               cache: CacheChoice = True, engine: str | Engine = "local",
               engine_options: Mapping[str, Any] | None = None, **plan: Any) -> RunResult:
    """Check many facts into a run folder, resumably; return the run's verdicts and summary.

    Takes what ``plan_run`` takes (``dataset=``, ``strategy=``, ``model=``, ``out=``, ...).
    Each verdict is appended to ``OUT/verdicts.jsonl`` as it completes; ``resume=True``
    continues a stopped run in the same folder, ``fresh=True`` starts it over. ``warn``
    receives warnings found before the run (e.g. facts without evidence). Live models'
    answers are cached (``cache``, see ``cache_path``); the summary counts the hits.
    """
    runner = EngineOnDemand(engine, cache=cache, options=engine_options)
    try:
        checked = plan_run(**plan, parallel_read=runner.parallel_read)
        for message in checked.notes:
            if warn is None:
                warnings.warn(message, KgcheckWarning, stacklevel=2)
            else:
                warn(message)
        return await execute(checked, concurrency=concurrency,
                             max_concurrency=max_concurrency, resume=resume, fresh=fresh,
                             show_progress=show_progress, cache=cache, engine=runner.get(),
                             warn=warn)
    finally:
        runner.close()


def run(**kwargs: Any) -> RunResult:
    """Check many facts into a run folder (see ``arun``); for scripts without an event loop."""
    return asyncio.run(arun(**kwargs))


def report(run_dirs: Sequence[str | Path], out: str | Path, *, with_recorded: bool = False,
           data: str | Path | None = None, plots: bool = True) -> Outputs:
    """Build the study's tables (and figures) from run folders, optionally beside its rows."""
    return build_report(run_dirs, out, with_recorded=with_recorded, data=data, plots=plots)


def reproduce(out: str | Path, *, data: str | Path | None = None,
              datasets: Sequence[str] | None = None, plots: bool = True,
              warn: Warn | None = None) -> Outputs:
    """Recompute the study's tables 5 to 8 and figures from its recorded answers.

    Answers that cannot be scored (a dataset without gold labels, an unreadable answers
    file) are left out with a warning (to ``warn``, else ``KgcheckWarning``) that the
    tables repeat; when nothing can be scored, a ``ValueError`` says why.
    """
    def note(message: str) -> None:
        if warn is None:
            warnings.warn(message, KgcheckWarning, stacklevel=3)
        else:
            warn(message)

    return reproduce_tables(out, data=data, datasets=datasets, plots=plots, warn=note)


def evidence_sources() -> list[str]:
    """Names the ``sources`` setting accepts: the stored corpus and every registered source."""
    return [CORPUS, *EVIDENCE_SOURCES.names()]


@dataclass(frozen=True)
class FetchedEvidence:
    """What the evidence sources fetched into a store: per-source counts and the items."""

    store: Path
    counts: dict[str, tuple[int, int, str]]
    items: list[Fetched]


def fetched_evidence(store: str | Path | None = None, *, source: str = "",
                     limit: int = 1000) -> FetchedEvidence:
    """List the results and pages fetched into the store (URL, title, fetch time, source)."""
    path = Path(store) if store else default_store_path()
    if not path.is_file():
        raise SettingsError(f"{path}: no corpus store; import a corpus or run RAG with "
                            "--set sources=... first")
    opened = CorpusStore(path)
    try:
        return FetchedEvidence(path, opened.fetched_counts(),
                               opened.fetched_items(source, limit))
    finally:
        opened.close()


def dry_run(*, resume: bool = False, **plan: Any) -> CostEstimate:
    """Estimate a run's calls, tokens and cost before it starts (``plan_run``'s arguments).

    Nothing is sent; ``kgcheck run --dry-run`` prints the same figures.
    """
    return dry_run_of(plan_run(**plan), resume=resume)


def export(run_dir: str | Path, format: str = "csv", out: str | Path | None = None, *,
           only: str | Sequence[str] | None = None, rdf: str = "annotated") -> Exported:
    """Export a run's verdicts as ``csv``, ``jsonl``, ``nt`` or ``ttl`` (see ``evals.export``).

    ``sparql`` and ``patch`` write the changes instead: a SPARQL 1.1 Update (or an RDF
    Patch) deleting the triples judged or labelled false and inserting accepted corrections.

    ``only`` keeps the verdicts given (``"F"`` or ``["T", "NA"]``); ``rdf`` is
    ``annotated`` (reified verdicts with model, method and time) or ``plain`` (the triples).
    ``out`` None writes to standard output.
    """
    return export_run(run_dir, format, out, only=only, shape=rdf)


def sample(*, n: int, out: str | Path, dataset: str | None = None,
           triples: str | Path | None = None, facts: Iterable[FactLike] | None = None,
           run: str | Path | None = None, design: str = "srs", stratify: str | None = None,
           cluster: str = "subject", cluster_size: int = 3, seed: int = 0,
           data: str | Path | None = None) -> SampleResult:
    """Draw the facts a person should label; write them as an annotators' CSV.

    The facts come from exactly one of ``dataset``, ``triples``, ``facts`` (any iterable,
    read once) or ``run`` (the facts a run checked; allows ``stratify="verdict"``).
    ``design`` is ``srs``, ``stratified`` (by ``stratify``) or ``twcs`` (clusters by
    ``cluster``, up to ``cluster_size`` facts each). The same inputs and ``seed`` give the
    same sample.
    """
    if sum(x is not None for x in (dataset, triples, facts, run)) != 1:
        raise SettingsError("give exactly one of a dataset, a triples file, facts or a run")
    verdicts = None
    source: Iterable[Fact]
    if run is not None:
        records = run_verdicts(Path(run))
        verdicts = {fid: str(r["label"]) for fid, r in records.items()}
        info = read_run_info(Path(run), EstimateError)
        source = [f for f in checked_facts(Path(run), info, data, EstimateError)
                  if f.id in verdicts]
    elif triples is not None:
        source = _iter_triples(triples)
    elif facts is not None:
        source = as_facts_lazy(facts)
    else:
        source = load_dataset(dataset or "", data)
    return write_sample(source, Path(out), n=n, design=design, stratify=stratify,
                        cluster=cluster, cluster_size=cluster_size, seed=seed,
                        verdicts=verdicts)


def import_verdicts(file: str | Path, out: str | Path, *, triples: str | Path | None = None,
                    dataset: str | None = None, data: str | Path | None = None,
                    fresh: bool = False) -> RunResult:
    """Turn verdicts made elsewhere into a run folder (scored like any run).

    ``file`` is a FactCheck study result file (``.json``, any name) or a CSV/JSONL of
    ``fact_id,label``. The facts and their gold labels come from ``triples`` or
    ``dataset``; without either, from the dataset the study file's name gives.
    """
    found = read_verdict_file(file)
    if triples is not None and dataset is not None:
        raise SettingsError("give at most one of a triples file and a dataset")
    if triples is not None:
        facts = _read_triples(triples)
        name, source = facts[0].dataset, str(Path(triples).resolve())
    else:
        wanted = dataset or found.dataset
        if not wanted:
            raise VerdictImportError(f"{file}: the file name names no dataset; pass --dataset "
                                     "NAME or --triples FILE")
        src = as_source(data)
        name = canonical_dataset(src, wanted)
        facts, source = load_facts(name, src), src.location
    return asyncio.run(import_run(found, facts, Path(out), source=source, dataset=name,
                                  fresh=fresh))


def estimate(run: str | Path, *, labels: str | Path | None = None,
             gold_sample: int | None = None, seed: int = 0, confidence: float = 0.95,
             stratify: str | None = None, design: str = "srs", cluster: str = "subject",
             cluster_size: int = 3, data: str | Path | None = None,
             plots: bool = True) -> EstimateResult:
    """Estimate the accuracy of a run's KG (llm, human and ppi); write ``RUN/estimate.json``.

    Human labels come from ``labels`` (``kgcheck sample``'s CSV filled in, or a review's
    ``labels.csv``), or ``gold_sample`` facts with known gold labels are drawn (seeded by
    ``seed``, by ``design``) as if a person had labelled them.
    """
    return estimate_run(Path(run), labels=Path(labels) if labels else None,
                        gold_sample=gold_sample, seed=seed, confidence=confidence,
                        stratify=stratify, design=design, cluster=cluster,
                        cluster_size=cluster_size, data=data, plots=plots)


def open_review(run_dir: str | Path, *, only: str | Sequence[str] | None = None,
                sample: int | None = None, seed: int = 0,
                reviewer: str | None = None,
                order: str = "run") -> AbstractAsyncContextManager[ReviewSession]:
    """Open a run for human review: ``async with kgcheck.open_review("runs/x") as review:``.

    The queue is the run's verdicts, or those ``only`` names (``"F,NA,ties"``), optionally a
    ``sample`` of them drawn with ``seed``; ``order="uncertainty"`` puts the least certain
    verdicts (NEI, then the lowest ``max(p, 1 - p)``) first.
    ``await review.decide(fact_id, "T")`` and ``await review.undo()`` drive the ``review``
    graph; decisions persist in
    ``RUN/review.sqlite`` and ``RUN/labels.csv``. One review per run folder at a time.
    """
    filters = parse_only(only) if isinstance(only, str) or only is None else parse_only(
        ",".join(only))
    return ReviewSession.open(run_dir, only=filters, sample=sample, seed=seed,
                              reviewer=reviewer, order=order)
