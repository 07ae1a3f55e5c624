"""Coverage benchmark of the accuracy estimators (llm, human, ppi) on the study's datasets.

For every dataset (FactBench, YAGO, DBpedia), method (DKA, GIV-Z, GIV-F, RAG) and verdict
source (each of the four models, and the consensus with the cons-up judge), all replayed
from the recorded answers: draw ``n`` facts whose gold label is then used as a human label
(``--gold-sample n``), for n = 50, 100, 200, 400 and many seeds, and count how often each
estimator's interval holds the true accuracy (the share of true facts of the whole
dataset), and how wide it is. Facts a model has no recorded answer for are NA verdicts.

Goals: ppi coverage >= 0.93 at 95 % confidence; ppi no wider than human (within noise),
narrower where the verdicts are informative; and where llm coverage collapses.

Prints one JSON document: ``summary`` (per dataset, n and estimator: mean coverage, the
lowest coverage of any source, mean width), ``rows`` (every source and n).

    python benchmarks/bench_estimate.py [--seeds 200] [--sizes 50,100,200,400]
        [--design srs|stratified] [--datasets FactBench,YAGO,DBpedia]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections import defaultdict
from typing import Any

import numpy as np

from kgcheck.evals.accuracy.designs import Unit, draw_srs, draw_stratified, pool_units
from kgcheck.evals.accuracy.estimators import Labeled, estimate_all
from kgcheck.evals.study.recorded import load_recorded
from kgcheck.evals.study.tables import consensus_verdicts

ESTIMATORS = ("llm", "human", "ppi")


def sources(datasets: list[str]) -> list[dict[str, Any]]:
    """Every (dataset, method, verdict source) with its verdicts over the gold facts."""
    out = []
    for res in load_recorded(datasets=datasets):
        gold = {fid: g for fid, g in res.gold.items() if g is not None}
        for member in res.members:
            out.append({"dataset": res.dataset, "method": res.method, "source": member.model,
                        "gold": gold, "verdicts": {f: member.labels.get(f, "NA") for f in gold}})
        for judged in res.consensus:
            if judged.judge != "cons-up":
                continue
            labels = consensus_verdicts(res, judged)
            out.append({"dataset": res.dataset, "method": res.method,
                        "source": f"consensus ({judged.judge})", "gold": gold,
                        "verdicts": {f: labels.get(f, "NA") for f in gold}})
    return out


def measure(item: dict[str, Any], n: int, seeds: int, design: str,
            stream: int = 0) -> dict[str, Any]:
    """Coverage and mean width of each estimator over ``seeds`` draws of ``n`` gold labels.

    ``stream`` keeps the draws of different sources independent, so that the mean coverage
    over sources is not the coverage of one set of draws.
    """
    gold, verdicts = item["gold"], item["verdicts"]
    truth = float(np.mean([bool(g) for g in gold.values()]))
    ids = list(gold)
    strata = {fid: verdicts[fid] for fid in ids} if design == "stratified" else None
    units = [Unit(fid, strata[fid] if strata else "") for fid in ids]
    if strata:
        units = pool_units(units, n)
        strata = {u.fact_id: u.stratum for u in units}
    covered: dict[str, int] = defaultdict(int)
    widths: dict[str, list[float]] = defaultdict(list)
    fallbacks = 0
    for seed in range(seeds):
        rng = np.random.default_rng([stream, n, seed])
        draws = draw_stratified(units, n, rng) if strata else draw_srs(units, n, rng)
        labels = [Labeled(d.fact_id, bool(gold[d.fact_id]), d.stratum) for d in draws]
        for interval in estimate_all(verdicts, labels, 0.95, design=design, strata=strata):
            covered[interval.estimator] += interval.ci_low <= truth <= interval.ci_high
            widths[interval.estimator].append(interval.width)
            fallbacks += interval.estimator == "ppi" and interval.fallback is not None
    decided = [v for v in verdicts.values() if v in ("T", "F")]
    return {
        "dataset": item["dataset"], "method": item["method"], "source": item["source"],
        "n": n, "seeds": seeds, "true_accuracy": round(truth, 4),
        "llm_share": round(sum(v == "T" for v in decided) / max(1, len(decided)), 4),
        "na_verdicts": len(verdicts) - len(decided),
        **{f"{e}_coverage": covered[e] / seeds for e in ESTIMATORS},
        **{f"{e}_width": round(float(np.mean(widths[e])), 4) for e in ESTIMATORS},
        "ppi_fallback_share": fallbacks / seeds,
    }


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per dataset, n and estimator: mean and lowest coverage, mean width."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["dataset"], row["n"])].append(row)
    out = []
    for (dataset, n), items in groups.items():
        entry: dict[str, Any] = {"dataset": dataset, "n": n, "sources": len(items)}
        for e in ESTIMATORS:
            cov = [r[f"{e}_coverage"] for r in items]
            entry[f"{e}_coverage_mean"] = round(float(np.mean(cov)), 4)
            entry[f"{e}_coverage_min"] = round(float(np.min(cov)), 4)
            entry[f"{e}_width_mean"] = round(float(np.mean([r[f"{e}_width"] for r in items])), 4)
        entry["ppi_narrower_share"] = round(float(np.mean(
            [r["ppi_width"] < r["human_width"] for r in items])), 4)
        entry["ppi_width_vs_human"] = round(entry["ppi_width_mean"] / entry["human_width_mean"],
                                            4)
        out.append(entry)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--sizes", default="50,100,200,400")
    parser.add_argument("--design", choices=("srs", "stratified"), default="srs")
    parser.add_argument("--datasets", default="FactBench,YAGO,DBpedia")
    args = parser.parse_args()
    started = time.perf_counter()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = [measure(item, n, args.seeds, args.design, stream)
            for stream, item in enumerate(sources(args.datasets.split(","))) for n in sizes]
    print(json.dumps({
        "benchmark": "estimate_coverage", "confidence": 0.95, "design": args.design,
        "seeds": args.seeds, "sizes": sizes, "machine": platform.machine(),
        "seconds": round(time.perf_counter() - started, 1),
        "summary": summarise(rows), "rows": rows,
    }, indent=1))


if __name__ == "__main__":
    main()
