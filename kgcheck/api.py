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
import importlib
import json
import re
import tempfile
import warnings
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

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
    has_verdicts,
    read_run_info,
    read_verdict,
    read_verdicts,
    verdicts_location,
)
from kgcheck.data.sampling import parse_ids
from kgcheck.data.sampling import select_facts as _select_facts
from kgcheck.data.sparql import SparqlClient, SparqlReader
from kgcheck.data.triples import iter_triples as _iter_triples
from kgcheck.data.triples import read_triples as _read_triples
from kgcheck.data.upstream import as_source, canonical_dataset, open_data
from kgcheck.evals.accuracy.estimators import EstimateError
from kgcheck.evals.errors.graph import ErrorsContext
from kgcheck.evals.errors.pipeline import ErrorAnalysis
from kgcheck.evals.errors.pipeline import analyse_errors as _analyse_errors
from kgcheck.evals.export import Exported, export_run
from kgcheck.evals.report import Outputs, build_report, reproduce_tables
from kgcheck.evals.stats.agreement import agreement as _agreement
from kgcheck.evals.stats.paired import Comparison, compare_runs
from kgcheck.evals.stats.report import comparison_text, disagreements_csv
from kgcheck.event_loop import run as run_coroutine
from kgcheck.event_loop import runner as loop_runner
from kgcheck.graphs.consensus.judges import JUDGE_NONE
from kgcheck.graphs.context import DEFAULT_MODEL
from kgcheck.graphs.registry import Strategy, get_strategy
from kgcheck.graphs.registry import strategies as _strategies
from kgcheck.graphs.served import langgraph_config, served_graphs
from kgcheck.graphs.verdicts import is_defect
from kgcheck.providers.secrets import redact_logs, redact_text
from kgcheck.retrievers.sources.base import CORPUS, EVIDENCE_SOURCES
from kgcheck.retrievers.store import CorpusStore, Fetched, default_store_path, import_corpus
from kgcheck.review.session import ReviewSession, parse_only
from kgcheck.runs.dry_run import Estimate as CostEstimate
from kgcheck.runs.engines import Engine
from kgcheck.runs.importing import VerdictImportError, import_run, read_verdict_file
from kgcheck.runs.launch import dry_run_spec, run_spec
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
    dry_run_of,
    execute,
    fact_source,
    open_engine,
    own_kg_name,
    parse_setting_pairs,
    plan_run,
    read_setting_pairs,
)
from kgcheck.runs.resume_from import fresh_arguments, resume_arguments, stored_arguments
from kgcheck.runs.runner import RunResult
from kgcheck.runs.spec import ModelOptions, RunSpec, merged_settings, python_fields
from kgcheck.tracing import setup_tracing
from kgcheck.view.explorer import Explorer

if TYPE_CHECKING:
    from kgcheck.evals.accuracy.audit import EstimateResult, SampleResult
    from kgcheck.review.server import Served
    from kgcheck.review.server import serve as serve_review
    from kgcheck.runs.sweeps import asweep, plan_sweep
    from kgcheck.view.server import serve as serve_explorer

# Names served from their modules on first use (PEP 562): accuracy estimates, the review and
# explorer servers and sweeps import pandas, matplotlib and FastAPI; a run starts without.
LAZY_NAMES = {
    "serve_review": ("kgcheck.review.server", "serve"),
    "Served": ("kgcheck.review.server", "Served"),
    "asweep": ("kgcheck.runs.sweeps", "asweep"),
    "plan_sweep": ("kgcheck.runs.sweeps", "plan_sweep"),
    "serve_explorer": ("kgcheck.view.server", "serve"),
}


def __getattr__(name: str) -> Any:
    if name in LAZY_NAMES:
        module, attribute = LAZY_NAMES[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'kgcheck.api' has no attribute {name!r}")


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
    "RunSpec", "ModelOptions", "plan_run", "execute", "dry_run_of", "open_engine", "run_spec",
    "dry_run_spec", "resume_arguments", "fresh_arguments", "stored_arguments",
    "EngineOnDemand", "RunPlan", "RunResult", "CostEstimate", "cache_path", "own_kg_name",
    # Results and errors.
    "Fact", "Verdict", "DEFAULT_MODEL", "JUDGE_NONE", "KgcheckWarning", "SettingsError",
    "ArgumentError", "ArgumentMessage", "ArgumentNote", "RunError", "VerdictImportError",
    # What the command line uses besides (one import layer: kgcheck.cli -> kgcheck.api).
    "VERDICTS", "read_verdicts", "has_verdicts", "verdicts_location", "parse_ids", "is_defect",
    "redact_logs", "redact_text", "run_coroutine",
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

    Returns:
        The path written.

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
                   base_url: str | None = None,
                   settings: Mapping[str, Any] | Sequence[str] | None = None) -> ErrorAnalysis:
    """Explain, cluster, name and count the wrong verdicts of runs; write ``out_dir``.

    Each wrong verdict (against review labels, else gold) is explained by a model, unless
    the verdict carries an explanation. The explanations are embedded, reduced by UMAP and
    clustered by HDBSCAN. A stopped analysis resumes from ``out_dir/explanations.jsonl``.
    See the error analysis guide for the outputs.

    Args:
        run_dirs: Run folders whose wrong verdicts are analysed.
        out_dir: Folder the tables, clusters, plot and explanations are written to.
        model: Model that explains (each run's own by default; a replay model cannot).
        embedder: Embedder of the explanations (``minilm``, ``hf:``, ``ollama:``,
            ``openai:`` models).
        seed: Seed of the error sample, UMAP and HDBSCAN: same seed, same clusters.
        cap: Errors analysed per run at most (a seeded sample); None for all.
        taxonomy: Also sort each explanation into a category, for Table 9.
        taxonomy_prompt: Prompt file of the categories (the study's E1-E6 by default).
        explain_prompt: Prompt file that asks for an explanation.
        name_with_model: Name the clusters by the model instead of c-TF-IDF keywords.
        min_cluster_size: HDBSCAN's smallest cluster.
        concurrency: Model calls at once.
        base_url: The explaining model's server (Ollama, OpenAI-compatible).
        settings: Settings of the explaining model (``temperature``, ``max_tokens``, ...), a
            mapping or ``KEY=VALUE`` texts (``--set`` on the command line).

    Returns:
        The analysis: its records, clusters, tables and the files written.

    Raises:
        ValueError: A folder that is not a run, runs with no gold or review labels, no
            errors, a replay model asked to explain, an embedder or library that is not
            installed; the message says which and what to do.

    """
    if settings is not None and not isinstance(settings, Mapping):
        settings = read_setting_pairs(
            settings, {f.name: f for f in dataclasses.fields(ErrorsContext)})
    if base_url:
        settings = merged_settings(settings, {"base_url": base_url})
    return _analyse_errors(run_dirs, out_dir, model=model, embedder=embedder, seed=seed,
                           cap=cap, taxonomy=taxonomy, taxonomy_prompt=taxonomy_prompt,
                           explain_prompt=explain_prompt, name_with_model=name_with_model,
                           min_cluster_size=min_cluster_size, concurrency=concurrency,
                           settings=settings)


def open_explorer(run_dirs: Sequence[str | Path], *, errors: str | Path | None = None
                  ) -> Explorer:
    """Open run folders for exploring: scores, pages of facts, one fact's record, diffs.

    Args:
        run_dirs: Run folders to open, numbered from 0 in the order given.
        errors: An error analysis's folder (``analyse_errors``), whose clusters the facts
            can then be filtered by.

    Returns:
        The explorer; close it when done (``explorer.close()``).

    """
    return Explorer([Path(d) for d in run_dirs], errors=Path(errors) if errors else None)


def strategies() -> dict[str, Strategy]:
    """List every registered strategy (built-in and from installed plugins).

    Returns:
        The strategies by name.

    """
    return _strategies()


def strategy(name: str) -> Strategy:
    """Look up one strategy by name.

    Args:
        name: A registered strategy's name (``dka``, ``giv-z``, ``rag``, ...).

    Returns:
        The strategy: its graph, Context class, label and description.

    Raises:
        LookupError: An unknown name; the message lists the known ones.

    """
    return get_strategy(name)


def settings(name: str) -> list[dict[str, Any]]:
    """List a strategy's settings.

    Args:
        name: A registered strategy's name.

    Returns:
        One mapping per setting: ``name``, ``type``, ``default``, ``description``.

    Raises:
        LookupError: An unknown strategy name.

    """
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

    Args:
        name: The dataset's name, in any case (``yago``, ``factbench``, ``dbpedia``).
        data: A folder in the upstream layout (a clone of FactCheck-AI/FactCheck); by
            default ``$KGCHECK_DATA``, else the compact copy shipped with kgcheck.

    Returns:
        The dataset's facts, in file order.

    Raises:
        ValueError: An unknown dataset, or a data folder that does not hold it.

    """
    src = as_source(data)
    return load_facts(canonical_dataset(src, name), src)


def datasets(data: str | Path | None = None) -> list[DatasetInfo]:
    """Describe every dataset of a data folder: facts, labels, true share, defects.

    Args:
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else the
            vendored copy.

    Returns:
        One description per dataset.

    """
    return describe_datasets(data)


def read_triples(path: str | Path, dataset: str = "", *,
                 data: str | Path | None = None, base_iri: str | None = None) -> list[Fact]:
    """Read your own facts from CSV, TSV, JSON Lines or RDF (``.nt .nq .ttl .trig .rdf``).

    RDF terms are kept in N-Triples syntax in ``Fact.rdf``; names the file gives its terms
    (``rdfs:label``, ``skos:prefLabel``, ``schema:name``) are in ``Fact.names``.

    Args:
        path: The triples file (compressed files are read too).
        dataset: The name of their KG; by default the file's stem (``own_kg_name``), never
            a benchmark's name unless given here.
        data: The data folder whose benchmark names the stem must not take.
        base_iri: The base of relative IRIs in a Turtle, TriG or RDF/XML file (by default
            the file's own URI).

    Returns:
        The file's facts, in file order.

    Raises:
        ValueError: A file that cannot be read, naming the file, line and problem.

    """
    return _read_triples(path, dataset or own_kg_name(path, data), base_iri=base_iri)


def iter_triples(path: str | Path, dataset: str = "") -> Iterator[Fact]:
    """Yield the facts of a triples file one by one (without names; see ``select_facts``).

    Args:
        path: The triples file.
        dataset: The name of their KG; by default the file's stem.

    Returns:
        An iterator of the file's facts, read as it is consumed.

    """
    return _iter_triples(path, dataset)


def read_sparql(url: str, *, graph: str | None = None, where: str | None = None,
                limit: int | None = None, sample: int | None = None, seed: int | None = 0,
                page_size: int = 10_000, timeout: float = 30.0, retries: int = 3
                ) -> list[Fact]:
    """Read facts from a SPARQL 1.1 endpoint, with their names from the same endpoint.

    Args:
        url: The endpoint's URL.
        graph: A named graph to read from; by default the default graph.
        where: A pattern binding ``?s ?p ?o``
            (``?s a <http://dbpedia.org/ontology/Person> . ?s ?p ?o``).
        limit: Read the first ``limit`` facts only.
        sample: Draw a seeded uniform sample of this many facts.
        seed: Seed of ``sample``.
        page_size: Triples per query page.
        timeout: Seconds to wait for each request.
        retries: Retries of a failed request (with backoff) before giving up.

    Returns:
        The facts chosen, named.

    Raises:
        ValueError: An endpoint that does not answer or answers with an error.

    """
    reader = SparqlReader(SparqlClient(url, timeout=timeout, retries=retries), graph=graph,
                          where=where, page_size=page_size)
    return reader.named(_select_facts(lambda: iter(reader), limit=limit, sample=sample,
                                      seed=seed).facts)


def select_facts(facts: str | Path | Iterable[FactLike] | Callable[[], Iterable[Fact]], *,
                 limit: int | None = None, sample: int | None = None, seed: int | None = 0,
                 stratify: str | None = None, per_stratum: int | None = None,
                 ids: Sequence[str] | None = None, base_iri: str | None = None
                 ) -> list[Fact]:
    """Choose facts from a file or a stream: the first ``limit``, a seeded ``sample``, ``ids``.

    Memory holds only the chosen facts.

    Args:
        facts: A triples file (read as a stream, with the names it gives its terms),
            facts, or a function returning a fresh iterator of them.
        limit: Keep the first ``limit`` facts.
        sample: Draw a seeded uniform sample of this many facts.
        seed: Seed of ``sample``.
        stratify: ``"predicate"``: with ``sample``, draw in proportion to the predicates.
        per_stratum: With ``stratify``, draw this many facts of each stratum instead.
        ids: Keep the facts with these ids, in this order.
        base_iri: The base of relative IRIs in a Turtle, TriG or RDF/XML file (by default
            the file's own URI).

    Returns:
        The chosen facts.

    """
    named: Callable[[list[Fact]], list[Fact]] = list
    source: Iterable[Fact] | Callable[[], Iterable[Fact]]
    if isinstance(facts, str | Path):
        origin = fact_source(None, facts, None, None, None, None, None, base_iri=base_iri)
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
        return run_coroutine(job)
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

    The facts go through the same checks and runner as ``arun`` (into a temporary run
    folder): a fact whose check fails gets an NA verdict whose ``error`` says why, and a run
    stopped early (the model server unreachable) gives the facts left the reason as their
    ``error``.

    Args:
        facts: Facts (``Fact`` objects, mappings or ``(s, p, o)`` tuples), each id once.
        strategy: The strategy's name (``dka``, ``giv-z``, ``giv-f``, ``dka-sc``, ``rag``).
        model: The model, as ``provider:name`` (``replay:gemma2:9b``, ``ollama:...``).
        concurrency: Facts checked at once, or ``"auto"``.
        consensus: Models that vote instead of ``model`` (multi-model consensus).
        judge: With ``consensus``, the model that breaks ties (none by default).
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else vendored.
        cache: Cache live models' answers: True (the default file), False, or a path
            (see ``cache_path``).
        engine: ``local``, ``ray`` or an engine object the caller keeps open.
        warn: Receives warnings found before the run (e.g. facts without evidence);
            by default they are issued as ``KgcheckWarning``.
        settings: The strategy's settings as a mapping.
        **strategy_settings: The strategy's settings as keywords (``base_url=URL``,
            ``max_attempts=5``; see ``settings``).

    Returns:
        One verdict per fact, in the order of ``facts``.

    Raises:
        ArgumentError: A fact id given twice.
        SettingsError: Settings that cannot work (unknown strategy, model or setting, a
            missing prompt file), before any fact is sent.

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
        # Read before the folder goes: the records stream from its verdicts file.
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
    """Check facts with a strategy, for scripts without an event loop (see ``acheck``).

    Args:
        facts: Facts (``Fact`` objects, mappings or ``(s, p, o)`` tuples), each id once.
        strategy: The strategy's name (``dka``, ``giv-z``, ``giv-f``, ``dka-sc``, ``rag``).
        model: The model, as ``provider:name`` (``replay:gemma2:9b``, ``ollama:...``).
        concurrency: Facts checked at once, or ``"auto"``.
        consensus: Models that vote instead of ``model`` (multi-model consensus).
        judge: With ``consensus``, the model that breaks ties (none by default).
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else vendored.
        cache: Cache live models' answers: True (the default file), False, or a path.
        engine: ``local``, ``ray`` or an engine object the caller keeps open.
        warn: Receives warnings found before the run (e.g. facts without evidence);
            by default they are issued as ``KgcheckWarning``.
        settings: The strategy's settings as a mapping.
        **strategy_settings: The strategy's settings as keywords (``base_url=URL``,
            ``max_attempts=5``; see ``settings``).

    Returns:
        One verdict per fact, in the order of ``facts``.

    Raises:
        RuntimeError: Called inside a running event loop (await ``acheck`` there).
        SettingsError: Settings that cannot work, before any fact is sent.

    """
    return _sync(acheck(**_keywords(locals())), "acheck")


def _keywords(arguments: dict[str, Any]) -> dict[str, Any]:
    """Return a function's arguments (its ``locals()`` on entry) as keywords to pass on."""
    keywords = {name: value for name, value in arguments.items() if name != "strategy_settings"}
    return {**keywords, **arguments.get("strategy_settings", {})}


def _spec_of(arguments: dict[str, Any]) -> RunSpec:
    """Make the spec of a run function's arguments (its ``locals()`` on entry)."""
    options = {name: arguments[name] for name in python_fields()}
    return RunSpec.of(options, arguments.get("strategy_settings"), spec=arguments.get("spec"))


async def arun(facts: Iterable[FactLike] | None = None, *, model: str = DEFAULT_MODEL,
               base_url: str | None = None, settings: Mapping[str, Any] | None = None,
               dataset: str | None = None, triples: str | Path | None = None,
               base_iri: str | None = None,
               sparql: str | None = None, graph: str | None = None, where: str | None = None,
               predicates: str | Sequence[str] | None = None,
               exclude_predicates: str | Sequence[str] | None = None,
               labels: str | Path | None = None, sample: int | None = None, seed: int | None = 0,
               stratify: str | None = None, per_stratum: int | None = None,
               ids: Sequence[str] | None = None, as_dataset: str | None = None,
               strategy: str = "dka", data: str | Path | None = None, limit: int | None = None,
               concurrency: int | str = 4, max_concurrency: int = 64, cache: CacheChoice = True,
               engine: str | Engine = "local", engine_options: Mapping[str, Any] | None = None,
               ray_address: str | None = None, ray_workers: int | None = None,
               ray_shard_mb: float | None = None, shards_uri: str | None = None,
               out: str | Path | None = None, resume: bool = False, fresh: bool = False,
               prompt: str | None = None, replay_latency: float = 0.0,
               consensus: Sequence[str] | None = None, judge: str = JUDGE_NONE,
               show_progress: bool = False, pricing: str | Path | None = None, ci: bool = False,
               repeats: int = 1, prefilter: str | None = None,
               rules: Mapping[str, Any] | None = None, ontology: str | None = None,
               shapes: str | None = None, spec: RunSpec | None = None, warn: Warn | None = None,
               **strategy_settings: Any) -> RunResult:
    """Check many facts into a run folder, resumably; return the run's verdicts and summary.

    The facts come from exactly one of ``facts``, ``dataset``, ``triples`` or ``sparql``;
    ``limit``, ``sample``, ``stratify`` and ``ids`` choose among them. Each verdict is
    appended to ``OUT/verdicts.jsonl`` as it completes; a stopped run resumes.

    Every keyword but ``spec`` and ``warn`` is a field of ``RunSpec`` of the same name, with
    the same default and meaning (``RunSpec`` documents each one, in groups: input,
    sampling, strategy, model, engine, consensus and repeats, rules, output); a keyword that
    is no field is a setting of the strategy (``max_attempts=5``, as in ``settings``).
    ``spec`` is a whole ``RunSpec`` instead (keywords given besides replace its fields);
    ``warn`` receives warnings found before the run (e.g. facts without evidence), by
    default issued as ``KgcheckWarning``.

    Returns:
        The run: its folder, verdict records and summary (scores, counts, cost, cache).

    Raises:
        SettingsError: Inputs or settings that cannot work (unknown strategy, model or
            setting, no or several fact sources, a missing file), before any fact is sent.

    """
    return await run_spec(_spec_of(locals()), warn=warn)


def run(facts: Iterable[FactLike] | None = None, *, model: str = DEFAULT_MODEL,
        base_url: str | None = None, settings: Mapping[str, Any] | None = None,
        dataset: str | None = None, triples: str | Path | None = None,
        base_iri: str | None = None,
        sparql: str | None = None, graph: str | None = None, where: str | None = None,
        predicates: str | Sequence[str] | None = None,
        exclude_predicates: str | Sequence[str] | None = None,
        labels: str | Path | None = None, sample: int | None = None, seed: int | None = 0,
        stratify: str | None = None, per_stratum: int | None = None,
        ids: Sequence[str] | None = None, as_dataset: str | None = None,
        strategy: str = "dka", data: str | Path | None = None, limit: int | None = None,
        concurrency: int | str = 4, max_concurrency: int = 64, cache: CacheChoice = True,
        engine: str | Engine = "local", engine_options: Mapping[str, Any] | None = None,
        ray_address: str | None = None, ray_workers: int | None = None,
        ray_shard_mb: float | None = None, shards_uri: str | None = None,
        out: str | Path | None = None, resume: bool = False, fresh: bool = False,
        prompt: str | None = None, replay_latency: float = 0.0,
        consensus: Sequence[str] | None = None, judge: str = JUDGE_NONE,
        show_progress: bool = False, pricing: str | Path | None = None, ci: bool = False,
        repeats: int = 1, prefilter: str | None = None,
        rules: Mapping[str, Any] | None = None, ontology: str | None = None,
        shapes: str | None = None, spec: RunSpec | None = None, warn: Warn | None = None,
        **strategy_settings: Any) -> RunResult:
    """Check many facts into a run folder, for scripts without an event loop (see ``arun``).

    The facts come from exactly one of ``facts``, ``dataset``, ``triples`` or ``sparql``;
    ``limit``, ``sample``, ``stratify`` and ``ids`` choose among them. Each verdict is
    appended to ``OUT/verdicts.jsonl`` as it completes; a stopped run resumes.

    Every keyword but ``spec`` and ``warn`` is a field of ``RunSpec`` of the same name, with
    the same default and meaning (``RunSpec`` documents each one, in groups: input,
    sampling, strategy, model, engine, consensus and repeats, rules, output); a keyword that
    is no field is a setting of the strategy (``max_attempts=5``, as in ``settings``).
    ``spec`` is a whole ``RunSpec`` instead (keywords given besides replace its fields);
    ``warn`` receives warnings found before the run (e.g. facts without evidence), by
    default issued as ``KgcheckWarning``.

    Returns:
        The run: its folder, verdict records and summary.

    Raises:
        SettingsError: Inputs or settings that cannot work, before any fact is sent.
        RuntimeError: Called inside a running event loop (await ``arun`` there).

    """
    return _sync(run_spec(_spec_of(locals()), warn=warn), "arun")


def report(run_dirs: Sequence[str | Path], out: str | Path, *, with_recorded: bool = False,
           data: str | Path | None = None, plots: bool = True, ci: bool = False) -> Outputs:
    """Build the study's tables (and figures) from run folders, optionally beside its rows.

    Args:
        run_dirs: Run folders to tabulate.
        out: Folder the tables (``tables.md``, ``tables.json``) and plots go to.
        with_recorded: Put the study's recorded rows beside the runs'.
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else vendored.
        plots: Draw the figures too.
        ci: Add bootstrap intervals of accuracy, F1(T), F1(F) and macro-F1.

    Returns:
        The files written.

    """
    return build_report(run_dirs, out, with_recorded=with_recorded, data=data, plots=plots,
                        ci=ci)


def compare(run_a: str | Path, run_b: str | Path, *, resamples: int = 10_000,
            confidence: float = 0.95, seed: int = 0, json_out: str | Path | None = None,
            disagreements_out: str | Path | None = None,
            warn: Warn | None = None) -> Comparison:
    """Compare two runs on the facts both checked: McNemar's exact test, paired intervals.

    Args:
        run_a: A run folder.
        run_b: Another run folder, over the same facts.
        resamples: Paired bootstrap resamples of the intervals of A - B (accuracy, F1(T),
            F1(F), macro-F1).
        confidence: Confidence of the intervals.
        seed: Seed of the bootstrap: same seed, same intervals.
        json_out: A file that receives ``Comparison.as_json()``.
        disagreements_out: A CSV file of the facts the runs answered differently.
        warn: Receives warnings (e.g. facts only one run checked).

    Returns:
        The comparison: McNemar's counts and p-value, the intervals, the disagreements.

    Raises:
        ValueError: A folder that is not a run, or runs with no shared labelled fact.

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

    Args:
        files: Labels files of one run, one per person (two or more).
        run: The run whose verdicts they reviewed (default: the run folder holding the
            first file).
        json_out: A file that receives the result as JSON.

    Returns:
        Cohen's kappa (two files) or Fleiss' kappa (three or more), Krippendorff's alpha,
        each person's agreement with the model and the facts labelled differently.

    Raises:
        ValueError: A single file, a file without T or F labels, files of different runs,
            labels of facts the run did not check, the same person twice.

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

    The tables keep the study's point values. Answers that cannot be scored (a dataset
    without gold labels, an unreadable answers file) are left out with a warning that the
    tables repeat.

    Args:
        out: Folder the tables and figures go to.
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else vendored.
        datasets: The datasets to tabulate (``FactBench``, ``YAGO``, ``DBpedia``); all by
            default.
        plots: Draw the figures too.
        warn: Receives the warnings; by default they are issued as ``KgcheckWarning``.
        ci: Add bootstrap intervals after the tables.

    Returns:
        The files written.

    Raises:
        ValueError: Nothing can be scored; the message says why.

    """
    def note(message: str) -> None:
        if warn is None:
            warnings.warn(message, KgcheckWarning, stacklevel=3)
        else:
            warn(message)

    return reproduce_tables(out, data=data, datasets=datasets, plots=plots, warn=note, ci=ci)


def evidence_sources() -> list[str]:
    """List the names the ``sources`` setting accepts.

    Returns:
        The stored corpus's name and every registered evidence source's.

    """
    return [CORPUS, *EVIDENCE_SOURCES.names()]


@dataclass(frozen=True)
class FetchedEvidence:
    """What the evidence sources fetched into a store: per-source counts and the items."""

    store: Path
    counts: dict[str, tuple[int, int, str]]
    items: list[Fetched]


def data_location(data: str | Path | None = None) -> str:
    """Say where the FactCheck data is read from (``data``, ``$KGCHECK_DATA`` or vendored).

    Args:
        data: A folder in the upstream layout, or None for the default.

    Returns:
        The data's location, as a path or URL.

    """
    return open_data(data).location


def corpus_counts(store: str | Path) -> dict[str, tuple[int, int]]:
    """Count the facts and documents of each dataset in a corpus store.

    Args:
        store: The corpus store's SQLite file.

    Returns:
        ``(facts, documents)`` by dataset.

    """
    return CorpusStore(Path(store)).counts()


def fetched_evidence(store: str | Path | None = None, *, source: str = "",
                     limit: int = 1000) -> FetchedEvidence:
    """List the results and pages fetched into the store (URL, title, fetch time, source).

    Args:
        store: The corpus store's file; by default ``default_store_path()``.
        source: Only the items of this evidence source; all by default.
        limit: List at most this many items.

    Returns:
        The store, each source's counts and the items.

    Raises:
        SettingsError: No corpus store at that path.

    """
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


async def adry_run(facts: Iterable[FactLike] | None = None, *, model: str = DEFAULT_MODEL,
                   base_url: str | None = None, settings: Mapping[str, Any] | None = None,
                   dataset: str | None = None, triples: str | Path | None = None,
                   base_iri: str | None = None,
                   sparql: str | None = None, graph: str | None = None, where: str | None = None,
                   predicates: str | Sequence[str] | None = None,
                   exclude_predicates: str | Sequence[str] | None = None,
                   labels: str | Path | None = None, sample: int | None = None,
                   seed: int | None = 0,
                   stratify: str | None = None, per_stratum: int | None = None,
                   ids: Sequence[str] | None = None, as_dataset: str | None = None,
                   strategy: str = "dka", data: str | Path | None = None, limit: int | None = None,
                   concurrency: int | str = 4, max_concurrency: int = 64, cache: CacheChoice = True,
                   engine: str | Engine = "local", engine_options: Mapping[str, Any] | None = None,
                   ray_address: str | None = None, ray_workers: int | None = None,
                   ray_shard_mb: float | None = None, shards_uri: str | None = None,
                   out: str | Path | None = None, resume: bool = False, fresh: bool = False,
                   prompt: str | None = None, replay_latency: float = 0.0,
                   consensus: Sequence[str] | None = None, judge: str = JUDGE_NONE,
                   show_progress: bool = False, pricing: str | Path | None = None, ci: bool = False,
                   repeats: int = 1, prefilter: str | None = None,
                   rules: Mapping[str, Any] | None = None, ontology: str | None = None,
                   shapes: str | None = None, spec: RunSpec | None = None, warn: Warn | None = None,
                   **strategy_settings: Any) -> CostEstimate:
    """Estimate a run's calls, tokens and cost before it starts (``arun``'s arguments).

    Nothing is sent to a model (its server is reached once, as before a run).
    ``kgcheck run --dry-run`` prints the same figures. With ``resume``, the facts ``out``
    already holds verdicts for are left out; with ``prefilter``, the facts the rules refute
    cost no call. The input is read in a thread, so the event loop stays free.

    Every keyword but ``spec`` and ``warn`` is a field of ``RunSpec`` of the same name, with
    the same default and meaning (``RunSpec`` documents each one, in groups: input,
    sampling, strategy, model, engine, consensus and repeats, rules, output); a keyword that
    is no field is a setting of the strategy (``max_attempts=5``, as in ``settings``).
    ``spec`` is a whole ``RunSpec`` instead (keywords given besides replace its fields);
    ``warn`` receives warnings found before the run (e.g. facts without evidence), by
    default issued as ``KgcheckWarning``.

    Returns:
        The estimate: facts, calls, tokens and cost, in total and per model.

    Raises:
        SettingsError: Inputs or settings that cannot work.

    """
    checked = _spec_of(locals())
    return (await asyncio.to_thread(dry_run_spec, checked, warn=warn))[1]


def dry_run(facts: Iterable[FactLike] | None = None, *, model: str = DEFAULT_MODEL,
            base_url: str | None = None, settings: Mapping[str, Any] | None = None,
            dataset: str | None = None, triples: str | Path | None = None,
            base_iri: str | None = None,
            sparql: str | None = None, graph: str | None = None, where: str | None = None,
            predicates: str | Sequence[str] | None = None,
            exclude_predicates: str | Sequence[str] | None = None,
            labels: str | Path | None = None, sample: int | None = None, seed: int | None = 0,
            stratify: str | None = None, per_stratum: int | None = None,
            ids: Sequence[str] | None = None, as_dataset: str | None = None,
            strategy: str = "dka", data: str | Path | None = None, limit: int | None = None,
            concurrency: int | str = 4, max_concurrency: int = 64, cache: CacheChoice = True,
            engine: str | Engine = "local", engine_options: Mapping[str, Any] | None = None,
            ray_address: str | None = None, ray_workers: int | None = None,
            ray_shard_mb: float | None = None, shards_uri: str | None = None,
            out: str | Path | None = None, resume: bool = False, fresh: bool = False,
            prompt: str | None = None, replay_latency: float = 0.0,
            consensus: Sequence[str] | None = None, judge: str = JUDGE_NONE,
            show_progress: bool = False, pricing: str | Path | None = None, ci: bool = False,
            repeats: int = 1, prefilter: str | None = None,
            rules: Mapping[str, Any] | None = None, ontology: str | None = None,
            shapes: str | None = None, spec: RunSpec | None = None, warn: Warn | None = None,
            **strategy_settings: Any) -> CostEstimate:
    """Estimate a run's calls, tokens and cost, for scripts without an event loop.

    Nothing is sent to a model (its server is reached once, as before a run).
    ``kgcheck run --dry-run`` prints the same figures (see ``adry_run``).

    Every keyword but ``spec`` and ``warn`` is a field of ``RunSpec`` of the same name, with
    the same default and meaning (``RunSpec`` documents each one, in groups: input,
    sampling, strategy, model, engine, consensus and repeats, rules, output); a keyword that
    is no field is a setting of the strategy (``max_attempts=5``, as in ``settings``).
    ``spec`` is a whole ``RunSpec`` instead (keywords given besides replace its fields);
    ``warn`` receives warnings found before the run (e.g. facts without evidence), by
    default issued as ``KgcheckWarning``.

    Returns:
        The estimate: facts, calls, tokens and cost, in total and per model.

    Raises:
        SettingsError: Inputs or settings that cannot work.
        RuntimeError: Called inside a running event loop (await ``adry_run`` there).

    """
    return _sync(adry_run(**_keywords(locals())), "adry_run")


def explain(run_dir: str | Path, fact_id: str) -> dict[str, Any]:
    """Return one verdict of a run, explained: the record ``kgcheck show`` prints.

    Args:
        run_dir: The run folder.
        fact_id: The fact's id.

    Returns:
        The verdict record: label, confidence, reason, citations, correction, answer
        problems and the exact conversation.

    Raises:
        RunFolderError: ``run_dir`` is no run folder, or holds no verdict of ``fact_id``.

    """
    return read_verdict(Path(run_dir), str(fact_id))


def export(run_dir: str | Path, format: str = "csv", out: str | Path | None = None, *,
           only: str | Sequence[str] | None = None, rdf: str = "annotated") -> Exported:
    """Export a run's verdicts, or the changes they call for to the KG.

    Args:
        run_dir: The run folder.
        format: ``csv``, ``jsonl``, ``nt`` or ``ttl`` (the verdicts); ``factcheck`` (the
            FactCheck study's result file); ``sparql`` (a SPARQL 1.1 Update) or ``patch``
            (an RDF Patch) deleting the triples judged or labelled false and inserting
            accepted corrections.
        out: The file to write (for ``factcheck``, a folder takes the file under the name
            FactCheck gives it); None writes to standard output.
        only: Keep these verdicts only (``"F"`` or ``["T", "NA"]``).
        rdf: ``annotated`` (reified verdicts with model, method and time) or ``plain``
            (the triples).

    Returns:
        What was written: the file and the count of verdicts or changes.

    Raises:
        ExportError: A folder that is not a run, or an unknown format or shape.

    """
    return export_run(run_dir, format, out, only=only, shape=rdf)


def sample(*, n: int, out: str | Path, dataset: str | None = None,
           triples: str | Path | None = None, facts: Iterable[FactLike] | None = None,
           run: str | Path | None = None, design: str = "srs", stratify: str | None = None,
           cluster: str = "subject", cluster_size: int = 3, seed: int = 0,
           data: str | Path | None = None) -> SampleResult:
    """Draw the facts a person should label; write them as an annotators' CSV.

    The facts come from exactly one of ``dataset``, ``triples``, ``facts`` or ``run``. The
    same inputs and ``seed`` give the same sample.

    Args:
        n: How many facts to draw.
        out: The CSV file to write.
        dataset: A benchmark dataset.
        triples: A triples file.
        facts: Facts (any iterable, read once).
        run: A run folder: the facts it checked (allows ``stratify="verdict"``).
        design: ``srs``, ``stratified`` (by ``stratify``) or ``twcs`` (clusters).
        stratify: What strata are made of: ``predicate`` or, with ``run``, ``verdict``.
        cluster: With ``twcs``, what a cluster shares (``subject``).
        cluster_size: With ``twcs``, facts per cluster at most.
        seed: Seed of the draw.
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else vendored.

    Returns:
        The sample: its facts with their design weights, and the file written.

    Raises:
        SettingsError: Not exactly one source of facts.

    """
    from kgcheck.evals.accuracy.audit import run_verdicts, write_sample

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

    Args:
        file: A FactCheck study result file (``.json``, any name) or a CSV/JSONL of
            ``fact_id,label``.
        out: The run folder to write.
        triples: A triples file holding the facts and their gold labels.
        dataset: A benchmark dataset holding them; without either, the dataset the study
            file's name gives.
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else vendored.
        fresh: Replace a run already in ``out``.

    Returns:
        The run, scored like any run.

    Raises:
        VerdictImportError: An unreadable file, or one whose name names no dataset when
            neither ``triples`` nor ``dataset`` is given.
        SettingsError: Both ``triples`` and ``dataset``.

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
    """Turn verdicts made elsewhere into a run folder, for scripts without an event loop.

    Args:
        file: A FactCheck study result file (``.json``, any name) or a CSV/JSONL of
            ``fact_id,label``.
        out: The run folder to write.
        triples: A triples file holding the facts and their gold labels.
        dataset: A benchmark dataset holding them; without either, the dataset the study
            file's name gives.
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else vendored.
        fresh: Replace a run already in ``out``.

    Returns:
        The run, scored like any run.

    Raises:
        VerdictImportError: An unreadable file, or one whose name names no dataset when
            neither ``triples`` nor ``dataset`` is given.
        SettingsError: Both ``triples`` and ``dataset``.
        RuntimeError: Called inside a running event loop.

    """
    return _sync(aimport_verdicts(file, out, triples=triples, dataset=dataset, data=data,
                                  fresh=fresh), "aimport_verdicts")


def estimate(run: str | Path, *, labels: str | Path | None = None,
             gold_sample: int | None = None, seed: int = 0, confidence: float = 0.95,
             stratify: str | None = None, design: str = "srs", cluster: str = "subject",
             cluster_size: int = 3, data: str | Path | None = None,
             plots: bool = True) -> EstimateResult:
    """Estimate the accuracy of a run's KG (llm, human and ppi); write ``RUN/estimate.json``.

    Args:
        run: The run folder.
        labels: A person's labels: ``kgcheck sample``'s CSV filled in, or a review's
            ``labels.csv``.
        gold_sample: Instead of ``labels``, draw this many facts with gold labels as if a
            person had labelled them.
        seed: Seed of ``gold_sample``.
        confidence: Confidence of the intervals.
        stratify: With ``gold_sample``, what strata are made of.
        design: With ``gold_sample``, ``srs``, ``stratified`` or ``twcs``.
        cluster: With ``twcs``, what a cluster shares.
        cluster_size: With ``twcs``, facts per cluster at most.
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else vendored.
        plots: Draw the estimate's figure too.

    Returns:
        The three estimates with their intervals, and the files written.

    Raises:
        EstimateError: A folder that is not a run, labels that do not fit it, or no
            labels to estimate from.

    """
    from kgcheck.evals.accuracy.audit import estimate_run

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

    ``async with kgcheck.open_review("runs/x") as review:`` gives the session
    (``await review.decide(fact_id, "T")``, ``await review.undo()``); ``with`` gives the
    same session with plain methods. Either drives the ``review`` graph; decisions persist
    in ``RUN/review.sqlite`` and ``RUN/labels.csv``. One review per labels file at a time.

    Args:
        run_dir: The run folder.
        only: Queue only these verdicts (``"F,NA,ties"`` or ``["F", "NA"]``).
        sample: Queue a seeded sample of this many of them.
        seed: Seed of ``sample`` (and of a team's share).
        reviewer: The name recorded with each decision.
        annotator: Review as this annotator, into ``labels-<name>.csv``.
        team: The annotators' names, among whom the queue is dealt.
        overlap: With ``team``, the share (0 to 1) of facts everyone reviews.
        adjudicate: Queue the facts the annotators labelled differently, for the final
            ``labels.csv``.
        stratify: ``predicate`` or ``verdict``: draw ``sample`` per stratum.
        until_moe: The margin of error the running estimate should reach.
        on_reached: Called once with the estimate when the margin reaches ``until_moe``.
        order: ``run`` (the run's order) or ``uncertainty`` (NEI, then the lowest
            ``max(p, 1 - p)``, first).

    Returns:
        The review being opened, to enter with ``async with`` or ``with``.

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
        self._loop = loop_runner()
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
        """Record a person's verdict on a fact (see ``ReviewSession.decide``).

        Args:
            fact_id: The fact's id.
            label: ``T``, ``F`` or ``skip``.
            note: A note kept with the decision.
            reviewer: Who decided; the session's reviewer by default.
            correction: For a suggested correction: ``accept``, ``edit`` or ``reject``.
            corrected_value: With ``edit``, the value accepted.

        Returns:
            The decision as recorded, with the review's progress.

        """
        return self._loop.run(self.session.decide(fact_id, label, note, reviewer,
                                                  correction=correction,
                                                  corrected_value=corrected_value))

    def undo(self, fact_id: str | None = None) -> str | None:
        """Take back a decision, the last one by default (see ``ReviewSession.undo``).

        Args:
            fact_id: The fact whose decision to take back; the last one by default.

        Returns:
            The fact id taken back, or None when there was nothing to undo.

        """
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
    embedded).

    Args:
        dataset: The dataset whose facts' evidence is indexed.
        corpus: The corpus (folder, ``.tar.gz`` or ``.sqlite``); the default store if empty.
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else vendored.
        embedding: The embedder (``minilm`` by default).
        chroma_path: A Chroma folder; the default one if empty.
        chroma_url: A Chroma server's URL, instead of a folder.
        candidates: Chunks kept per question.
        retrieval: ``hybrid``, or another retrieval mode of the RAG strategy.
        limit: Index the first ``limit`` facts only.
        revisit: Look at facts indexed before again, embedding missing vectors.
        on_start: Hears how many facts will be indexed.
        on_fact: Hears each fact id done.

    Returns:
        Facts embedded now and before, documents, chunks, seconds and where.

    Raises:
        SettingsError: A corpus without documents for ``dataset``.

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

    Args:
        index: ``auto``, ``chroma`` or ``memory``.
        chroma_path: A configured Chroma folder, or empty.

    Returns:
        ``chroma`` or ``memory`` (or ``index`` itself when it is not ``auto``).

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

    Args:
        corpus: The corpus (folder, ``.tar.gz`` or ``.sqlite``); the default store if empty.
        embedding: The embedder that ranks the chunks.
        index: ``auto``, ``chroma`` or ``memory`` (see ``search_index_choice``).
        chroma_path: A Chroma folder, or empty.
        api_key: The key clients must send.
        data: A folder in the upstream layout; by default ``$KGCHECK_DATA``, else vendored.
        host: Address to serve on.
        port: Port to serve on.

    Returns:
        The server and the corpus's location.

    Raises:
        SettingsError: A URL given as the corpus.

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
