"""``RunSpec``: every option of a run, typed and checked, declared once.

A run's options (its input, sampling, strategy, model, engine, consensus, repeats, rules
and output) are the fields of ``RunSpec``, each with its default, its help text
(``description``) and where it belongs (``json_schema_extra``: ``group``, the command
line's ``flags``, the ``surfaces`` it is offered on, whether a ``resume`` may change it).
``kgcheck run``'s options are generated from the fields, the Python API's ``arun``/``run``/
``adry_run``/``dry_run`` take the same keywords (a test holds them equal), sweeps' cells are
specs, and ``run.json`` keeps the spec that made the run, which a resume compares field by
field. The rules that tie fields together are the spec's validator (``_check_rules``).

``ModelOptions`` is the group every command that asks a model shares (``model``,
``base_url``, ``settings`` given as ``--set KEY=VALUE``).

This module imports no model or graph code, so that ``kgcheck run --help`` stays fast;
``--set KEY=VALUE`` texts are read by the type of the strategy's settings
(``parse_setting_pairs``) before a spec is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kgcheck.arguments import NAME_ONLY, Arg, ArgumentError, literal

__all__ = ["GROUPS", "SPEC_VERSION", "ModelOptions", "RunSpec", "SettingsError", "cli_fields",
           "merged_settings", "option_meta", "python_fields", "spec_changes"]

# The version of the spec as run.json keeps it (``{"version": ..., "fields": {...}}``).
SPEC_VERSION = 1
# The API's default model and "no judge" (kgcheck.graphs.context.DEFAULT_MODEL and
# kgcheck.graphs.consensus.judges.JUDGE_NONE; a test holds them equal): no graph code here.
DEFAULT_MODEL = "replay:gemma2:9b"
JUDGE_NONE = "none"
# The groups, in the order the command line shows them, with their titles.
GROUPS = {"input": "Input", "sampling": "Sampling", "strategy": "Strategy",
          "model": "Model", "engine": "Engine", "consensus": "Consensus and repeats",
          "rules": "Rules", "output": "Output"}
# A resume may change the field ("free") or must keep it ("same"); "input" fields are
# compared through the facts they give (run.json's input fingerprint), not by value,
# "settings" fields through the run's recorded settings (by setting, prompt files by
# content) and "identity" fields through the run's identity (strategy, models, judge).
Resume = Literal["same", "free", "input", "settings", "identity"]
Surface = Literal["cli", "python"]


class SettingsError(ArgumentError):
    """A setting that the strategy does not have, or a combination that cannot run."""


def option(default: Any, description: str, *, group: str, resume: Resume = "same",
           flags: Sequence[str] = (), surfaces: Sequence[Surface] = ("cli", "python"),
           cli_type: str = "", cli_default: Any = ..., metavar: str = "",
           exclude: bool = False) -> Any:
    """Declare one run option: its default, help text and where it shows up.

    Args:
        default: The default (a Python caller's and, unless ``cli_default``, the flag's).
        description: The help text (the command line's and the API's).
        group: The group (a key of ``GROUPS``).
        resume: Whether a resume may change it (see ``Resume``).
        flags: The command line's spellings (default: ``--name-with-dashes``).
        surfaces: Where it is offered: the command line, the Python API or both.
        cli_type: The flag's type when it is not the field's (``text``, ``path``, ``int``,
            ``float``, ``bool``, ``list``).
        cli_default: The flag's default when it is not the field's (None: the flag is
            optional and the field's default applies without it).
        metavar: The flag's value as the help shows it.
        exclude: Left out of run.json (facts in memory, an engine object).

    Returns:
        The pydantic field.

    """
    extra: dict[str, Any] = {"group": group, "resume": resume, "surfaces": list(surfaces)}
    if flags:
        extra["flags"] = list(flags)
    if cli_type:
        extra["cli_type"] = cli_type
    if cli_default is not ...:
        extra["cli_default"] = cli_default
    if metavar:
        extra["metavar"] = metavar
    return Field(default, description=description, json_schema_extra=extra, exclude=exclude)


def option_meta(name: str, model: type[BaseModel] | None = None) -> dict[str, Any]:
    """Return a field's declaration beyond its type: group, flags, surfaces, resume."""
    field = (model or RunSpec).model_fields[name]
    extra = field.json_schema_extra
    return dict(extra) if isinstance(extra, dict) else {}


def python_fields(model: type[BaseModel] | None = None) -> list[str]:
    """Return the fields the Python API takes as keywords, in declaration order."""
    cls = model or RunSpec
    return [n for n in cls.model_fields if "python" in option_meta(n, cls)["surfaces"]]


def cli_fields(model: type[BaseModel] | None = None) -> list[str]:
    """Return the fields the command line has a flag for, in declaration order."""
    cls = model or RunSpec
    return [n for n in cls.model_fields if "cli" in option_meta(n, cls)["surfaces"]]


class _Spec(BaseModel):
    """A spec's plumbing: errors that name the caller's arguments, not pydantic's report."""

    # Built when first validated, not when imported: `kgcheck run --help` reads the fields
    # only.
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True,
                              validate_default=False, defer_build=True)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _plain_error(exc) from None


def _plain_error(exc: ValidationError) -> Exception:
    """Turn pydantic's report into the one error that names the argument."""
    first = exc.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ArgumentError):
        return cause
    where = [str(part) for part in first.get("loc", ()) if isinstance(part, str)]
    if first.get("type") == "extra_forbidden" and where:
        return SettingsError(f"{literal(where[0])}: not a run option")
    name = where[0] if where else "options"
    return SettingsError(f"{{name}}: {literal(str(first.get('msg', 'invalid')))}",
                     name=Arg(name, first.get("input", NAME_ONLY)))


class ModelOptions(_Spec):
    """The options of the model a command asks: shared by every command that asks one."""

    model: str = option(DEFAULT_MODEL, "provider:model, e.g. ollama:gemma2:9b.", group="model",
                        resume="identity")
    base_url: str | None = option(None, "Server URL for ollama/openai-compatible.",
                                  group="model", resume="settings")
    settings: dict[str, Any] | None = option(
        None, "A setting of the strategy (repeatable), e.g. --set max_attempts=5; `kgcheck "
        "settings STRATEGY` lists them.", group="model", resume="settings", flags=("--set",),
        cli_type="list", metavar="KEY=VALUE")


class RunSpec(ModelOptions):
    """Every option of a run, typed and checked: what ``kgcheck run`` and ``kgcheck.arun`` take.

    Build one with keywords (``RunSpec(dataset="yago", limit=10)``) and pass it as
    ``kgcheck.run(spec=...)``; ``spec.model_copy(update={...})`` makes a variant (a checked
    one: ``RunSpec(**{**spec.options(), ...})``). A combination that cannot run raises a
    ``SettingsError`` naming the arguments before any input is read.
    """

    # --- where the facts come from
    facts: Any = option(None, "Facts in memory (Fact objects, mappings or (s, p, o) tuples).",
                        group="input", resume="input", surfaces=("python",), exclude=True)
    dataset: str | None = option(None, "Dataset name (see `kgcheck datasets`).", group="input",
                                 resume="input")
    triples: str | Path | None = option(
        None, "Your own facts: .csv, .tsv or .jsonl with subject, predicate, object[, id, "
        "label], or RDF: .nt .nq .ttl .trig .rdf (also .gz). With --engine ray over every "
        "fact: also a URL (s3://bucket/kg.nt) the workers read.", group="input",
        resume="input", cli_type="text")
    base_iri: str | None = option(None, "Base IRI of the relative IRIs in a Turtle, TriG or "
                                  "RDF/XML --triples file (default: the file's own URI).",
                                  group="input", resume="input", flags=("--base",))
    sparql: str | None = option(None, "Read the facts from this SPARQL 1.1 endpoint URL.",
                                group="input", resume="input")
    graph: str | None = option(None, "With --sparql: only this named graph (IRI).",
                               group="input", resume="input")
    where: str | None = option(None, "With --sparql: a pattern binding ?s ?p ?o, e.g. '?s a "
                               "<http://ex.org/Person> . ?s ?p ?o'.", group="input",
                               resume="input")
    predicates: str | list[str] | None = option(
        None, "Check only facts with these predicates, comma-separated: IRIs, prefixed names "
        "(dbo:*), plain names or globs.", group="sampling", resume="input", cli_type="text")
    exclude_predicates: str | list[str] | None = option(
        None, "Leave out facts with these predicates, e.g. 'rdf:type,owl:*'.",
        group="sampling", resume="input", cli_type="text")
    labels: str | Path | None = option(
        None, "Gold labels: .csv/.jsonl with id or subject, predicate, object, and label.",
        group="input", resume="input", cli_type="path")
    sample: int | None = option(None, "Check a uniform random sample of N facts (one pass "
                                "over the input).", group="sampling", resume="input")
    seed: int | None = option(0, "Seed of --sample / --stratify: the same seed, the same "
                              "sample.", group="sampling", resume="input", cli_type="int")
    stratify: str | None = option(None, "Sample per stratum: predicate, subject, dataset or "
                                  "label.", group="sampling", resume="input")
    per_stratum: int | None = option(None, "With --stratify: K facts of each stratum "
                                     "(default: proportional to --sample).", group="sampling",
                                     resume="input")
    ids: list[str] | None = option(None, "Only these fact ids: ID,ID,... or @FILE.",
                                   group="sampling", resume="input", cli_type="text")
    as_dataset: str | None = option(
        None, "Check the --triples file as facts of this benchmark dataset (its evidence, "
        "prompt notes, replay); default: your own KG.", group="input", resume="input")
    strategy: str = option("dka", "Strategy: dka, giv-z, giv-f, rag, dka-sc, ... (`kgcheck "
                           "graph list`); --method is the study's word for it.",
                           group="strategy", resume="identity",
                           flags=("--strategy", "--method"))
    data: str | Path | None = option(None, "FactCheck data in the upstream layout.",
                                     group="input", resume="input", cli_type="text")
    limit: int | None = option(None, "Check only the first N facts.", group="sampling",
                               resume="input")
    # --- how the run executes
    concurrency: int | str = option(4, "Facts checked at once: a number, or auto (adapt to "
                                    "the server, up to --max-concurrency).", group="engine",
                                    resume="free", cli_type="text", cli_default="4")
    max_concurrency: int = option(64, "With --concurrency auto: the most facts at once.",
                                  group="engine", resume="free")
    cache: bool | str | Path | None = option(
        True, "Answer cache file (default: $KGCHECK_CACHE_DIR/answers.sqlite, else "
        "~/.cache/kgcheck/answers.sqlite).", group="engine", resume="free", cli_type="path",
        cli_default=None)
    engine: Any = option("local", "Where the graphs run: local (this process) or ray (a Ray "
                         "cluster; pip install 'kgcheck\\[ray]').", group="engine",
                         resume="free", cli_type="text")
    engine_options: dict[str, Any] | None = option(
        None, "Options of the engine (Ray: address, workers, per_worker, shard_bytes).",
        group="engine", resume="free", surfaces=("python",))
    ray_address: str | None = option(None, "With --engine ray: a running cluster (host:6379 "
                                     "or ray://host:10001); default: start a local one.",
                                     group="engine", resume="free")
    ray_workers: int | None = option(
        None, "With --engine ray: workers, each checking --concurrency facts at once over a "
        "whole file (default: the cluster's CPUs, at most 8).", group="engine", resume="free")
    ray_shard_mb: float | None = option(
        None, "With --engine ray: an N-Triples, N-Quads or JSON Lines file is read, and "
        "checked whole, in shards of this many MB (default 32).", group="engine",
        resume="free")
    shards_uri: str | None = option(
        None, "With --engine ray over a whole file: the workers write their verdict shards "
        "here (an fsspec URL such as s3://bucket/run; credentials from each node's "
        "environment) instead of OUT/shards/.", group="engine",
        # A resume that names none writes where the run's shard plan says; one that names
        # another store is refused by the sharded folder (shards/plan.json's store).
        resume="free")
    # --- where it goes
    out: str | Path | None = option(None, "Run folder (default runs/<data>-<strategy>-<model>)",
                                    group="output", resume="free", cli_type="path")
    resume: bool = option(False, "Continue the run in --out.", group="output", resume="free")
    fresh: bool = option(False, "Discard what --out holds and start over.", group="output",
                         resume="free")
    prompt: str | None = option(None, "Prompt file (name in prompts/ or a path).",
                                group="strategy", resume="settings")
    replay_latency: float = option(0.0, "Replay: sleep this x the recorded time.",
                                   group="model", resume="settings")
    consensus: list[str] | None = option(
        None, "Member models, comma-separated: multi-model consensus over --strategy.",
        group="consensus", resume="identity", cli_type="text")
    judge: str = option(JUDGE_NONE, "Tie-break: model spec, cons-up, cons-down, none",
                        group="consensus", resume="identity")
    show_progress: bool = option(False, "Show a progress bar.", group="output", resume="free",
                                 flags=("--progress/--no-progress",), cli_default=True)
    pricing: str | Path | None = option(
        None, "Pricing file (US dollars per 1,000 tokens, kgcheck/providers/pricing.json's "
        "format) for the cost.", group="output", resume="free", cli_type="path")
    ci: bool = option(False, "Add 95% bootstrap intervals of accuracy, F1(T), F1(F) and "
                      "macro-F1 to summary.json.", group="output", resume="free",
                      flags=("--ci",))
    repeats: int = option(1, "Check each fact N times (temperature above 0; no cached answer "
                          "is reused across repeats): the majority is the verdict; flip rates "
                          "and score spread go to summary.json.", group="consensus")
    prefilter: str | None = option(None, "schema: facts the KG's rules (--ontology, --shapes) "
                                   "refute are F without a model call.", group="rules")
    rules: dict[str, Any] | None = option(
        None, "With prefilter, the schema strategy's settings ({'ontology': FILE, 'shapes': "
        "FILE, ...}).", group="rules", resume="settings", surfaces=("python",))
    ontology: str | None = option(None, "RDFS/OWL ontology for --strategy schema or "
                                  "--prefilter schema.", group="rules",
                                  resume="settings")
    shapes: str | None = option(None, "SHACL shapes (pySHACL) for --strategy schema or "
                                "--prefilter schema.", group="rules",
                                  resume="settings")

    @model_validator(mode="before")
    @classmethod
    def _read_texts(cls, data: Any) -> Any:
        """Read the command line's spellings: comma lists, ``@FILE`` ids, numbers as text."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("consensus"), str):
            data["consensus"] = [m.strip() for m in data["consensus"].split(",") if m.strip()]
        if isinstance(data.get("ids"), str):
            from kgcheck.data.sampling import parse_ids

            data["ids"] = parse_ids(data["ids"])
        concurrency = data.get("concurrency")
        if isinstance(concurrency, str) and concurrency.strip().isdigit():
            data["concurrency"] = int(concurrency)
        if isinstance(data.get("settings"), Mapping):
            data["settings"] = dict(data["settings"])
        for name in ("engine_options", "rules"):
            if isinstance(data.get(name), Mapping):
                data[name] = dict(data[name])
        return data

    @model_validator(mode="after")
    def _check_rules(self) -> RunSpec:
        """Refuse a combination of options that cannot run, naming the options."""
        from kgcheck.runs.concurrency import AdaptiveLimit, FixedLimit, parse_concurrency

        sources = (self.dataset, self.triples, self.sparql, self.facts)
        if sum(x is not None for x in sources) != 1:
            raise SettingsError("give exactly one of {sources}", sources=Arg(
                "dataset", triples=NAME_ONLY, sparql=NAME_ONLY, facts=NAME_ONLY, join=", "))
        if (self.graph is not None or self.where is not None) and self.sparql is None:
            raise SettingsError("{graph} and {where} apply to a {sparql} endpoint only",
                            graph=Arg("graph"), where=Arg("where"), sparql=Arg("sparql"))
        if self.as_dataset is not None and self.triples is None:
            raise SettingsError("{as_dataset} applies to a {triples} file only (a dataset already "
                            "names a benchmark)", as_dataset=Arg("as_dataset"),
                            triples=Arg("triples"))
        if self.limit is not None and self.limit < 1:
            raise SettingsError("{limit} must be at least 1", limit=Arg("limit", self.limit))
        latency = (self.settings or {}).get("replay_latency", self.replay_latency)
        if latency is not None and float(latency) < 0:
            raise SettingsError("{latency} must be 0 or more",
                            latency=Arg("set:replay_latency", latency))
        if self.judge != JUDGE_NONE and not self.consensus:
            raise SettingsError("{judge} needs {consensus} (the models whose ties it breaks)",
                            judge=Arg("judge", self.judge), consensus=Arg("consensus"))
        if self.resume and self.fresh:
            raise SettingsError("{resume} and {fresh} contradict each other; pick one",
                            resume=Arg("resume", True), fresh=Arg("fresh", True))
        if not isinstance(self.concurrency, FixedLimit | AdaptiveLimit):
            parse_concurrency(self.concurrency, self.max_concurrency)
        if isinstance(self.repeats, bool) or self.repeats < 1:
            raise SettingsError(f"repeats must be a whole number of at least 1, got "
                            f"{self.repeats!r}")
        if self.repeats > 1 and self.consensus and len(self.consensus) > 1:
            raise SettingsError("repeats apply to one model; a consensus run already asks "
                            "several: drop --repeats or --consensus")
        self.engine_settings()  # the Ray options need the Ray engine
        return self

    @classmethod
    def of(cls, options: Mapping[str, Any], strategy_settings: Mapping[str, Any] | None = None,
           *, spec: RunSpec | None = None) -> RunSpec:
        """Make a spec of keywords: its fields, and the strategy's settings besides.

        Args:
            options: Keywords; those that are no field of the spec are settings of the
                strategy (``max_attempts=5``).
            strategy_settings: More settings of the strategy.
            spec: A spec the options start from (only options that differ from the
                defaults replace its fields).

        Returns:
            The checked spec.

        Raises:
            SettingsError: Options that cannot run together, or a setting given twice.

        """
        fields = cls.model_fields
        given = {k: v for k, v in options.items() if k in fields}
        extra = {**{k: v for k, v in options.items() if k not in fields},
                 **(strategy_settings or {})}
        if spec is not None:
            changed = {k: v for k, v in given.items() if v is not fields[k].default
                       and v != fields[k].default}
            given = {**spec.options(), **changed}
        if extra:
            given["settings"] = merged_settings(given.get("settings"), extra)
        return cls(**given)

    def options(self) -> dict[str, Any]:
        """Return the options as keywords that make the same spec (``RunSpec(**...)``)."""
        return {name: getattr(self, name) for name in type(self).model_fields}

    def engine_name(self) -> str:
        """Return the engine's name (an engine object's own)."""
        return self.engine if isinstance(self.engine, str) else str(self.engine.name)

    def engine_settings(self) -> dict[str, Any]:
        """Return the engine's options: ``engine_options`` and the ``ray_*`` options."""
        options = dict(self.engine_options or {})
        given = (self.ray_address, self.ray_workers, self.ray_shard_mb)
        if self.engine_name() != "ray" and any(x is not None for x in given):
            raise SettingsError("{address}, {workers} and {shard_mb} need {engine}",
                            address=Arg("ray_address"), workers=Arg("ray_workers"),
                            shard_mb=Arg("ray_shard_mb"), engine=Arg("engine", "ray"))
        if self.ray_workers is not None:
            if self.ray_workers < 1:
                raise SettingsError(f"{{workers}} must be at least 1, got {self.ray_workers}",
                                workers=Arg("ray_workers"))
            options["workers"] = self.ray_workers
        if self.ray_shard_mb is not None:
            if not self.ray_shard_mb > 0:
                raise SettingsError(f"{{shard_mb}} must be more than 0, got {self.ray_shard_mb}",
                                shard_mb=Arg("ray_shard_mb"))
            options["shard_bytes"] = max(1, round(self.ray_shard_mb * 1024 * 1024))
        if self.ray_address:
            options["address"] = self.ray_address
        return options

    def strategy_values(self) -> dict[str, Any]:
        """Return the strategy's settings: ``settings`` and the options that are settings.

        ``prompt``, ``base_url`` and ``replay_latency`` are settings with an option of their
        own; a schema run without ``prefilter`` takes its rules as settings too.
        """
        values = dict(self.settings or {})
        own = {"prompt": self.prompt, "base_url": self.base_url,
               "replay_latency": self.replay_latency}
        for key, value in own.items():
            if value:
                if key in values:
                    raise SettingsError("{twice} given both as a keyword and in {settings}",
                                    twice=Arg("set:" + key), settings=Arg("settings"))
                values[key] = value
        if self.strategy == "schema" and not self.prefilter:
            values.update(self.rule_files())
        return values

    def rule_files(self) -> dict[str, Any]:
        """Return the pre-filter's rules: ``rules`` with ``ontology`` and ``shapes``."""
        return {**(self.rules or {}), **{k: v for k, v in (("ontology", self.ontology),
                                                           ("shapes", self.shapes)) if v}}

    def prefilter_rules(self) -> dict[str, Any] | None:
        """Return the rules a pre-filter checks facts against (None: none given)."""
        if self.strategy == "schema" and not self.prefilter:
            return None
        return self.rule_files() or None

    def stored(self) -> dict[str, Any]:
        """Return the spec as run.json keeps it: versioned, facts in memory left out."""
        # A value JSON has no form for (an object in the settings) is kept as its text.
        fields = self.model_dump(mode="json", exclude={"engine"}, fallback=str)
        fields["engine"] = self.engine_name()
        return {"version": SPEC_VERSION, "fields": fields}


def merged_settings(settings: Mapping[str, Any] | None,
                    strategy_settings: Mapping[str, Any]) -> dict[str, Any]:
    """Join ``settings={...}`` and settings given as keywords; a setting given twice is refused."""
    both = sorted(set(settings or {}) & set(strategy_settings))
    if both:
        raise SettingsError("{twice} given both as a keyword and in {settings}",
                            twice=Arg("set:" + both[0]), settings=Arg("settings"))
    return {**(settings or {}), **strategy_settings}


def spec_changes(stored: Mapping[str, Any] | None, now: Mapping[str, Any]) -> list[str]:
    """Say which options a resume changes that it must keep (empty: none, or no spec stored).

    Both are specs as run.json keeps them (``RunSpec.stored``). Only fields declared
    ``resume="same"`` count: the input is compared by its facts, the settings by setting
    and the identity (strategy, models, judge) as such, elsewhere.
    """
    if not isinstance(stored, Mapping) or not isinstance(stored.get("fields"), Mapping) \
            or not isinstance(now.get("fields"), Mapping):
        return []  # a run.json of an older kgcheck: its identity is checked as it was
    from kgcheck.data.runfolder import short_repr
    from kgcheck.providers.secrets import redact_value

    old = stored["fields"]
    new = redact_value(now["fields"])
    changes = []
    for name in RunSpec.model_fields:
        if option_meta(name)["resume"] != "same" or name not in old:
            continue
        if old[name] != new.get(name):
            changes.append(f"{name} ({short_repr(old[name])} then, {short_repr(new.get(name))} "
                           "now)")
    return changes
