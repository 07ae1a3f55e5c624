"""A KG audit end to end: draw facts to label, read the labels, estimate the KG's accuracy.

``write_sample`` draws the facts a person should label into an annotators' CSV;
``estimate_run`` reads a run folder's verdicts and human labels (or draws gold labels as if
a person had given them), computes ``evals.estimate``'s three estimators, and writes
``RUN/estimate.json`` (and figures).
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgcheck.data.atomic import write_text_atomic
from kgcheck.data.cells import neutralise
from kgcheck.data.facts import Fact
from kgcheck.data.labels import (
    SAMPLE_COLUMNS,
    read_labels,
)
from kgcheck.data.runfolder import (
    ESTIMATE,
    VERDICTS,
    checked_facts,
    read_run_info,
    read_summary,
    read_verdicts,
    write_json,
)
from kgcheck.evals.accuracy import designs
from kgcheck.evals.accuracy.designs import OTHER, Unit, design_label, parse_design_label
from kgcheck.evals.accuracy.estimators import (
    EstimateError,
    Interval,
    Labeled,
    check_confidence,
    estimate_all,
    labels_to_halve,
    width_curve,
)
from kgcheck.evals.accuracy.plots import plot_intervals, plot_width
from kgcheck.evals.accuracy.support import needs_support_check, supporting_rows
from kgcheck.providers.pricing import Pricing, cost_summary

# Keys a design can stratify or cluster by: a term of the triple, or the run's verdict.
FACT_KEYS = ("predicate", "subject", "object", "dataset")
RUN_KEYS = ("verdict",)


def key_of(fact: Fact, key: str) -> str:
    """Return a fact's value for a stratification or cluster key."""
    if key not in FACT_KEYS:
        raise EstimateError(f"cannot group facts by {key!r}; use one of "
                            f"{', '.join(FACT_KEYS + RUN_KEYS)}")
    return str(getattr(fact, key))


@dataclass
class SampleResult:
    """A drawn sample: the CSV written and the draws in it."""

    path: Path
    design: str
    draws: list[designs.Draw]
    population: int


def write_sample(facts: Iterable[Fact], out: Path, *, n: int, design: str = "srs",
                 stratify: str | None = None, cluster: str = "subject",
                 cluster_size: int = designs.DEFAULT_CLUSTER_SIZE, seed: int = 0,
                 verdicts: Mapping[str, str] | None = None) -> SampleResult:
    """Draw ``n`` facts by a design and write the annotators' CSV (empty label column).

    ``facts`` may be any iterable (a lazy reader); it is read once. ``verdicts`` (a run's)
    allow stratifying by ``verdict``.
    """
    if design not in designs.DESIGNS:
        raise designs.DesignError(f"unknown design {design!r}; known: "
                                  f"{', '.join(designs.DESIGNS)}")
    if design == "stratified" and not stratify:
        raise designs.DesignError("a stratified design needs a key: --stratify predicate "
                                  "(or subject, object, verdict)")
    kept: dict[str, tuple[str, str, str, str]] = {}
    units = []
    for fact in facts:
        if fact.id in kept:
            raise designs.DesignError(f"fact id {fact.id!r} appears more than once")
        kept[fact.id] = (fact.subject, fact.predicate, fact.object, fact.readable)
        stratum = ""
        if stratify == "verdict":
            if verdicts is None:
                raise designs.DesignError("--stratify verdict needs a run (--run RUN)")
            stratum = verdicts.get(fact.id, "NA")
        elif stratify:
            stratum = key_of(fact, stratify)
        units.append(Unit(fact.id, stratum, key_of(fact, cluster) if design == "twcs" else ""))
    draws = designs.draw(units, n, design, seed, cluster_size)
    label = design_label(design, stratify if design == "stratified" else
                         (cluster if design == "twcs" else None))
    out.parent.mkdir(parents=True, exist_ok=True)
    text_out = io.StringIO()
    writer = csv.writer(text_out)
    writer.writerow(SAMPLE_COLUMNS)
    for item in draws:
        subject, predicate, obj, text = kept[item.fact_id]
        # Annotators open this in a spreadsheet: no triple value may run as a formula.
        writer.writerow([neutralise(v) for v in (item.fact_id, subject, predicate, obj, text)]
                        + ["", f"{item.weight:.6g}", item.stratum, item.cluster, label])
    write_text_atomic(out, text_out.getvalue())
    return SampleResult(out, label, draws, len(units))


def run_verdicts(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Read a run's verdicts; a run without any is an error."""
    read_run_info(run_dir, EstimateError)
    records = read_verdicts(run_dir)
    if not records:
        raise EstimateError(f"{run_dir}: the run has no verdicts ({VERDICTS} is missing or "
                            "empty); run `kgcheck run` or `kgcheck import` first")
    return records


@dataclass
class EstimateResult:
    """What ``estimate_run`` computed and wrote."""

    path: Path
    report: dict[str, Any]
    estimates: list[Interval]
    plots: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _strata_of_run(key: str, records: Mapping[str, dict[str, Any]],
                   facts: Sequence[Fact] | None) -> dict[str, str]:
    if key == "verdict":
        return {fid: str(r["label"]) for fid, r in records.items()}
    if facts is None:
        raise EstimateError(f"stratifying by {key} needs the run's facts")
    by_id = {f.id: f for f in facts}
    missing = [fid for fid in records if fid not in by_id]
    if missing:
        raise EstimateError(f"fact {missing[0]!r} of the run is not among its source's facts")
    return {fid: key_of(by_id[fid], key) for fid in records}


def _gold_draw(records: Mapping[str, dict[str, Any]], n: int, design: str, key: str | None,
               cluster: str, seed: int, facts: Sequence[Fact] | None,
               cluster_size: int) -> tuple[list[Labeled], dict[str, str] | None]:
    gold = {fid: r["gold"] for fid, r in records.items() if r.get("gold") in ("T", "F")}
    if not gold:
        raise EstimateError("--gold-sample needs gold labels, and no fact of the run has one")
    strata = _strata_of_run(key, records, facts) if key else None
    clusters = _strata_of_run(cluster, records, facts) if design == "twcs" else None
    units = [Unit(fid, strata[fid] if strata else "", clusters[fid] if clusters else "")
             for fid in gold]
    if design == "stratified":
        pooled = designs.pool_units(units, n)
        mapping = {u.fact_id: u.stratum for u in pooled}
        raw_to_pooled = {strata[u.fact_id]: u.stratum for u in pooled} if strata else {}
        # Facts without gold fall in their key's pooled stratum (or the pool of leftovers).
        strata = {fid: mapping.get(fid, raw_to_pooled.get(value, OTHER))
                  for fid, value in (strata or {}).items()}
        draws = designs.draw_stratified(pooled, n, np.random.default_rng(seed))
    else:
        draws = designs.draw(units, n, design, seed, cluster_size)
    labels = [Labeled(d.fact_id, gold[d.fact_id] == "T", d.stratum, d.cluster) for d in draws]
    return labels, strata


def _file_labels(path: Path, records: Mapping[str, dict[str, Any]], stratify: str | None,
                 facts_loader: Any, warnings: list[str]
                 ) -> tuple[list[Labeled], str, str | None, dict[str, str] | None, dict[str, Any]]:
    found = read_labels(path)
    for row in found.rows:
        if row.fact_id not in records:
            raise EstimateError(f"{row.where}: fact {row.fact_id!r} is not in the run")
    chosen = dict(Counter(row.design or "unknown" for row in found.rows))
    if needs_support_check(found.rows):
        found.rows = supporting_rows(str(path), found.rows, found.unlabeled, len(records),
                                     warnings)
        found.design = "srs"
    design, key = parse_design_label(found.design)
    if stratify and design == "srs":
        # Labels drawn at random, estimated by strata of the run (post-stratification).
        design, key = "stratified", stratify
    strata = None
    if design == "stratified":
        key = key or stratify
        if not key:
            raise EstimateError(f"{path}: a stratified sample needs its key (design column "
                                "'stratified:KEY', or --stratify KEY)")
        raw = _strata_of_run(key, records, facts_loader() if key != "verdict" else None)
        named = {row.stratum for row in found.rows if row.stratum}
        # A sample's strata may pool small ones into (other): map the run's facts alike.
        strata = {fid: (v if not named or v in named else OTHER) for fid, v in raw.items()}
    labels = [Labeled(row.fact_id, row.true,
                      (strata or {}).get(row.fact_id, row.stratum), row.cluster)
              for row in found.rows]
    if found.unlabeled:
        warnings.append(f"{path}: {found.unlabeled} rows without a label (idk/na/skip/empty) "
                        "are left out")
    info = {"file": str(path), "rows": sum(chosen.values()) + found.unlabeled,
            "usable": len(found.rows), "left_out": found.unlabeled, "chosen": chosen}
    return labels, design, key, strata, info


def estimated_population(run_dir: Path, run_size: int) -> dict[str, Any]:
    """Say whose accuracy the labels estimate: the KG a random sample came from, or the run's.

    Read from how ``run.json`` says the run chose its facts (``input.drawn``).
    """
    info = read_run_info(run_dir, EstimateError)
    name = str(info.get("dataset") or "the KG")
    drawn = (info.get("input") or {}).get("drawn") or {}
    how = drawn.get("how")
    facts = f"{run_size:,} facts"
    if how == "all":
        return {"of": "kg", "text": f"the KG {name} (the run checked all its {facts})"}
    if how == "sample":
        total = drawn.get("of")
        size = f" ({total:,} facts)" if isinstance(total, int) else ""
        return {"of": "kg", "text": f"the KG {name}{size}, from which the run checked a random "
                                    f"sample of {facts}"}
    why = {"first": "the first facts of the input (--limit)", "ids": "their ids (--ids)",
           "stratified": "strata (--stratify): not in proportion to the KG"}.get(
               str(how), "a way run.json does not record")
    return {"of": "run", "text": f"the {facts} the run checked, chosen by {why}; the estimate "
                                 f"does not extend to the rest of {name}"}


def estimate_run(run_dir: Path, *, labels: Path | None = None, gold_sample: int | None = None,
                 seed: int = 0, confidence: float = 0.95, stratify: str | None = None,
                 design: str = "srs", cluster: str = "subject",
                 cluster_size: int = designs.DEFAULT_CLUSTER_SIZE,
                 data: str | Path | None = None, plots: bool = True,
                 pricing: Pricing | None = None) -> EstimateResult:
    """Estimate a run's KG accuracy; write ``RUN/estimate.json`` and the figures."""
    check_confidence(confidence)
    run_dir = Path(run_dir)
    records = run_verdicts(run_dir)
    if (labels is None) == (gold_sample is None):
        raise EstimateError("give either --labels FILE (human labels) or --gold-sample N")
    warnings: list[str] = []
    facts_cache: list[list[Fact]] = []

    def facts_loader() -> list[Fact]:
        if not facts_cache:
            info = read_run_info(run_dir, EstimateError)
            facts_cache.append(checked_facts(run_dir, info, data, EstimateError))
        return facts_cache[0]

    if labels is not None:
        labeled, design, key, strata, label_info = _file_labels(
            Path(labels), records, stratify, facts_loader, warnings)
    else:
        assert gold_sample is not None
        key = stratify
        if design not in designs.DESIGNS:
            raise EstimateError(f"unknown design {design!r}; known: "
                                f"{', '.join(designs.DESIGNS)}")
        if stratify and design == "srs":
            design = "stratified"
        if design == "stratified" and not stratify:
            raise EstimateError("a stratified gold sample needs --stratify KEY")
        needs_facts = (stratify not in (None, "verdict")) or (
            design == "twcs" and cluster != "verdict")
        labeled, strata = _gold_draw(records, gold_sample, design, stratify, cluster, seed,
                                     facts_loader() if needs_facts else None, cluster_size)
        label_info = {"gold_sample": gold_sample, "seed": seed, "usable": len(labeled),
                      "left_out": 0}
    verdicts = {fid: str(r["label"]) for fid, r in records.items()}
    estimates = estimate_all(verdicts, labeled, confidence, design=design, strata=strata)
    golds = [r.get("gold") for r in records.values()]
    truth = (sum(g == "T" for g in golds) / len(golds)
             if all(g in ("T", "F") for g in golds) else None)
    report: dict[str, Any] = {
        "run": str(run_dir), "confidence": confidence,
        "population": estimated_population(run_dir, len(records)),
        "warnings": list(warnings),
        "design": design_label(design, key if design == "stratified" else
                               (cluster if design == "twcs" else None)),
        "labels": label_info,
        "estimates": [e.as_dict() for e in estimates],
        "true_accuracy": truth,
        "cost": cost_lines(run_dir, records, estimates, pricing),
        "na_handling": "NA and NEI verdicts score 0.5 in ppi and are left out of llm; rows "
                       "without a human label are left out and counted",
    }
    if truth is not None:
        for item in report["estimates"]:
            item["covers_truth"] = item["ci_low"] <= truth <= item["ci_high"]
    curve = width_curve(verdicts, labeled, confidence) if design == "srs" else []
    report["width_curve"] = curve
    out = run_dir / ESTIMATE
    write_json(out, report)
    drawn: list[Path] = []
    if plots:
        title = f"{run_dir.name}: {confidence:.0%} intervals"
        drawn += plot_intervals(report["estimates"], run_dir / "plots", truth=truth,
                                title=title)
        if curve:
            drawn += plot_width(curve, run_dir / "plots", title=f"{run_dir.name}: width")
    return EstimateResult(out, report, estimates, drawn, warnings)


def cost_lines(run_dir: Path, records: Mapping[str, dict[str, Any]],
               estimates: Sequence[Interval], pricing: Pricing | None = None) -> dict[str, Any]:
    """Sum up the audit's cost: model time, tokens (dollars where priced), human labels."""
    summary = read_summary(run_dir) or {}
    tokens_in = sum(r.get("tokens_in") or 0 for r in records.values())
    tokens_out = sum(r.get("tokens_out") or 0 for r in records.values())
    seconds = sum(r.get("seconds") or 0 for r in records.values())
    models = [str(m) for m in summary.get("models") or []]
    usd = cost_summary(records.values(), models, pricing)["cost_usd"] if models else None
    by_name = {e.estimator: e for e in estimates}
    human, ppi = by_name["human"], by_name["ppi"]
    return {
        "facts_checked": len(records), "model_seconds": round(seconds, 3),
        "tokens_in": tokens_in or None, "tokens_out": tokens_out or None, "usd": usd,
        "human_labels": human.n_labeled,
        "labels_to_halve_human": labels_to_halve(human),
        "labels_to_halve_ppi": labels_to_halve(ppi),
    }
