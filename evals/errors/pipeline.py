"""The error analysis end to end (``kgcheck errors RUN ... --out DIR``).

1. the wrong verdicts of each run (``selection``), a seeded sample of ``cap`` per run;
2. an explanation per error, and in taxonomy mode its category: one call of the
   explain-and-sort graph per error (``graph``), several at once; explanations the
   verdicts carry are reused without a call; each result is appended to
   ``DIR/explanations.jsonl`` as it arrives, so a stopped analysis resumes where it
   stopped and asks the model nothing twice;
3. embeddings, UMAP and HDBSCAN (``clusters``), cluster names by c-TF-IDF or by a model;
4. the tables (``tables``) and the outputs (``outputs``), each written whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgcheck import event_loop
from kgcheck.data import safe_json
from kgcheck.data.atomic import write_text_atomic
from kgcheck.data.runfolder import RunFolderError, VerdictSink, checked_facts, exclusive
from kgcheck.evals.errors.clusters import (
    cluster_explanations,
    ctfidf_keywords,
    embed,
    scatter_plot,
)
from kgcheck.evals.errors.graph import (
    TAXONOMY_FIELDS,
    ErrorCase,
    ErrorsContext,
    categories_of,
    graph,
    name_cluster,
)
from kgcheck.evals.errors.outputs import (
    CLUSTERS_FILE,
    ERRORS_FILE,
    EXPLANATIONS_FILE,
    SCATTER,
    TABLES_JSON,
    TABLES_MD,
    ErrorsInputError,
)
from kgcheck.evals.errors.selection import RunErrors, read_run_errors
from kgcheck.evals.errors.tables import category_table, error_slices, render_markdown
from kgcheck.prompts import load_prompt

__all__ = ["ErrorAnalysis", "analyse_errors"]

REPLAY = "replay:"
KEYWORDS = 3
NAMED_EXAMPLES = 8


@dataclass
class ErrorAnalysis:
    """What an analysis wrote and found."""

    out_dir: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]


def _key(run: str, fact_id: str, model: str) -> str:
    return json.dumps([run, fact_id, model])


def _read_done(path: Path) -> dict[str, dict[str, Any]]:
    """Read the explanations of an earlier, maybe stopped, analysis (torn last line skipped)."""
    done: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return done
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                rec = safe_json.parse(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and {"run", "fact_id", "model"} <= set(rec):
                done[_key(rec["run"], rec["fact_id"], rec["model"])] = rec
    return done


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _model_for(run: RunErrors, model: str | None, needs_calls: bool) -> str:
    spec = model or run.model
    if needs_calls and spec.startswith(REPLAY):
        raise ErrorsInputError(
            f"{run.folder}: {spec} replays recorded verdicts and has no explanations of its "
            "errors; pass --model with a live model (ollama:gemma2:9b, openai:gpt-4o-mini) "
            "or a local one (local:smollm2-135m)")
    if not spec:
        raise ErrorsInputError(f"{run.folder}: run.json names no model; pass --model")
    return spec


async def _explain_all(jobs: list[tuple[ErrorsContext, dict[str, Any]]], sink: VerdictSink,
                       concurrency: int, progress: Callable[[int, int], None] | None
                       ) -> list[dict[str, Any]]:
    gate = asyncio.Semaphore(max(1, concurrency))
    finished: list[dict[str, Any]] = []

    async def one(ctx: ErrorsContext, state: dict[str, Any]) -> None:
        async with gate:
            out = await graph.ainvoke(state, context=ctx, config={"recursion_limit": 10})
        error = state["error"]
        rec = {"run": error["run"], "fact_id": error["fact_id"], "model": ctx.model,
               "explanation": out.get("explanation"),
               "explanation_source": out.get("explanation_source"),
               "problem": out.get("problem")}
        if ctx.taxonomy:
            rec.update(category=out.get("category"), category_raw=out.get("category_raw"),
                       taxonomy=_sha(load_prompt(ctx.taxonomy_prompt, TAXONOMY_FIELDS)))
        sink.write(rec)  # one whole line as each error finishes: resumable
        finished.append(rec)
        if progress is not None:
            progress(len(finished), len(jobs))

    await asyncio.gather(*(one(ctx, state) for ctx, state in jobs))
    return finished


def _degrees(run: RunErrors) -> dict[str, int] | None:
    """Each subject's degree in the run's input KG (None when its facts cannot be loaded)."""
    try:
        facts = checked_facts(run.folder, run.info)
    except RunFolderError:
        return None
    return dict(Counter(f.subject for f in facts))


def analyse_errors(run_dirs: Sequence[str | Path], out_dir: str | Path, *,
                   model: str | None = None, embedder: str = "minilm", seed: int = 0,
                   cap: int | None = 500, taxonomy: bool = False,
                   taxonomy_prompt: str = "errors_taxonomy.txt",
                   explain_prompt: str = "errors_explain.txt", name_with_model: bool = False,
                   min_cluster_size: int = 5, concurrency: int = 4,
                   settings: Mapping[str, Any] | None = None,
                   progress: Callable[[int, int], None] | None = None) -> ErrorAnalysis:
    """Explain, cluster, name and count the wrong verdicts of runs; write ``out_dir``.

    ``settings`` are the model's (``temperature``, ``max_tokens``, ``base_url``, ...).

    Raises:
        ErrorsInputError: a folder that is not a run, runs with no gold or review labels,
            no errors to analyse, a replay model asked to explain, an embedder or
            clustering library that is not installed, too few explanations to cluster.

    """
    if not run_dirs:
        raise ErrorsInputError("name at least one run folder")
    runs = read_run_errors([Path(d) for d in run_dirs], cap=cap, seed=seed)
    if not any(run.errors for run in runs):
        scored = ", ".join(f"{r.folder} ({len(r.scored)} labelled)" for r in runs)
        raise ErrorsInputError(f"no errors to analyse: every labelled T/F verdict is right "
                               f"in {scored}")
    out = Path(out_dir)
    codes: dict[str, str] = {}
    if taxonomy:
        codes = categories_of(load_prompt(taxonomy_prompt, TAXONOMY_FIELDS))
        if not codes:
            raise ErrorsInputError(f"{taxonomy_prompt}: no categories (lines like "
                                   "'- E1 (Missing context): ...') in its instructions")
    with exclusive(out):
        done = _read_done(out / EXPLANATIONS_FILE)
        tax_sha = _sha(load_prompt(taxonomy_prompt, TAXONOMY_FIELDS)) if taxonomy else None
        jobs: list[tuple[ErrorsContext, dict[str, Any]]] = []
        results: dict[str, dict[str, Any]] = {}
        spec_of: dict[str, str] = {}
        for run in runs:
            pending: list[tuple[ErrorCase, dict[str, Any]]] = []
            for error in run.errors:
                explanation = run.carried.get(error["fact_id"])
                pending.append((error, {"explanation": explanation,
                                        "explanation_source": "verdict" if explanation
                                        else None}))
            lacking = [e for e, s in pending if not s["explanation"]]
            needs_calls = bool(lacking) or taxonomy
            spec = _model_for(run, model, needs_calls and not _all_done(
                run, pending, model or run.model, done, taxonomy, tax_sha))
            spec_of[run.name] = spec
            ctx = _context(spec, settings, taxonomy=taxonomy, taxonomy_prompt=taxonomy_prompt,
                           explain_prompt=explain_prompt)
            for error, known in pending:
                key = _key(run.name, error["fact_id"], spec)
                earlier = done.get(key)
                state: dict[str, Any] = {"error": error, **known}
                if earlier and earlier.get("explanation") and not known["explanation"]:
                    state.update(explanation=earlier["explanation"],
                                 explanation_source=earlier.get("explanation_source"))
                if earlier and taxonomy and earlier.get("taxonomy") == tax_sha \
                        and "category" in earlier:
                    state.update(category=earlier.get("category"),
                                 category_raw=earlier.get("category_raw"))
                finished = state.get("explanation") and (not taxonomy or "category" in state)
                if finished:
                    results[key] = {"run": run.name, "fact_id": error["fact_id"],
                                    "model": spec, "explanation": state["explanation"],
                                    "explanation_source": state.get("explanation_source"),
                                    "category": state.get("category"),
                                    "category_raw": state.get("category_raw")}
                else:
                    jobs.append((ctx, state))
        if jobs:
            sink = VerdictSink(out / EXPLANATIONS_FILE)
            try:
                for rec in event_loop.run(_explain_all(jobs, sink, concurrency, progress)):
                    results[_key(rec["run"], rec["fact_id"], rec["model"])] = rec
            finally:
                sink.close()
        return _finish(runs, results, spec_of, out, embedder=embedder, seed=seed,
                       taxonomy=taxonomy, codes=codes, name_with_model=name_with_model,
                       min_cluster_size=min_cluster_size, model=model, settings=settings)


def _context(spec: str, settings: Mapping[str, Any] | None, **fields: Any) -> ErrorsContext:
    known = {f.name for f in dataclasses.fields(ErrorsContext)} - {"model", *fields}
    unknown = sorted(set(settings or {}) - known)
    if unknown:
        raise ErrorsInputError(f"unknown model setting(s) {', '.join(unknown)}; known: "
                               f"{', '.join(sorted(known))}")
    return ErrorsContext(model=spec, **{**(settings or {}), **fields})


def _all_done(run: RunErrors, pending: list[tuple[ErrorCase, dict[str, Any]]], spec: str,
              done: dict[str, dict[str, Any]], taxonomy: bool, tax_sha: str | None) -> bool:
    """Tell whether an earlier analysis left nothing to ask the model for this run."""
    for error, known in pending:
        earlier = done.get(_key(run.name, error["fact_id"], spec)) or {}
        if not (known["explanation"] or earlier.get("explanation")):
            return False
        if taxonomy and not (earlier.get("taxonomy") == tax_sha and "category" in earlier):
            return False
    return True


def _finish(runs: list[RunErrors], results: dict[str, dict[str, Any]], spec_of: dict[str, str],
            out: Path, *, embedder: str, seed: int, taxonomy: bool, codes: dict[str, str],
            name_with_model: bool, min_cluster_size: int, model: str | None,
            settings: Mapping[str, Any] | None) -> ErrorAnalysis:
    by_run = {run.name: run for run in runs}
    explained: list[dict[str, Any]] = []
    unexplained: list[dict[str, Any]] = []
    for run in runs:
        spec = spec_of[run.name]
        for error in run.errors:
            rec = results.get(_key(run.name, error["fact_id"], spec)) or {}
            base = {"run": run.name, "run_path": str(run.folder.resolve()),
                    "fact_id": error["fact_id"], "dataset": run.dataset, "model": spec,
                    "verdict_model": run.model, "predicate": error["predicate"],
                    "label": error["label"], "truth": error["truth"]}
            if rec.get("explanation"):
                explained.append({**base, "explanation": rec["explanation"],
                                  "explanation_source": rec.get("explanation_source"),
                                  **({"category": rec.get("category")} if taxonomy else {})})
            else:
                unexplained.append({**base, "problem": rec.get("problem") or "not explained"})
    if not explained:
        first = unexplained[0]["problem"] if unexplained else "no explanation"
        raise ErrorsInputError(f"no error could be explained ({len(unexplained)} tried; first "
                               f"problem: {first}); {out / EXPLANATIONS_FILE} keeps what was "
                               "obtained")
    texts = [r["explanation"] for r in explained]
    vectors = embed(texts, embedder)
    clustering = cluster_explanations(vectors, seed=seed, min_cluster_size=min_cluster_size)
    keywords = ctfidf_keywords(texts, clustering.labels)
    names = {k: ", ".join(words[:KEYWORDS]) for k, words in keywords.items()}
    named_by = "c-TF-IDF keywords"
    if name_with_model:
        spec = model or next(iter(spec_of.values()))
        if spec.startswith(REPLAY):
            raise ErrorsInputError(f"--name-with-model: {spec} cannot name clusters; pass "
                                   "--model with a live or local: model")
        named_by = f"model {spec}"
        ctx = _context(spec, settings)

        async def name_all() -> dict[int, str | None]:
            found = {}
            for k in sorted(set(clustering.labels) - {-1}):
                examples = [t for t, c in zip(texts, clustering.labels, strict=True)
                            if c == k][:NAMED_EXAMPLES]
                found[k] = await name_cluster(ctx, keywords.get(k, []), examples)
            return found

        for k, name in event_loop.run(name_all()).items():
            if name:
                names[k] = name
    names[-1] = "noise"
    records = []
    for rec, label, point in zip(explained, clustering.labels, clustering.points, strict=True):
        records.append({**rec, "cluster": label, "cluster_label": names.get(label, ""),
                        "umap": [round(point[0], 4), round(point[1], 4)]})
    sizes = Counter(clustering.labels)
    cluster_rows = [{"cluster": k, "label": names.get(k, ""), "size": sizes[k],
                     "keywords": keywords.get(k, []),
                     "examples": [r["explanation"] for r in records if r["cluster"] == k][:3]}
                    for k in sorted(sizes)]
    table9 = category_table(records, codes) if taxonomy else None
    slices = [error_slices(run.name, run.scored, _degrees(run)) for run in by_run.values()]
    summary = {
        "runs": [{"run": r.name, "folder": str(r.folder), "dataset": r.dataset,
                  "model": spec_of[r.name], "truth": r.truth_from, "scored": len(r.scored),
                  "wrong": r.total_errors, "analysed": len(r.errors), "na": r.na,
                  "reused_explanations": len(r.carried)} for r in runs],
        "errors_total": sum(r.total_errors for r in runs), "errors": len(records),
        "unexplained": unexplained, "clusters": len([k for k in sizes if k != -1]),
        "noise": sizes.get(-1, 0), "embedder": embedder, "seed": seed,
        "named_by": named_by, "settings": clustering.settings, "cluster_rows": cluster_rows,
        "taxonomy": ({"categories": codes, "unassigned": sum(
            1 for r in records if r.get("category") is None)} if taxonomy else None),
        "table9": table9, "slices": slices,
    }
    write_text_atomic(out / ERRORS_FILE, "".join(json.dumps(r) + "\n" for r in records))
    write_text_atomic(out / CLUSTERS_FILE, json.dumps(
        {"clusters": cluster_rows, "named_by": named_by, "embedder": embedder, "seed": seed,
         "settings": clustering.settings, "noise": sizes.get(-1, 0)}, indent=1) + "\n")
    write_text_atomic(out / TABLES_JSON, json.dumps(
        {k: summary[k] for k in ("runs", "table9", "slices", "cluster_rows", "taxonomy")},
        indent=1) + "\n")
    write_text_atomic(out / TABLES_MD, render_markdown(summary))
    scatter_plot(clustering, names, out, SCATTER)
    return ErrorAnalysis(out, summary, records)
