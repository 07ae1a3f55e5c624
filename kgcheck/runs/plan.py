"""Plan a run: check its inputs and settings, load its facts, and execute it on an engine.

``plan_run`` resolves where the facts come from (a dataset, a triples file, a SPARQL endpoint
or facts in memory), chooses among them, and checks everything that can be checked before a
fact is sent: the strategy and its settings, prompt files, models and their servers, replay
recordings. ``execute`` runs a checked plan on an engine into its run folder.
"""


from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgcheck.arguments import Arg, ArgumentNote, literal, truthy
from kgcheck.data.datasets import load_facts
from kgcheck.data.fact_stream import FactStream
from kgcheck.data.facts import Fact
from kgcheck.data.gold import read_gold
from kgcheck.data.input_uri import input_problem, is_input_uri, stat_input
from kgcheck.data.predicates import PREFIXES, PredicateFilter, PredicateFilterError
from kgcheck.data.rdf import RDF_SUFFIXES, RdfReader
from kgcheck.data.rdf_sampler import rdf_source
from kgcheck.data.record_lines import record_source
from kgcheck.data.recordings import has_recordings, recorded_models
from kgcheck.data.runfolder import (
    amend_summary,
    read_verdicts,
)
from kgcheck.data.sampling import Selection
from kgcheck.data.sampling import select_facts as _select_facts
from kgcheck.data.shard_survey import ShardSource, head_facts
from kgcheck.data.shards import ParallelRead, ShardedReader, can_shard
from kgcheck.data.sources import base_name, check_input
from kgcheck.data.sparql import SparqlReader, redact_endpoint
from kgcheck.data.storage_uri import is_uri, shown, storage_problem
from kgcheck.data.upstream import as_source, canonical_dataset, dataset_names
from kgcheck.evals.stats.tables import pair_intervals, run_intervals
from kgcheck.graphs.consensus.graph import settings_class
from kgcheck.graphs.consensus.judges import CONS_JUDGES, JUDGE_NONE
from kgcheck.graphs.context import Context
from kgcheck.graphs.prompting import check_prompts
from kgcheck.graphs.registry import GraphKey, Strategy, get_strategy
from kgcheck.graphs.strategies.schema import SchemaContext
from kgcheck.prompts import prompt_path
from kgcheck.providers import reach_model, resolve_model, split_spec
from kgcheck.providers.cache import default_cache_path, use_cache
from kgcheck.providers.metadata import REPEAT
from kgcheck.providers.pricing import load_pricing
from kgcheck.providers.resolve import model_note
from kgcheck.runs.concurrency import AdaptiveLimit, FixedLimit, Limit, parse_concurrency
from kgcheck.runs.consensus import run_consensus
from kgcheck.runs.dry_run import Estimate as CostEstimate
from kgcheck.runs.dry_run import estimate as _cost_estimate
from kgcheck.runs.engines import Engine, make_engine
from kgcheck.runs.prefilter import (
    input_types,
    plan_prefilter,
    prefilter_counts,
    prefiltered,
    screener,
)
from kgcheck.runs.repeats import run_repeats
from kgcheck.runs.runner import (
    RunInfo,
    RunResult,
    check_facts,
    file_digest,
    input_fingerprint,
    public_settings,
    run_config,
)
from kgcheck.runs.spec import RunSpec, SettingsError, merged_settings

__all__ = ["CacheChoice", "EngineOnDemand", "FactLike", "FactSource", "KgcheckWarning",
           "ParallelReadChoice", "RunPlan", "SettingsError", "Warn", "as_facts", "as_facts_lazy",
           "cache_path", "check_models", "check_prompt_files", "check_replay",
           "default_out_dir", "dry_run_of", "execute", "fact_source",
           "make_context", "merged_settings", "open_engine", "own_kg_name", "parse_setting_pairs",
           "plan_run", "prompt_digests", "read_setting_pairs", "recordable",
           "setting_fields"]

FactLike = Fact | Mapping[str, Any]
Warn = Callable[[str], None]
# The answer cache: True = the default file, a path = that file, False or None = off.
CacheChoice = bool | str | Path | None


class KgcheckWarning(UserWarning):
    """Something found before a run that will make part of it come out NA."""


def own_kg_name(path: str | Path, data: str | Path | None = None) -> str:
    """Name the KG of a user's triples file: its stem, unless that names a benchmark.

    A file called ``yago.csv`` is the user's KG, not the YAGO benchmark: it gets the name
    ``yago.csv``, so none of YAGO's evidence, prompt notes, examples or recordings apply to
    it. ``--as-dataset`` (``as_dataset=``) says otherwise explicitly.
    """
    path = Path(path)
    stem, _ = base_name(path)
    benchmarks = {name.lower() for name in dataset_names(as_source(None))}
    if data:
        benchmarks |= {name.lower() for name in dataset_names(as_source(data))}
    return path.name if stem.lower() in benchmarks else stem


def as_facts_lazy(facts: Iterable[FactLike]) -> Iterable[Fact]:
    """Like ``as_facts``, one item at a time (a list stays a list)."""
    if isinstance(facts, list) and all(isinstance(f, Fact) for f in facts):
        return facts
    if isinstance(facts, Sequence):
        return as_facts(facts)
    return (f if isinstance(f, Fact) else as_facts([f])[0] for f in facts)


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


def drawn_from(selection: Selection, *, limit: int | None, sample: int | None,
               seed: int | None, stratify: str | None, per_stratum: int | None,
               ids: Sequence[str] | None) -> dict[str, Any]:
    """Record how the run chose its facts, which says what an accuracy estimate stands for.

    ``sample``: uniformly at random (or in proportion to strata) from ``of`` facts, so
    labels of a random sample of the run estimate the KG's accuracy; ``stratified``: a
    fixed number per stratum; ``first``: the top of the input (``--limit``); ``ids``;
    ``all``: every fact.
    """
    if ids:
        return {"how": "ids"}
    if per_stratum is not None:
        return {"how": "stratified", "key": stratify, "per_stratum": per_stratum,
                "seed": seed, "of": selection.seen}
    if sample is not None:
        # A limit below the sample keeps the sample's first facts in input order: no longer
        # uniform over the input.
        capped = limit is not None and limit < sample
        return {"how": "first" if capped else "sample", "seed": seed, "of": selection.seen,
                **({"key": stratify} if stratify else {})}
    if limit is not None and len(selection.facts) >= limit:
        return {"how": "first", "limit": limit}
    return {"how": "all"}


def check_models(specs: Sequence[str], ctx: Context) -> None:
    """Build every model and reach its server once, so that setting errors fail early.

    A missing key, URL, provider or server (or a model an Ollama server has not pulled)
    is found before any fact is sent; replay models need no server.
    """
    for spec in dict.fromkeys(specs):
        resolve_model(spec, ctx)
    for spec in dict.fromkeys(specs):
        reach_model(spec, ctx)


def check_prompt_files(ctx: Context) -> None:
    """Fail before the run when a prompt file is missing or lacks a placeholder it needs."""
    for item in dataclasses.fields(ctx):
        value = getattr(ctx, item.name)
        if (item.name == "prompt" or item.name.endswith("_prompt")) and value:
            prompt_path(value)
    check_prompts(ctx)


def check_replay(models: Sequence[str], chosen: Strategy, facts: Iterable[Fact],
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


def recordable(ctx: Context) -> dict[str, Any]:
    """Return a run's effective settings (every Context field) as run.json keeps them."""
    values = {f.name: getattr(ctx, f.name) for f in dataclasses.fields(ctx)}
    values.pop("data_dir", None)
    return public_settings(values)


def prompt_digests(ctx: Context) -> dict[str, str]:
    """Return the SHA-256 of every prompt file the settings name, by setting."""
    return {item.name: file_digest(prompt_path(getattr(ctx, item.name)))
            for item in dataclasses.fields(ctx)
            if (item.name == "prompt" or item.name.endswith("_prompt"))
            and getattr(ctx, item.name)}


def cache_path(cache: CacheChoice) -> Path | None:
    """Return the answer-cache file a ``cache=`` argument names (None: no cache)."""
    if cache is True:
        return default_cache_path()
    if cache is False or cache is None:
        return None
    return Path(cache)


@dataclass
class RunPlan:
    """A batch run, checked and ready: what ``arun`` executes."""

    # A list, or a FactStream when every fact of a file is checked (read at each pass), or
    # a sharded run's SurveyedFacts (counted on the cluster).
    facts: Sequence[Fact] | FactStream | SurveyedFacts
    strategy: Strategy
    members: list[str]
    judge: str
    values: dict[str, Any]
    info: RunInfo
    out_dir: Path
    notes: list[str]
    # Shards the input was read in, in parallel (0: one pass in this process).
    input_shards: int = 0
    # Bootstrap intervals of the scores in summary.json.
    ci: bool = False
    # Times each fact is checked (kgcheck.runs.repeats); 1: once.
    repeats: int = 1
    # The rules facts are checked against before the strategy (None: no pre-filter).
    prefilter: Any = None
    # A run checked shard by shard on the engine's workers (``ray_pipeline.ShardedRun``):
    # its input surveyed on the cluster; None: the facts go through this process.
    sharded: Any = None
    # Where a sharded run's workers write their shards (a URI; None: RUN/shards/).
    shards_uri: str | None = None


# What a run of a strategy that asks no model records as its model.
NO_MODEL = "rules"
# Facts a sharded run's checks before it starts look at (replay recordings, preflights).
PREVIEW_FACTS = 1_000


class SurveyedFacts:
    """The facts of a sharded run: counted on the cluster, read here only when iterated.

    Iterating streams the whole file through this process (as a local whole-file run
    does); a sharded run never does: its workers read their shards.
    """

    def __init__(self, stream: FactStream, count: int, labelled: bool) -> None:
        self._stream = stream
        self._count = count
        self.labelled = labelled

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[Fact]:
        if self._stream.sha256 == "":
            self._stream.scan()  # finds the repeats to leave out
        return iter(self._stream)


def _resolved_read(parallel: ParallelReadChoice, triples: str | Path | None
                   ) -> ParallelRead | None:
    """Return the engine's parallel read for a file that can be cut, starting the engine.

    A file at a URL is looked at first (``stat_input``), so that a missing object or an
    unreachable store fails before the engine starts.
    """
    if parallel is None or triples is None:
        return None
    if is_input_uri(triples):
        stat_input(str(triples))
    elif not can_shard(check_input(triples)):
        return None
    # A function is called (its engine started) only for a file that can be cut.
    return parallel if isinstance(parallel, ParallelRead) else parallel()


def _shard_source(triples: str | Path, dataset: str, gold: Any,
                  by_predicate: PredicateFilter | None) -> ShardSource:
    """Describe a sharded run's input for its workers (absolute paths: they run elsewhere).

    A URL stays as given, with the object's ETag, which every read of it checks.
    """
    if is_input_uri(triples):
        return ShardSource(str(triples), dataset, gold, by_predicate,
                           stamp=stat_input(str(triples)).stamp)
    return ShardSource(str(Path(triples).resolve()), dataset, gold, by_predicate)


def _check_input_uri(uri: str) -> None:
    """Refuse, before it is reached, a URL that cannot name a sharded run's input."""
    problem = input_problem(uri)
    if problem:
        raise SettingsError(f"{{triples}}: {literal(problem)}", triples=Arg("triples", shown(uri)))
    if not can_shard(uri):
        raise SettingsError(
            f"{{triples}}: a file at a URL is read in shards, which needs N-Triples, N-Quads "
            f"or JSON Lines (.nt, .nq, .jsonl, uncompressed); {literal(Path(uri).name)} "
            "cannot be cut at line ends: give a local copy of it",
            triples=Arg("triples", uri))


def _refuse_unsharded_uri(uri: str) -> None:
    """Refuse a URL input on a run that is not a sharded one: one line saying what to do."""
    raise SettingsError(
        "{triples} at a URL is read by the workers of a sharded run: it needs {engine} over "
        "every fact of the file (no {limit} or {sample}); otherwise, or for a dry run, "
        "give a local copy of the file",
        triples=Arg("triples", uri), engine=Arg("engine", "ray"), limit=Arg("limit"),
        sample=Arg("sample"))


# An engine's way to read in parallel shards, or a function that starts the engine for it.
ParallelReadChoice = ParallelRead | Callable[[], ParallelRead | None] | None


def default_out_dir(source: str, strategy: str, models: Sequence[str]) -> Path:
    """``runs/<source>-<strategy>-<model>``, with characters unsafe in file names replaced."""
    label = models[0] if len(models) == 1 else f"consensus{len(models)}"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{source}-{strategy}-{label}").strip("-")
    return Path("runs") / slug.lower()


@dataclass
class FactSource:
    """Where a run's facts come from: a re-readable stream and how to name its terms."""

    open: Callable[[], Iterable[Fact]]
    name: str
    location: str
    own: bool
    named: Callable[[list[Fact]], list[Fact]] = list
    sharded: ShardedReader | None = None


def fact_source(dataset: str | None, triples: str | Path | None, sparql: str | None,
                graph: str | None, where: str | None, facts: Iterable[FactLike] | None,
                data: str | Path | None, as_dataset: str | None = None,
                parallel: ParallelReadChoice = None, base_iri: str | None = None
                ) -> FactSource:
    """Say where a run's facts come from (exactly one of the inputs is given).

    ``base_iri`` resolves the relative IRIs of a Turtle, TriG or RDF/XML file (by default
    the file's own URI).
    """
    if triples is not None and is_input_uri(triples):
        # Read by the workers of a sharded run; this process looks at its first facts only.
        uri = str(triples)
        stem = (canonical_dataset(as_source(data), as_dataset) if as_dataset
                else own_kg_name(uri, data))
        head = ShardSource(uri, stem)
        return FactSource(lambda: head_facts(head), stem, uri, not as_dataset)
    if triples is not None:
        path = check_input(triples)
        _, suffix = base_name(path)
        # A user's file is the user's KG unless as_dataset names the benchmark it is from.
        stem = (canonical_dataset(as_source(data), as_dataset) if as_dataset
                else own_kg_name(path, data))
        own = not as_dataset
        reader = RdfReader(path, stem, base_iri) if suffix in RDF_SUFFIXES else None
        chosen = _resolved_read(parallel, path)
        if chosen is not None:
            sharded = ShardedReader(path, stem, chosen.map, shard_bytes=chosen.shard_bytes,
                                    reader=reader)
            return FactSource(lambda: iter(sharded), stem, str(path.resolve()), own,
                           reader.named if reader else list, sharded)
        # A sample is drawn over unbuilt records: an RDF file's parsed terms
        # (kgcheck.data.rdf_sampler), the raw lines of JSON Lines, CSV and TSV
        # (kgcheck.data.record_lines).
        if reader is not None:
            return FactSource(rdf_source(reader), stem, str(path.resolve()), own, reader.named)
        return FactSource(record_source(path, stem), stem, str(path.resolve()), own)
    if sparql is not None:
        endpoint = SparqlReader(sparql, graph=graph, where=where)
        location = " ".join(x for x in (redact_endpoint(sparql), graph and f"<{graph}>", where)
                            if x)
        return FactSource(lambda: iter(endpoint), endpoint.dataset, location, True, endpoint.named)
    if facts is not None:
        loaded = as_facts(facts)
        name = loaded[0].dataset if loaded and loaded[0].dataset else "facts"
        return FactSource(lambda: loaded, name, "memory", False)
    src = as_source(data)
    name = canonical_dataset(src, dataset or "")
    rows = load_facts(name, src)
    return FactSource(lambda: rows, name, src.location, False)


def recordable_arguments(**given: Any) -> dict[str, Any]:
    """Return a run's arguments as JSON values: local files as absolute paths, sequences as lists.

    A resume may start from another folder than the run did: a relative path would then
    name another file.
    """
    from kgcheck.runs.resume_from import json_argument

    return {name: json_argument(name, value) for name, value in given.items()}


def setting_fields(strategy: str, *, consensus: bool = False) -> dict[str, Any]:
    """Return a strategy's settings by name (a consensus run's, with ``consensus``)."""
    chosen = get_strategy(strategy)
    cls = settings_class(chosen.context) if consensus else chosen.context
    return {f.name: f for f in dataclasses.fields(cls)}


def parse_setting_pairs(pairs: Sequence[str], strategy: str, *,
                        consensus: bool = False) -> dict[str, Any]:
    """Turn ``KEY=VALUE`` texts into a strategy's typed settings (``--set`` on the command line).

    A value is read as the type of the setting's default: a bool from 1/true/yes/on, a
    number, or a list from comma-separated items.
    """
    return read_setting_pairs(pairs, setting_fields(strategy, consensus=consensus))


def read_setting_pairs(pairs: Sequence[str], fields: Mapping[str, Any]) -> dict[str, Any]:
    """Turn ``KEY=VALUE`` texts into settings typed as the defaults of ``fields`` (by name)."""
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise SettingsError("{pair}: expected NAME=VALUE",
                                pair=Arg("settings", [pair]))
        if key not in fields:
            raise SettingsError(f"{{key}}: unknown setting; known: {', '.join(sorted(fields))}",
                                key=Arg("set:" + key, raw))
        default = fields[key].default
        try:
            if isinstance(default, bool):
                value: Any = truthy(raw)
            elif isinstance(default, int):
                value = int(raw)
            elif isinstance(default, float):
                value = float(raw)
            elif isinstance(default, list | tuple):
                value = [item.strip() for item in raw.split(",") if item.strip()]
            else:
                value = raw
        except ValueError:
            raise SettingsError(f"{{key}}: expected a {type(default).__name__}",
                                key=Arg("set:" + key, raw)) from None
        values[key] = value
    return values


def plan_run(spec: RunSpec | None = None, /, *, parallel_read: ParallelReadChoice = None,
             **options: Any) -> RunPlan:
    """Check a run's inputs and settings and load its facts; nothing is sent yet.

    The run is ``spec``, or a ``RunSpec`` made of ``options`` (its fields as keywords; any
    other keyword is a setting of the strategy, as ``base_url=...`` or ``max_attempts=5``).
    Exactly one of ``dataset``, ``triples``, ``sparql`` or ``facts`` gives the facts;
    ``limit``, ``sample``/``seed``, ``stratify``/``per_stratum`` and ``ids`` choose among
    them (see ``select_facts``) while reading. ``parallel_read`` (an engine's, e.g.
    ``open_engine("ray").parallel_read``, or a function returning it, called only for such a
    file) reads an N-Triples, N-Quads or JSON Lines file in parallel shards when every fact
    of it is read (no ``limit``): the same facts in the same order as one pass. A triples
    file may be a URL (``"s3://bucket/kg.nt"``) on such a run: its workers read their byte
    ranges of it (``kgcheck.data.input_uri``).
    """
    if spec is None:
        spec = RunSpec.of(options)
    elif options:
        raise TypeError(f"plan_run takes a spec or options, not both: {', '.join(options)}")
    dataset, triples, sparql, facts = spec.dataset, spec.triples, spec.sparql, spec.facts
    graph, where, data, labels = spec.graph, spec.where, spec.data, spec.labels
    limit, sample, seed, ids = spec.limit, spec.sample, spec.seed, spec.ids
    stratify, per_stratum, as_dataset = spec.stratify, spec.per_stratum, spec.as_dataset
    strategy, model, consensus, judge = spec.strategy, spec.model, spec.consensus, spec.judge
    predicates, exclude_predicates = spec.predicates, spec.exclude_predicates
    prefilter, rules, shards_uri = spec.prefilter, spec.prefilter_rules(), spec.shards_uri
    pricing, ci, repeats, out = spec.pricing, spec.ci, spec.repeats, spec.out
    base_iri = spec.base_iri
    values = spec.strategy_values()
    # What a resume given only the run folder plans again (kgcheck.runs.resume_from).
    arguments = None if facts is not None else recordable_arguments(
        dataset=dataset, triples=triples, sparql=sparql, graph=graph, where=where,
        strategy=strategy, model=model, consensus=consensus, judge=judge, data=data,
        limit=limit, sample=sample, seed=seed, stratify=stratify, per_stratum=per_stratum,
        ids=ids, labels=labels, settings=values, as_dataset=as_dataset, pricing=pricing,
        predicates=predicates, exclude_predicates=exclude_predicates, ci=ci,
        repeats=repeats, prefilter=prefilter, rules=rules, shards_uri=shards_uri,
        base_iri=base_iri)
    prices = load_pricing(pricing) if pricing else None
    chosen = get_strategy(strategy)
    members = [m.strip() for m in consensus if m.strip()] if consensus else [model]
    fixed_judge = [judge] if judge not in (JUDGE_NONE, *CONS_JUDGES) else []
    if not chosen.calls_model:
        if consensus:
            raise SettingsError(f"the {chosen.name} strategy asks no model: it has no "
                                "consensus members")
        # Its verdicts name the rules, not a model; no model is built or reached.
        members, fixed_judge = [NO_MODEL], []
    for member in members + fixed_judge if chosen.calls_model else ():
        split_spec(member)

    if prefilter and consensus:
        raise SettingsError("{prefilter} runs before one model; a consensus run has several",
                            prefilter=Arg("prefilter", prefilter))
    if prefilter and not chosen.calls_model:
        raise SettingsError(f"{{prefilter}} saves model calls; the {chosen.name} strategy "
                            "makes none", prefilter=Arg("prefilter", prefilter))
    rules_ctx = plan_prefilter(prefilter, rules, triples=triples, sparql=sparql, graph=graph)
    if sparql is not None and (predicates is not None or exclude_predicates is not None):
        raise SettingsError("{predicates} and {exclude} choose the facts of a file; a {sparql} "
                            "endpoint chooses its triples with {where} (e.g. FILTER(?p != "
                            "rdf:type))", predicates=Arg("predicates"),
                            exclude=Arg("exclude_predicates"), sparql=Arg("sparql"),
                            where=Arg("where"))
    try:
        by_predicate = PredicateFilter.of(predicates, exclude_predicates)
    except PredicateFilterError as exc:
        raise SettingsError(literal(str(exc))) from None
    gold = read_gold(labels) if labels is not None else None
    every = all(x is None for x in (limit, sample, stratify, per_stratum, ids))
    at_url = is_input_uri(triples)
    if at_url:
        _check_input_uri(str(triples))
    read = _resolved_read(parallel_read if limit is None else None, triples)
    # Every fact of a file, checked on the engine's workers shard by shard: one model (each
    # repeat a pass of its own) or a consensus (kgcheck.runs.pipeline_consensus), whose
    # summary the shards' tallies make.
    pipelined = read is not None and read.survey is not None and every
    if shards_uri is not None:
        _check_shards_uri(shards_uri, pipelined)
    if at_url and not pipelined:
        _refuse_unsharded_uri(str(triples))
    origin = fact_source(dataset, triples, sparql, graph, where, facts, data, as_dataset,
                         None if pipelined else read, base_iri=base_iri)
    # Filtered while the input streams past: the facts left out are never kept.
    opener = origin.open
    if by_predicate is not None:
        chooser = by_predicate
        opener = lambda: chooser.apply(origin.open())  # noqa: E731 - a fresh pass each call
    whole_file = triples is not None and origin.sharded is None and every
    loaded: Sequence[Fact] | FactStream | SurveyedFacts
    sharded = None
    if pipelined:
        assert read is not None and read.survey is not None and triples is not None
        sharded = read.survey(_shard_source(triples, origin.name, gold, by_predicate))
        loaded = SurveyedFacts(_file_stream(opener, origin, gold), sharded.survey.facts,
                               sharded.survey.labelled)
        counted = sharded.survey.fingerprint()
        selection = Selection([], sharded.survey.facts, [])
        if sharded.survey.repeats:
            selection.notes.append(f"{sharded.survey.repeats} fact(s) repeat another (the same "
                                   "triple twice in the input): each is checked once")
        if by_predicate is not None:
            by_predicate.take_counts(sharded.survey.seen, sharded.survey.matched)
    elif whole_file:
        # Every fact of a file: streamed at each pass, never held (a whole KG fits no list).
        loaded = _file_stream(opener, origin, gold)
        counted = loaded.scan()
        selection = Selection([], counted["facts"], [])
        if loaded.repeats:
            selection.notes.append(f"{loaded.repeats} fact(s) repeat another (the same triple "
                                   "twice in the input): each is checked once")
    else:
        selection = _select_facts(opener, limit=limit, sample=sample, seed=seed,
                                  stratify=stratify, per_stratum=per_stratum, ids=ids)
        loaded = origin.named(selection.facts)
        if gold is not None:
            loaded = gold.apply(loaded)
    source_name, source = origin.name, origin.location
    if not loaded and by_predicate is not None:
        raise SettingsError(f"{literal(origin.location)}: no fact has a predicate that "
                            f"{{predicates}} keeps and {{exclude}} does not drop (of "
                            f"{by_predicate.seen:,} read)", predicates=Arg("predicates"),
                            exclude=Arg("exclude_predicates"))
    if not loaded:
        raise SettingsError(f"{origin.location}: there are no facts to check")
    # What a resume must match: the facts by content (each verdict keeps its fact's digest).
    fingerprint = {**(counted if whole_file or pipelined else input_fingerprint(loaded)),
                   "drawn": {**drawn_from(selection, limit=limit, sample=sample, seed=seed,
                                          stratify=stratify, per_stratum=per_stratum, ids=ids),
                             **(by_predicate.describe() if by_predicate else {})}}
    # A sharded run's facts are not read here: checks that look at facts see the first few.
    looked_at = (list(itertools.islice(opener(), PREVIEW_FACTS)) if pipelined else loaded)
    if chosen.calls_model:
        check_replay(members, chosen, looked_at, data, own_file=origin.own)

    values.setdefault("data_dir", str(data) if data else "")
    if "kg" in {f.name for f in dataclasses.fields(chosen.context)}:
        # The rules read the terms' types from the run's own input when it is RDF.
        values.update(input_types(values, triples=triples, sparql=sparql, graph=graph))
    context_class = settings_class(chosen.context) if consensus else chosen.context
    ctx = make_context(chosen, members[0], values, context_class)
    check_prompt_files(ctx)
    if chosen.calls_model:
        check_models(members + fixed_judge, ctx)
    notes = list(selection.notes)
    if by_predicate is not None and by_predicate.unmatched():
        notes.append(f"{', '.join(by_predicate.unmatched())}: no predicate of the "
                     f"{by_predicate.seen:,} facts read matched (prefixes known: "
                     f"{', '.join(PREFIXES)}; or give the whole IRI)")
    labelled = (loaded.labelled if isinstance(loaded, FactStream | SurveyedFacts)
                else any(f.label is not None for f in loaded))
    if gold is not None and not labelled:
        notes.append(f"{labels}: no label matches a chosen fact (by id or triple)")
    if triples is not None and not as_dataset and origin.name != base_name(Path(triples))[0]:
        stem = base_name(Path(triples))[0]
        notes.append(ArgumentNote(
            f"{literal(str(triples))} is read as your own KG {literal(repr(origin.name))}, not "
            f"the {literal(stem)} benchmark; pass {{as_dataset}} to check it as that dataset",
            as_dataset=Arg("as_dataset", stem)))
    notes += chosen.preflight(looked_at, ctx) if chosen.preflight else []
    if chosen.calls_model:
        notes += [n for n in map(model_note, dict.fromkeys(members + fixed_judge)) if n]
    out_dir = Path(out) if out else default_out_dir(source_name, chosen.name, members)
    info = RunInfo(dataset=source_name, strategy=chosen.name, method=chosen.label,
                   models=members, judge=judge if consensus else None, source=source,
                   settings=recordable(ctx), input=fingerprint, prompts=prompt_digests(ctx),
                   pricing=prices, spec=spec.stored(), arguments=arguments or {})
    if rules_ctx is not None:
        info.settings["prefilter"] = {"name": prefilter, **{
            k: v for k, v in dataclasses.asdict(rules_ctx).items()
            if k in ("ontology", "shapes", "kg", "endpoint", "endpoint_graph",
                     "types_complete")}}
    shards = (len(sharded.survey.shards) if sharded is not None
              else origin.sharded.shards if origin.sharded else 0)
    return RunPlan(loaded, chosen, members, judge, {**values, "model": members[0]}, info,
                   out_dir, notes, shards, ci=ci, repeats=repeats, prefilter=rules_ctx,
                   sharded=sharded, shards_uri=shards_uri)


def _check_shards_uri(uri: str, pipelined: bool) -> None:
    """Refuse a shard store a run cannot use: not a sharded run, or an unknown protocol."""
    if not is_uri(uri):
        raise SettingsError(f"{{shards_uri}} takes a URL such as s3://bucket/run, not "
                            f"{literal(uri)}; a run folder's own shards need no option",
                            shards_uri=Arg("shards_uri", uri))
    if shown(uri) != uri:
        # plan.json keeps the URI for a resume: a secret in it would be written down.
        raise SettingsError("{shards_uri} holds credentials: give them in the environment "
                            "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for s3://), not in "
                            f"the URL {literal(shown(uri))}",
                            shards_uri=Arg("shards_uri", shown(uri)))
    if not pipelined:
        raise SettingsError("{shards_uri} is where the workers of a sharded run write: it needs "
                            "{engine} over every fact of an N-Triples, N-Quads or JSON Lines "
                            "file",
                            shards_uri=Arg("shards_uri", uri), engine=Arg("engine", "ray"))
    problem = storage_problem(uri)
    if problem:
        raise SettingsError(f"{{shards_uri}}: {literal(problem)}",
                            shards_uri=Arg("shards_uri", uri))


def _file_stream(opener: Callable[[], Iterable[Fact]], origin: FactSource,
                 gold: Any) -> FactStream:
    """Stream a whole file's facts: named and labelled in a run's passes, labelled in a scan."""
    return FactStream(opener, prepare=_batch_preparer(origin, gold), label=_batch_labeller(gold))


def _batch_preparer(origin: FactSource, gold: Any) -> Callable[[list[Fact]], list[Fact]]:
    """Name a batch of streamed facts and set their gold labels, as a list's facts are."""
    def prepare(batch: list[Fact]) -> list[Fact]:
        named = origin.named(batch)
        return gold.apply(named) if gold is not None else named
    return prepare


def _batch_labeller(gold: Any) -> Callable[[list[Fact]], list[Fact]]:
    """Set a batch's gold labels only: what a fingerprinting pass needs of the facts."""
    return gold.apply if gold is not None else (lambda batch: batch)


def open_engine(name: str = "local", *, cache: CacheChoice = True,
                **options: Any) -> Engine:
    """Start an engine (``local``, ``ray``) for ``plan_run`` and ``execute``; close it after.

    ``options`` are the engine's (Ray: ``address``, ``workers``, ``per_worker``,
    ``shard_bytes``); ``cache`` is the answer cache its workers use.
    """
    return make_engine(name, cache=cache_path(cache), **options)


class EngineOnDemand:
    """An engine started when first needed, so that a bad input fails before a cluster starts.

    The plan starts it when the input is a file that can be read in shards (the Ray engine
    reads those on its workers); otherwise the run does, once the plan is checked. An
    engine object is used as given (and left open); one started here is closed by
    ``close``.
    """

    def __init__(self, engine: str | Engine, *, cache: CacheChoice = True,
                 options: Mapping[str, Any] | None = None) -> None:
        self._name = engine if isinstance(engine, str) else engine.name
        self._engine = None if isinstance(engine, str) else engine
        self._owned = isinstance(engine, str)
        self._cache = cache
        self._options = dict(options or {})

    def get(self) -> Engine:
        """Return the engine, starting it now if it has not started."""
        if self._engine is None:
            self._engine = open_engine(self._name, cache=self._cache, **self._options)
        return self._engine

    @property
    def parallel_read(self) -> Callable[[], ParallelRead | None]:
        """What ``plan_run`` takes as ``parallel_read``: the engine's, if it has one."""
        return lambda: getattr(self.get(), "parallel_read", None)

    def close(self) -> None:
        """Close the engine if it was started here."""
        if self._owned and self._engine is not None:
            self._engine.close()
            self._engine = None


async def execute(plan: RunPlan, *, concurrency: int | str | Limit = 4,
                  max_concurrency: int = 64, resume: bool = False, fresh: bool = False,
                  show_progress: bool = False, cache: CacheChoice = True,
                  engine: str | Engine = "local",
                  engine_options: Mapping[str, Any] | None = None,
                  warn: Warn | None = None) -> RunResult:
    """Run a checked plan into its folder (resumable: see ``arun``).

    ``concurrency`` is a number of facts at once or ``"auto"``: adapt to the model server
    (AIMD: more while throughput rises and latency holds, fewer on 429, 503 and timeouts),
    up to ``max_concurrency``. ``engine`` is where the graphs run: ``local`` (this process)
    or ``ray`` (a Ray cluster; ``engine_options``: ``address``, ``workers``,
    ``per_worker``), or an engine object the caller keeps (and closes) across runs; the run
    folder and its guarantees are the same. ``warn`` hears of what had to be ignored in the
    folder (unreadable verdict lines).
    """
    if resume and fresh:
        raise SettingsError("{resume} and {fresh} contradict each other; pick one",
                            resume=Arg("resume", True), fresh=Arg("fresh", True))
    limit = (concurrency if isinstance(concurrency, FixedLimit | AdaptiveLimit)
             else parse_concurrency(concurrency, max_concurrency))
    path = cache_path(cache)
    # An engine object is the caller's to close (workers reused across runs); a name is ours.
    engines = EngineOnDemand(engine, cache=cache, options=engine_options)
    runner = engines.get()
    try:
        # The local engine's calls see the driver's cache; remote workers open their own.
        with use_cache(path if runner.name == "local" else None) as answers:
            if plan.sharded is not None and hasattr(runner, "run_sharded") \
                    and plan.repeats > 1:
                result = await _execute_sharded_repeats(plan, runner, concurrency=limit,
                                                        resume=resume, fresh=fresh,
                                                        show_progress=show_progress)
            elif plan.sharded is not None and hasattr(runner, "run_sharded"):
                result = await _execute_sharded(plan, runner, concurrency=limit,
                                                resume=resume, fresh=fresh,
                                                show_progress=show_progress)
            elif plan.repeats > 1:
                async def one(repeat: int, folder: Path) -> RunResult:
                    sub = dataclasses.replace(plan, out_dir=folder,
                                              info=dataclasses.replace(plan.info))
                    return await _execute(sub, runner, concurrency=limit, resume=resume,
                                          fresh=fresh, show_progress=show_progress, warn=warn,
                                          repeat=repeat)

                result = await run_repeats(plan.out_dir, plan.info, plan.repeats, one,
                                           resume=resume, fresh=fresh, asked=len(plan.facts))
            else:
                result = await _execute(plan, runner, concurrency=limit, resume=resume,
                                        fresh=fresh, show_progress=show_progress, warn=warn)
        stats = runner.stats()
    finally:
        engines.close()
    extra: dict[str, Any] = {"engine": {k: v for k, v in stats.items() if k != "cache"}}
    if plan.input_shards:
        extra["engine"]["input_shards"] = plan.input_shards
    if answers is not None:
        extra["cache"] = answers.stats()
    elif path is not None and stats.get("cache"):
        asked = stats["cache"]["hits"] + stats["cache"]["misses"]
        extra["cache"] = {"path": str(path), **stats["cache"],
                          "hit_rate": round(stats["cache"]["hits"] / asked, 4) if asked else None}
    if plan.ci:
        # From the tally when the run kept one: a sharded run's driver reads no verdict.
        extra["intervals"] = (pair_intervals(result.tally.gold_pairs())
                              if result.tally is not None else run_intervals(result.records))
    result.summary.update(extra)
    amend_summary(result.out_dir, extra)
    return result


async def _execute(plan: RunPlan, engine: Engine, *, concurrency: Limit, resume: bool,
                   fresh: bool, show_progress: bool, warn: Warn | None,
                   repeat: int | None = None) -> RunResult:
    if len(plan.members) > 1:
        return await run_consensus(
            plan.facts, strategy=plan.strategy, members=plan.members, judge=plan.judge,
            values=plan.values, info=plan.info, out_dir=plan.out_dir, concurrency=concurrency,
            resume=resume, fresh=fresh, show_progress=show_progress, engine=engine,
            warn=warn)
    ctx = plan.strategy.make_context(**plan.values)
    key: GraphKey = ("strategy", plan.strategy.name)
    config = run_config(plan.info.run_id)
    if repeat is not None:
        # Every call of the graph sees it: a cache key and a sample of its own per repeat.
        config["metadata"][REPEAT] = repeat

    async def invoke(fact: Fact) -> dict[str, Any]:
        return await engine.invoke(key, {"fact": fact.as_input()}, ctx, config)

    check = invoke if plan.prefilter is None else prefiltered(invoke, plan.prefilter,
                                                               plan.info.method)
    result = await check_facts(plan.facts, check, plan.info, plan.out_dir,
                               concurrency=concurrency, resume=resume, fresh=fresh,
                               show_progress=show_progress, warn=warn)
    if plan.prefilter is not None:
        result.summary.update(prefilter_counts(plan.out_dir, len(plan.facts)))
    return result


async def _execute_sharded(plan: RunPlan, engine: Any, *, concurrency: Limit, resume: bool,
                           fresh: bool, show_progress: bool,
                           repeat: int | None = None) -> RunResult:
    """Run a sharded plan on its engine's workers: each checks its shards' facts."""
    from kgcheck.runs.shard_check import ShardJob

    config = run_config(plan.info.run_id)
    if repeat is not None:
        config["metadata"][REPEAT] = repeat
    # Each worker runs this many facts at once, as a local run does in all.
    spec: int | str = ("auto" if isinstance(concurrency, AdaptiveLimit)
                       else concurrency.maximum)
    consensus = len(plan.members) > 1
    job = ShardJob(shards=plan.shards_uri or "", run_id=plan.info.run_id,
                   method=plan.info.method, models=list(plan.info.models),
                   key=("strategy", plan.strategy.name),
                   # A consensus run's context is made per phase, with its judge.
                   context=None if consensus else plan.strategy.make_context(**plan.values),
                   config=config, concurrency=spec, max_concurrency=concurrency.maximum,
                   prefilter=_rules_for_workers(plan.prefilter))
    if consensus:
        from kgcheck.runs.pipeline_consensus import run_sharded_consensus

        return await run_sharded_consensus(plan, engine, job, resume=resume, fresh=fresh,
                                           show_progress=show_progress)
    result: RunResult = await engine.run_sharded(plan.sharded, plan.info, plan.out_dir, job,
                                                 resume=resume, fresh=fresh,
                                                 show_progress=show_progress)
    return result


async def _execute_sharded_repeats(plan: RunPlan, engine: Any, *, concurrency: Limit,
                                   resume: bool, fresh: bool, show_progress: bool) -> RunResult:
    """Run each repeat of a sharded plan on the workers, then combine them on the workers."""
    from kgcheck.runs.pipeline_repeats import run_sharded_repeats

    async def one(repeat: int, folder: Path, sharded: Any, uri: str) -> RunResult:
        sub = dataclasses.replace(plan, out_dir=folder, info=dataclasses.replace(plan.info),
                                  sharded=sharded, shards_uri=uri or None)
        return await _execute_sharded(sub, engine, concurrency=concurrency, resume=resume,
                                      fresh=fresh, show_progress=show_progress, repeat=repeat)

    return await run_sharded_repeats(plan.sharded, plan.info, plan.out_dir, plan.repeats, one,
                                     workers=engine.workers, shards_uri=plan.shards_uri,
                                     resume=resume, fresh=fresh, show_progress=show_progress)


def _rules_for_workers(rules: SchemaContext | None) -> SchemaContext | None:
    """Return the pre-filter's rules with absolute file paths: the workers run elsewhere."""
    if rules is None:
        return None

    def absolute(paths: str) -> str:
        return ",".join(str(Path(p.strip()).resolve()) for p in paths.split(",") if p.strip())

    return dataclasses.replace(rules, ontology=absolute(rules.ontology),
                               shapes=absolute(rules.shapes), kg=absolute(rules.kg))


def dry_run_of(plan: RunPlan, *, resume: bool = False) -> CostEstimate:
    """Estimate what a checked plan will send: facts, calls, tokens and cost; sends nothing.

    With ``resume`` the facts the run folder already holds verdicts for are left out. With a
    pre-filter, the facts it refutes are counted apart: they cost no call.
    """
    done: set[str] = set()
    if resume:
        done = {fid for fid, r in read_verdicts(plan.out_dir).items()
                if not r.get("error")}
    contexts = {m: plan.strategy.make_context(**{**plan.values, "model": m})
                for m in plan.members}
    # The pre-filter is offline (the KG's rules): apply it, as the run will, and count calls
    # only for the facts that reach a model.
    screen = None if plan.prefilter is None else screener(plan.prefilter)
    found = _cost_estimate(plan.facts, contexts, plan.info.pricing, done=done, screen=screen)
    if found.prefilter is not None:
        found.prefilter = {"name": plan.info.settings["prefilter"]["name"], **found.prefilter}
    if len(plan.members) > 1 and plan.judge != JUDGE_NONE:
        found.notes.append("consensus: the judge's calls on ties are not counted (ties are "
                           "known only once the members have voted)")
    return found
