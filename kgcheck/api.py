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
import json
import re
import tempfile
import warnings
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kgcheck.arguments import (
    NAME_ONLY,
    Arg,
    ArgumentError,
    ArgumentMessage,
    ArgumentNote,
    Placeholder,
    literal,
)
from kgcheck.data.datasets import DatasetInfo, describe_datasets, load_facts
from kgcheck.data.facts import Fact, Verdict
from kgcheck.data.runfolder import (
    VERDICTS,
    RunError,
    checked_facts,
    read_run_info,
    read_verdict,
    read_verdicts,
)
from kgcheck.data.sampling import parse_ids
from kgcheck.data.sampling import select_facts as _select_facts
from kgcheck.data.sparql import SparqlClient, SparqlReader
from kgcheck.data.triples import iter_triples as _iter_triples
from kgcheck.data.triples import read_triples as _read_triples
from kgcheck.data.upstream import as_source, canonical_dataset, open_data
from kgcheck.evals.accuracy.audit import (
    EstimateResult,
    SampleResult,
    estimate_run,
    run_verdicts,
    write_sample,
)
from kgcheck.evals.accuracy.estimators import EstimateError
from kgcheck.evals.errors.pipeline import ErrorAnalysis
from kgcheck.evals.errors.pipeline import analyse_errors as _analyse_errors
from kgcheck.evals.export import Exported, export_run
from kgcheck.evals.report import Outputs, build_report, reproduce_tables
from kgcheck.evals.stats.agreement import agreement as _agreement
from kgcheck.evals.stats.paired import Comparison, compare_runs
from kgcheck.evals.stats.report import comparison_text, disagreements_csv
from kgcheck.graphs.consensus.judges import JUDGE_NONE
from kgcheck.graphs.context import DEFAULT_MODEL
from kgcheck.graphs.registry import Strategy, get_strategy
from kgcheck.graphs.registry import strategies as _strategies
from kgcheck.graphs.served import langgraph_config, served_graphs
from kgcheck.graphs.verdicts import is_defect
from kgcheck.providers.secrets import redact_logs, redact_text
from kgcheck.retrievers.sources.base import CORPUS, EVIDENCE_SOURCES
from kgcheck.retrievers.store import CorpusStore, Fetched, default_store_path, import_corpus
from kgcheck.review.server import Served
from kgcheck.review.server import serve as serve_review
from kgcheck.review.session import ReviewSession, parse_only
from kgcheck.runs.dry_run import Estimate as CostEstimate
from kgcheck.runs.engines import Engine
from kgcheck.runs.importing import VerdictImportError, import_run, read_verdict_file
from kgcheck.runs.plan import (
    CacheChoice,
    EngineOnDemand,
    FactLike,
    KgcheckWarning,
    RunPlan,
    SettingsError,
    Warn,
    as_facts,
    as_facts_lazy,
    cache_path,
    check_run_arguments,
    dry_run_of,
    execute,
    fact_source,
    open_engine,
    own_kg_name,
    parse_setting_pairs,
    plan_run,
)
from kgcheck.runs.runner import RunResult
from kgcheck.runs.sweeps import asweep, plan_sweep
from kgcheck.tracing import setup_tracing
from kgcheck.view.explorer import Explorer
from kgcheck.view.server import serve as serve_explorer

__all__ = [
    # Checking facts: sync and async twins.
    "check", "acheck", "run", "arun", "dry_run", "adry_run", "import_verdicts",
    "aimport_verdicts", "open_review", "Review", "SyncReview",
    # Facts in.
    "load_dataset", "datasets", "read_triples", "iter_triples", "read_sparql", "select_facts",
    # Strategies and their settings.
    "strategies", "strategy", "settings", "parse_setting_pairs", "evidence_sources",
    # Runs out: scores, tables, samples, estimates, exports.
    "report", "reproduce", "sample", "estimate", "export", "explain", "fetched_evidence",
    "FetchedEvidence", "analyse_errors", "ErrorAnalysis", "open_explorer", "Explorer",
    "compare", "Comparison", "agreement",
    # Planning and executing in two steps (what the command line does).
    "plan_run", "execute", "dry_run_of", "check_run_arguments", "open_engine",
    "EngineOnDemand", "RunPlan", "RunResult", "CostEstimate", "cache_path", "own_kg_name",
    # Results and errors.
    "Fact", "Verdict", "DEFAULT_MODEL", "JUDGE_NONE", "KgcheckWarning", "SettingsError",
    "ArgumentError", "ArgumentMessage", "ArgumentNote", "RunError", "VerdictImportError",
    # What the command line uses besides (one import layer: kgcheck.cli -> kgcheck.api).
    "VERDICTS", "read_verdicts", "parse_ids", "is_defect", "redact_logs", "redact_text",
    "setup_tracing", "data_location", "import_corpus", "default_store_path", "corpus_counts",
    "served_graphs", "langgraph_config", "write_studio_config", "serve_review", "Served",
    "serve_explorer",
    "plan_sweep", "asweep",
    "index_evidence", "Indexed", "search_index_choice", "search_server", "comparison_text",
]

T = TypeVar("T")


def write_studio_config(path: str | Path | None = None) -> Path:
    """Write the ``langgraph.json`` that serves every registered graph; return its path.

    Args:
        path: Where to write it; by default ``langgraph.json`` in the ``.kgcheck`` home
            (``$KGCHECK_HOME``, else ``./.kgcheck``).

    """
    import json

    from kgcheck.data.atomic import write_text_atomic
    from kgcheck.data.paths import kgcheck_home

    target = Path(path) if path is not None else kgcheck_home() / "langgraph.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, json.dumps(langgraph_config(), indent=2) + "\n")
    return target


def analyse_errors(run_dirs: Sequence[str | Path], out_dir: str | Path, *,
                   model: str | None = None, embedder: str = "minilm", seed: int = 0,
                   cap: int | None = 500, taxonomy: bool = False,
                   taxonomy_prompt: str = "errors_taxonomy.txt",
                   explain_prompt: str = "errors_explain.txt", name_with_model: bool = False,
                   min_cluster_size: int = 5, concurrency: int = 4,
                   settings: Mapping[str, Any] | None = None) -> ErrorAnalysis:
    """Explain, cluster, name and count the wrong verdicts of runs; write ``out_dir``.

    Each wrong verdict (against review labels, else gold) is explained by ``model`` (each
    run's own by default; a replay model cannot explain), unless the verdict carries an
    explanation. The explanations are embedded by ``embedder``, reduced by UMAP and
    clustered by HDBSCAN, seeded by ``seed``. With ``taxonomy`` the model also sorts each
    into a category of ``taxonomy_prompt`` (the study's E1-E6), for Table 9. ``cap`` errors
    per run are a seeded sample. A stopped analysis resumes from
    ``out_dir/explanations.jsonl``. See the error analysis guide for the outputs.

    Raises:
        ValueError: a folder that is not a run, runs with no gold or review labels, no
            errors, a replay model asked to explain, an embedder or library that is not
            installed; the message says which and what to do.

    """
    return _analyse_errors(run_dirs, out_dir, model=model, embedder=embedder, seed=seed,
                           cap=cap, taxonomy=taxonomy, taxonomy_prompt=taxonomy_prompt,
                           explain_prompt=explain_prompt, name_with_model=name_with_model,
                           min_cluster_size=min_cluster_size, concurrency=concurrency,
                           settings=settings)


def open_explorer(run_dirs: Sequence[str | Path], *, errors: str | Path | None = None
                  ) -> Explorer:
    """Open run folders for exploring: scores, pages of facts, one fact's record, diffs.

    ``errors`` is an error analysis's folder (``analyse_errors``), whose clusters the
    facts can then be filtered by. Close the explorer when done (``explorer.close()``).
    """
    return Explorer([Path(d) for d in run_dirs], errors=Path(errors) if errors else None)


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
        origin = fact_source(None, facts, None, None, None, None, None)
        source, named = origin.open, origin.named
    else:
        source = facts if callable(facts) else as_facts_lazy(facts)
    return named(_select_facts(source, limit=limit, sample=sample, seed=seed,
                               stratify=stratify, per_stratum=per_stratum, ids=ids).facts)


def _sync(job: Coroutine[Any, Any, T], twin: str) -> T:
    """Run an async twin for a caller without an event loop; inside one, name the twin."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(job)
    job.close()
    raise RuntimeError(f"called inside a running event loop: await kgcheck.{twin}(...) "
                       "instead")


async def acheck(facts: Iterable[FactLike], strategy: str = "dka", model: str = DEFAULT_MODEL,
                 *, concurrency: int | str = 8, consensus: Sequence[str] | None = None,
                 judge: str = JUDGE_NONE, data: str | Path | None = None,
                 cache: CacheChoice = True, engine: str | Engine = "local",
                 settings: Mapping[str, Any] | None = None,
                 warn: Warn | None = None, **strategy_settings: Any) -> list[Verdict]:
    """Check facts with a strategy; return their verdicts in the order of ``facts``.

    The strategy's settings are keywords (``max_attempts=5``, ``base_url=URL``) or a
    ``settings`` mapping. The facts go through the same checks and runner as ``arun``
    (into a temporary run folder): settings that cannot work raise before any fact is
    sent, a fact whose check fails gets an NA verdict whose ``error`` says why, and a run
    stopped early (the model server unreachable) gives the facts left the reason as their
    ``error``. Live models' answers are cached (``cache``: see ``cache_path``).
    """
    items = as_facts(facts)
    ids = [f.id for f in items]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise ArgumentError(f"fact id {literal(repr(twice))} is given twice in {{facts}}; "
                            "each fact needs its own id", facts=Arg("facts"))
    with tempfile.TemporaryDirectory(prefix="kgcheck-check-") as folder:
        result = await arun(facts=items, strategy=strategy, model=model, consensus=consensus,
                            judge=judge, data=data, out=Path(folder) / "run",
                            concurrency=concurrency, cache=cache, engine=engine,
                            settings=settings, warn=warn, **strategy_settings)
    found = {str(r["fact_id"]): r for r in result.records}
    label = get_strategy(strategy).label
    who = ",".join(consensus) if consensus else model
    return [Verdict.model_validate(found[f.id]) if f.id in found else
            Verdict(fact_id=f.id, label="NA", method=label, model=who,
                    error=result.aborted or "not checked")
            for f in items]


def check(facts: Iterable[FactLike], strategy: str = "dka", model: str = DEFAULT_MODEL, *,
          concurrency: int | str = 8, consensus: Sequence[str] | None = None,
          judge: str = JUDGE_NONE, data: str | Path | None = None, cache: CacheChoice = True,
          engine: str | Engine = "local", settings: Mapping[str, Any] | None = None,
          warn: Warn | None = None, **strategy_settings: Any) -> list[Verdict]:
    """Check facts with a strategy (see ``acheck``); for scripts without an event loop."""
    return _sync(acheck(facts, strategy, model, concurrency=concurrency, consensus=consensus,
                        judge=judge, data=data, cache=cache, engine=engine, settings=settings,
                        warn=warn, **strategy_settings), "acheck")


def _notify(notes: Iterable[str], warn: Warn | None) -> None:
    for message in notes:
        if warn is None:
            warnings.warn(message, KgcheckWarning, stacklevel=4)
        else:
            warn(message)


async def arun(facts: Iterable[FactLike] | None = None, *, dataset: str | None = None,
               triples: str | Path | None = None, sparql: str | None = None,
               graph: str | None = None, where: str | None = None,
               strategy: str = "dka", model: str = DEFAULT_MODEL,
               consensus: Sequence[str] | None = None, judge: str = JUDGE_NONE,
               out: str | Path | None = None, data: str | Path | None = None,
               limit: int | None = None, sample: int | None = None, seed: int | None = 0,
               stratify: str | None = None, per_stratum: int | None = None,
               ids: Sequence[str] | None = None, labels: str | Path | None = None,
               as_dataset: str | None = None, pricing: str | Path | None = None,
               concurrency: int | str = 4, max_concurrency: int = 64, resume: bool = False,
               fresh: bool = False, show_progress: bool = False, warn: Warn | None = None,
               cache: CacheChoice = True, engine: str | Engine = "local",
               engine_options: Mapping[str, Any] | None = None,
               settings: Mapping[str, Any] | None = None,
               predicates: str | Sequence[str] | None = None,
               exclude_predicates: str | Sequence[str] | None = None,
               prefilter: str | None = None, rules: Mapping[str, Any] | None = None,
               ci: bool = False, repeats: int = 1,
               **strategy_settings: Any) -> RunResult:
    """Check many facts into a run folder, resumably; return the run's verdicts and summary.

    The facts come from exactly one of ``facts`` (in memory), ``dataset`` (a benchmark
    dataset), ``triples`` (your own file, RDF included) or ``sparql`` (an endpoint URL,
    with ``graph`` and ``where``); ``limit``, ``sample``/``seed``, ``stratify``/
    ``per_stratum`` and ``ids`` choose among them (see ``plan_run`` for every argument).
    The strategy's settings are keywords (``base_url=URL``, ``max_attempts=5``) or a
    ``settings`` mapping. Each verdict is appended to ``OUT/verdicts.jsonl`` as it
    completes; ``resume=True`` continues a stopped run in the same folder, ``fresh=True``
    starts it over. ``warn`` receives warnings found before the run (e.g. facts without
    evidence; default: ``KgcheckWarning``). Live models' answers are cached (``cache``, see
    ``cache_path``); the summary counts the hits. ``engine`` is ``local``, ``ray`` (with
    ``engine_options``) or an engine object the caller keeps open across runs. ``ci`` adds
    bootstrap intervals of the scores to the summary; ``repeats`` checks each fact that many
    times, the majority being its verdict (flip rates and score spread in the summary).
    ``prefilter="schema"`` checks each fact against ``rules`` (``{"ontology": FILE,
    "shapes": FILE, ...}``, the schema strategy's settings) first: a refuted fact is F
    without a model call.
    """
    check_run_arguments(facts=() if facts is None else facts, resume=resume, fresh=fresh,
                        concurrency=concurrency, max_concurrency=max_concurrency)
    runner = EngineOnDemand(engine, cache=cache, options=engine_options)
    try:
        checked = plan_run(facts=facts, dataset=dataset, triples=triples, sparql=sparql,
                           graph=graph, where=where, strategy=strategy, model=model,
                           consensus=consensus, judge=judge, out=out, data=data, limit=limit,
                           sample=sample, seed=seed, stratify=stratify,
                           per_stratum=per_stratum, ids=ids, labels=labels,
                           as_dataset=as_dataset, pricing=pricing, settings=settings,
                           parallel_read=runner.parallel_read, predicates=predicates,
                           exclude_predicates=exclude_predicates, ci=ci, repeats=repeats,
                           prefilter=prefilter, rules=rules, **strategy_settings)
        _notify(checked.notes, warn)
        return await execute(checked, concurrency=concurrency,
                             max_concurrency=max_concurrency, resume=resume, fresh=fresh,
                             show_progress=show_progress, cache=cache, engine=runner.get(),
                             warn=warn)
    finally:
        runner.close()


def run(facts: Iterable[FactLike] | None = None, *, dataset: str | None = None,
        triples: str | Path | None = None, sparql: str | None = None,
        graph: str | None = None, where: str | None = None,
        strategy: str = "dka", model: str = DEFAULT_MODEL,
        consensus: Sequence[str] | None = None, judge: str = JUDGE_NONE,
        out: str | Path | None = None, data: str | Path | None = None,
        limit: int | None = None, sample: int | None = None, seed: int | None = 0,
        stratify: str | None = None, per_stratum: int | None = None,
        ids: Sequence[str] | None = None, labels: str | Path | None = None,
        as_dataset: str | None = None, pricing: str | Path | None = None,
        concurrency: int | str = 4, max_concurrency: int = 64, resume: bool = False,
        fresh: bool = False, show_progress: bool = False, warn: Warn | None = None,
        cache: CacheChoice = True, engine: str | Engine = "local",
        engine_options: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
        predicates: str | Sequence[str] | None = None,
        exclude_predicates: str | Sequence[str] | None = None,
        prefilter: str | None = None, rules: Mapping[str, Any] | None = None,
        ci: bool = False, repeats: int = 1,
        **strategy_settings: Any) -> RunResult:
    """Check many facts into a run folder (see ``arun``); for scripts without an event loop."""
    return _sync(arun(
        facts, dataset=dataset, triples=triples, sparql=sparql, graph=graph, where=where,
        strategy=strategy, model=model, consensus=consensus, judge=judge, out=out, data=data,
        limit=limit, sample=sample, seed=seed, stratify=stratify, per_stratum=per_stratum,
        ids=ids, labels=labels, as_dataset=as_dataset, pricing=pricing,
        concurrency=concurrency, max_concurrency=max_concurrency, resume=resume, fresh=fresh,
        show_progress=show_progress, warn=warn, cache=cache, engine=engine,
        engine_options=engine_options, settings=settings, predicates=predicates,
        exclude_predicates=exclude_predicates, ci=ci, repeats=repeats, prefilter=prefilter,
        rules=rules,
        **strategy_settings), "arun")


def report(run_dirs: Sequence[str | Path], out: str | Path, *, with_recorded: bool = False,
           data: str | Path | None = None, plots: bool = True, ci: bool = False) -> Outputs:
    """Build the study's tables (and figures) from run folders, optionally beside its rows.

    ``ci`` adds bootstrap intervals of accuracy, F1(T), F1(F) and macro-F1.
    """
    return build_report(run_dirs, out, with_recorded=with_recorded, data=data, plots=plots,
                        ci=ci)


def compare(run_a: str | Path, run_b: str | Path, *, resamples: int = 10_000,
            confidence: float = 0.95, seed: int = 0, json_out: str | Path | None = None,
            disagreements_out: str | Path | None = None,
            warn: Warn | None = None) -> Comparison:
    """Compare two runs on the facts both checked: McNemar's exact test, paired intervals.

    The intervals are of A - B (accuracy, F1(T), F1(F), macro-F1), from ``resamples``
    paired bootstrap resamples drawn with ``seed``. ``json_out`` receives
    ``Comparison.as_json()``; ``disagreements_out`` a CSV of the facts answered differently.
    """
    from kgcheck.data.atomic import write_text_atomic

    result = compare_runs(run_a, run_b, resamples=resamples, confidence=confidence,
                          seed=seed, warn=warn)
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(result.as_json(), indent=1) + "\n")
    if disagreements_out is not None:
        write_text_atomic(disagreements_out, disagreements_csv(result.disagreements))
    return result


def agreement(files: Sequence[str | Path], *, run: str | Path | None = None,
              json_out: str | Path | None = None) -> dict[str, Any]:
    """Measure how the people who labelled a run agree (kappas, alpha) and with the model.

    ``files`` are labels files of one run, one per person; ``run`` is the run whose verdicts
    they reviewed (default: the run folder holding the first file). ``json_out`` receives
    the result as JSON.
    """
    from kgcheck.data.atomic import write_text_atomic

    result = _agreement(files, run=run)
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(result, indent=1) + "\n")
    return result


def reproduce(out: str | Path, *, data: str | Path | None = None,
              datasets: Sequence[str] | None = None, plots: bool = True,
              warn: Warn | None = None, ci: bool = False) -> Outputs:
    """Recompute the study's tables 5 to 8 and figures from its recorded answers.

    The tables keep the study's point values; ``ci`` adds bootstrap intervals after them.

    Answers that cannot be scored (a dataset without gold labels, an unreadable answers
    file) are left out with a warning (to ``warn``, else ``KgcheckWarning``) that the
    tables repeat; when nothing can be scored, a ``ValueError`` says why.
    """
    def note(message: str) -> None:
        if warn is None:
            warnings.warn(message, KgcheckWarning, stacklevel=3)
        else:
            warn(message)

    return reproduce_tables(out, data=data, datasets=datasets, plots=plots, warn=note, ci=ci)


def evidence_sources() -> list[str]:
    """Names the ``sources`` setting accepts: the stored corpus and every registered source."""
    return [CORPUS, *EVIDENCE_SOURCES.names()]


@dataclass(frozen=True)
class FetchedEvidence:
    """What the evidence sources fetched into a store: per-source counts and the items."""

    store: Path
    counts: dict[str, tuple[int, int, str]]
    items: list[Fetched]


def data_location(data: str | Path | None = None) -> str:
    """Say where the FactCheck data is read from (``data``, ``$KGCHECK_DATA`` or vendored)."""
    return open_data(data).location


def corpus_counts(store: str | Path) -> dict[str, tuple[int, int]]:
    """Count the facts and documents of each dataset in a corpus store."""
    return CorpusStore(Path(store)).counts()


def fetched_evidence(store: str | Path | None = None, *, source: str = "",
                     limit: int = 1000) -> FetchedEvidence:
    """List the results and pages fetched into the store (URL, title, fetch time, source)."""
    path = Path(store) if store else default_store_path()
    if not path.is_file():
        raise SettingsError(f"{literal(str(path))}: no corpus store; import a corpus or run "
                            "RAG with {sources} first",
                            sources=Arg("set:sources", Placeholder("...")))
    opened = CorpusStore(path)
    try:
        return FetchedEvidence(path, opened.fetched_counts(),
                               opened.fetched_items(source, limit))
    finally:
        opened.close()


async def adry_run(facts: Iterable[FactLike] | None = None, *, dataset: str | None = None,
                   triples: str | Path | None = None, sparql: str | None = None,
                   graph: str | None = None, where: str | None = None,
                   strategy: str = "dka", model: str = DEFAULT_MODEL,
                   consensus: Sequence[str] | None = None, judge: str = JUDGE_NONE,
                   out: str | Path | None = None, data: str | Path | None = None,
                   limit: int | None = None, sample: int | None = None,
                   seed: int | None = 0, stratify: str | None = None,
                   per_stratum: int | None = None, ids: Sequence[str] | None = None,
                   labels: str | Path | None = None, as_dataset: str | None = None,
                   pricing: str | Path | None = None, resume: bool = False,
                   warn: Warn | None = None, settings: Mapping[str, Any] | None = None,
                   **strategy_settings: Any) -> CostEstimate:
    """Estimate a run's calls, tokens and cost before it starts (``arun``'s arguments).

    Nothing is sent to a model (its server is reached once, as before a run); with
    ``resume=True`` the facts ``out`` already holds verdicts for are left out.
    ``kgcheck run --dry-run`` prints the same figures. The input is read in a thread, so
    the event loop stays free.
    """
    def estimate() -> CostEstimate:
        checked = plan_run(facts=facts, dataset=dataset, triples=triples, sparql=sparql,
                           graph=graph, where=where, strategy=strategy, model=model,
                           consensus=consensus, judge=judge, out=out, data=data, limit=limit,
                           sample=sample, seed=seed, stratify=stratify,
                           per_stratum=per_stratum, ids=ids, labels=labels,
                           as_dataset=as_dataset, pricing=pricing, settings=settings,
                           **strategy_settings)
        _notify(checked.notes, warn)
        return dry_run_of(checked, resume=resume)

    return await asyncio.to_thread(estimate)


def dry_run(facts: Iterable[FactLike] | None = None, *, dataset: str | None = None,
            triples: str | Path | None = None, sparql: str | None = None,
            graph: str | None = None, where: str | None = None,
            strategy: str = "dka", model: str = DEFAULT_MODEL,
            consensus: Sequence[str] | None = None, judge: str = JUDGE_NONE,
            out: str | Path | None = None, data: str | Path | None = None,
            limit: int | None = None, sample: int | None = None, seed: int | None = 0,
            stratify: str | None = None, per_stratum: int | None = None,
            ids: Sequence[str] | None = None, labels: str | Path | None = None,
            as_dataset: str | None = None, pricing: str | Path | None = None,
            resume: bool = False, warn: Warn | None = None,
            settings: Mapping[str, Any] | None = None,
            **strategy_settings: Any) -> CostEstimate:
    """Estimate a run's calls, tokens and cost before it starts (see ``adry_run``)."""
    return _sync(adry_run(
        facts, dataset=dataset, triples=triples, sparql=sparql, graph=graph, where=where,
        strategy=strategy, model=model, consensus=consensus, judge=judge, out=out, data=data,
        limit=limit, sample=sample, seed=seed, stratify=stratify, per_stratum=per_stratum,
        ids=ids, labels=labels, as_dataset=as_dataset, pricing=pricing, resume=resume,
        warn=warn, settings=settings, **strategy_settings), "adry_run")


def explain(run_dir: str | Path, fact_id: str) -> dict[str, Any]:
    """Return one verdict of a run, explained: the record ``kgcheck show`` prints.

    It holds the label, confidence, reason, citations, correction, answer problems and the
    exact conversation.

    Raises:
        RunFolderError: ``run_dir`` is no run folder, or holds no verdict of ``fact_id``.

    """
    return read_verdict(Path(run_dir), str(fact_id))


def export(run_dir: str | Path, format: str = "csv", out: str | Path | None = None, *,
           only: str | Sequence[str] | None = None, rdf: str = "annotated") -> Exported:
    """Export a run's verdicts as ``csv``, ``jsonl``, ``nt``, ``ttl`` or ``factcheck``, or changes.

    ``sparql`` and ``patch`` write the changes instead: a SPARQL 1.1 Update (or an RDF
    Patch) deleting the triples judged or labelled false and inserting accepted corrections.
    ``factcheck`` is the FactCheck study's result file (see ``evals.export``); given a folder
    as ``out``, it is written there under the name FactCheck gives it.

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
        raise SettingsError("give exactly one of {sources}", sources=Arg(
            "dataset", triples=NAME_ONLY, facts=NAME_ONLY, run=NAME_ONLY, join=", "))
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


async def aimport_verdicts(file: str | Path, out: str | Path, *,
                           triples: str | Path | None = None, dataset: str | None = None,
                           data: str | Path | None = None,
                           fresh: bool = False) -> RunResult:
    """Turn verdicts made elsewhere into a run folder (scored like any run).

    ``file`` is a FactCheck study result file (``.json``, any name) or a CSV/JSONL of
    ``fact_id,label``. The facts and their gold labels come from ``triples`` or
    ``dataset``; without either, from the dataset the study file's name gives.
    """
    found = read_verdict_file(file)
    if triples is not None and dataset is not None:
        raise SettingsError("give at most one of {triples} and {dataset}",
                            triples=Arg("triples"), dataset=Arg("dataset"))
    if triples is not None:
        facts = _read_triples(triples)
        name, source = facts[0].dataset, str(Path(triples).resolve())
    else:
        wanted = dataset or found.dataset
        if not wanted:
            raise VerdictImportError(f"{literal(str(file))}: the file name names no dataset; pass "
                                     "{dataset} or {triples}", dataset=Arg("dataset"),
                                     triples=Arg("triples"))
        src = as_source(data)
        name = canonical_dataset(src, wanted)
        facts, source = load_facts(name, src), src.location
    return await import_run(found, facts, Path(out), source=source, dataset=name, fresh=fresh)


def import_verdicts(file: str | Path, out: str | Path, *, triples: str | Path | None = None,
                    dataset: str | None = None, data: str | Path | None = None,
                    fresh: bool = False) -> RunResult:
    """Turn verdicts made elsewhere into a run folder (see ``aimport_verdicts``)."""
    return _sync(aimport_verdicts(file, out, triples=triples, dataset=dataset, data=data,
                                  fresh=fresh), "aimport_verdicts")


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
                reviewer: str | None = None, annotator: str | None = None,
                team: Sequence[str] = (), overlap: float = 0.0, adjudicate: bool = False,
                stratify: str | None = None, until_moe: float | None = None,
                on_reached: Callable[[dict[str, Any]], None] | None = None,
                order: str = "run") -> Review:
    """Open a run for human review, with ``async with`` or, without an event loop, ``with``.

    The queue is the run's verdicts, or those ``only`` names (``"F,NA,ties"`` or
    ``["F", "NA"]``), optionally a ``sample`` of them drawn with ``seed``;
    ``order="uncertainty"`` puts the least certain verdicts (NEI, then the lowest
    ``max(p, 1 - p)``) first.
    ``async with kgcheck.open_review("runs/x") as review:`` gives the session
    (``await review.decide(fact_id, "T")``, ``await review.undo()``);
    ``with kgcheck.open_review("runs/x") as review:`` the same session with plain methods
    (``review.decide(fact_id, "T")``). Either drives the ``review`` graph; decisions persist
    in ``RUN/review.sqlite`` and ``RUN/labels.csv``. One review per labels file at a time.

    Several people review one run each as an ``annotator`` (into ``labels-<name>.csv``);
    with a ``team`` of names, ``overlap`` (a share, 0 to 1) of the facts goes to everyone and
    the rest to one person each. ``adjudicate`` queues the facts the annotators labelled
    differently, for the final ``labels.csv``. ``stratify`` (``predicate`` or ``verdict``)
    draws the ``sample`` per stratum. The session's ``estimate()`` is the running accuracy
    estimate (Wilson, Beta HDI, PPI, margin of error); ``on_reached`` hears once when the
    margin reaches ``until_moe``.
    """
    filters = parse_only(only if isinstance(only, str) or only is None else ",".join(only))
    return Review(lambda: ReviewSession.open(
        run_dir, only=filters, sample=sample, seed=seed, reviewer=reviewer,
        annotator=annotator, team=team, overlap=overlap, adjudicate=adjudicate,
        stratify=stratify, until_moe=until_moe, on_reached=on_reached, order=order))


class Review:
    """A review being opened: an async and a sync context manager (see ``open_review``)."""

    def __init__(self, opener: Callable[[], AbstractAsyncContextManager[ReviewSession]]
                 ) -> None:
        self._opener = opener
        self._opened: AbstractAsyncContextManager[ReviewSession] | None = None
        self._loop: asyncio.Runner | None = None

    async def __aenter__(self) -> ReviewSession:
        self._opened = self._opener()
        return await self._opened.__aenter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._opened is not None
        opened, self._opened = self._opened, None
        return await opened.__aexit__(*exc)

    def __enter__(self) -> SyncReview:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("called inside a running event loop: use "
                               "`async with kgcheck.open_review(...)` instead")
        self._loop = asyncio.Runner()
        try:
            session = self._loop.run(self.__aenter__())
        except BaseException:
            self._loop.close()
            self._loop = None
            raise
        return SyncReview(session, self._loop)

    def __exit__(self, *exc: Any) -> bool | None:
        assert self._loop is not None
        loop, self._loop = self._loop, None
        try:
            return loop.run(self.__aexit__(*exc))
        finally:
            loop.close()


class SyncReview:
    """A review session with plain methods, for scripts without an event loop."""

    def __init__(self, session: ReviewSession, loop: asyncio.Runner) -> None:
        self.session = session
        self._loop = loop

    def decide(self, fact_id: str, label: str, note: str = "", reviewer: str | None = None,
               *, correction: str = "", corrected_value: str = "") -> dict[str, Any]:
        """Record a person's verdict on a fact (see ``ReviewSession.decide``)."""
        return self._loop.run(self.session.decide(fact_id, label, note, reviewer,
                                                  correction=correction,
                                                  corrected_value=corrected_value))

    def undo(self, fact_id: str | None = None) -> str | None:
        """Take back a decision, the last one by default (see ``ReviewSession.undo``)."""
        return self._loop.run(self.session.undo(fact_id))

    def __getattr__(self, name: str) -> Any:
        # The session's plain attributes (items, progress, rows, labels_path, ...).
        return getattr(self.session, name)


@dataclass(frozen=True)
class Indexed:
    """What ``index_evidence`` did: facts embedded now and before, documents, chunks, where."""

    facts: int
    done_before: int
    documents: int
    chunks: int
    seconds: float
    location: str


def index_evidence(dataset: str, *, corpus: str = "", data: str | Path | None = None,
                   embedding: str = "minilm", chroma_path: str = "", chroma_url: str = "",
                   candidates: int = 24, retrieval: str = "hybrid", limit: int | None = None,
                   revisit: bool = False,
                   on_start: Callable[[int], None] | None = None,
                   on_fact: Callable[[str], None] | None = None) -> Indexed:
    """Embed the chunks RAG runs will need into the dataset's Chroma collection.

    Facts indexed before are skipped unless ``revisit`` (then only missing vectors are
    embedded); ``on_start`` hears how many facts will be indexed, ``on_fact`` each one done.
    """
    import time
    from contextlib import nullcontext

    from kgcheck.retrievers.evidence import get_retriever
    from kgcheck.retrievers.index import index_lock
    from kgcheck.retrievers.questions import FactStatements, template_questions

    # A Chroma server takes care of its writers; a Chroma folder takes one build at a time.
    with nullcontext() if chroma_url else index_lock(chroma_path):
        retriever = get_retriever(corpus, dataset=dataset, embedding=embedding, index="chroma",
                                  chroma_path=chroma_path, chroma_url=chroma_url)
        fact_ids = retriever.source.fact_ids(dataset)
        if not fact_ids:
            raise SettingsError(f"the corpus {literal(retriever.source.location)} has no "
                                f"documents for dataset {literal(repr(dataset))}; import them "
                                "with `kgcheck corpus import`")
        if limit is not None:
            fact_ids = fact_ids[:limit]
        target = retriever.index(dataset)
        done = set() if revisit else target.indexed_facts(fact_ids)
        todo = [f for f in fact_ids if f not in done]
        statements = FactStatements(str(data) if data else None)
        started = time.perf_counter()
        embedded = docs = 0
        if on_start:
            on_start(len(todo))
        for fact_id in todo:
            sentence, subject, obj = statements.get(dataset, fact_id)
            embedded += retriever.index_fact(dataset, fact_id, sentence,
                                             template_questions(subject, obj, sentence),
                                             candidates=candidates, mode=retrieval)
            docs += len(retriever.corpus(dataset, fact_id).documents)
            if on_fact:
                on_fact(fact_id)
        return Indexed(len(todo), len(done), docs, embedded, time.perf_counter() - started,
                       target.location)


def search_index_choice(index: str, chroma_path: str) -> str:
    """Pick the chunk index the search API ranks with; ``auto`` writes nothing unasked.

    ``auto`` uses Chroma only where a cache was configured or built before (``chroma_path``,
    ``$KGCHECK_HOME``, or an existing ``.kgcheck/chroma``), else vectors in memory, so that
    serving requests never creates a folder under the current one.
    """
    import os

    from kgcheck.retrievers.index import default_chroma_path
    from kgcheck.retrievers.store import HOME_ENV

    if index != "auto":
        return index
    configured = chroma_path or os.environ.get(HOME_ENV) or default_chroma_path().is_dir()
    return "chroma" if configured else "memory"


def search_server(*, corpus: str = "", embedding: str = "minilm", index: str = "auto",
                  chroma_path: str = "", api_key: str, data: str | Path | None = None,
                  host: str = "127.0.0.1", port: int = 8765) -> tuple[Any, str]:
    """Build the search API's server over a local corpus; return it and the corpus's place.

    The server (``uvicorn.Server``) runs with ``server.run(sockets=...)``.
    """
    import uvicorn

    from kgcheck.retrievers.evidence import get_retriever
    from kgcheck.retrievers.search.server import create_app, server_config

    if corpus.startswith(("http://", "https://")):
        raise SettingsError("{corpus}: serve a local corpus (folder, .tar.gz or .sqlite), not "
                            "a URL", corpus=Arg("corpus", corpus))
    retriever = get_retriever(corpus, embedding=embedding,
                              index=search_index_choice(index, chroma_path),
                              chroma_path=chroma_path)
    served = create_app(retriever.source, retriever.engine, api_key=api_key,
                        data=str(data) if data else None)
    return uvicorn.Server(server_config(served, host, port)), retriever.source.location
