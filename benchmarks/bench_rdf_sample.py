"""RDF sampling benchmark: peak memory and time to the first verdict on large N-Triples files.

Generates N-Triples files of 250,000, 500,000 and 1,000,000 triples (50 predicates, IRIs,
typed and language-tagged literals, an rdfs:label per subject) in a temp folder, then, in a
fresh process per file, does what ``kgcheck run --triples FILE --sample 1000 --seed 0``
does through the Python API: read and sample the file in one pass (``plan_run``), then run
DKA over the sample (``execute``) against a stub Ollama server on loopback (tests/support/stubs:
the real Ollama wire protocol, answering at once). A user's file has no recorded answers,
so replay cannot serve it; the stub makes the model's time near zero, so the figures are
kgcheck's own: reading, sampling, naming, the graph and the runner.

Reports per size: seconds to read and sample, seconds to the first verdict (the first line
in verdicts.jsonl, from the start of reading), seconds for all 1,000 verdicts, peak RSS of
the process (ru_maxrss), and seconds per million triples for the first verdict, both wall
clock and CPU time of the measuring process (robust when other jobs share the cores). Goals: peak
RSS below 300 MB on 1,000,000 triples; time to first verdict linear in the file's size
(seconds per million about constant across sizes).

    python benchmarks/bench_rdf_sample.py [--sizes 250000,500000,1000000] [--sample 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"


def generate(path: Path, triples: int) -> None:
    """Write ``triples`` facts (plus one label per subject) as N-Triples."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(triples):
            subject = f"<http://example.org/resource/E{i // 10}>"
            predicate = f"<http://example.org/ontology/p{i % 50}>"
            if i % 3 == 0:
                obj = f'"{i}"^^<{XSD_INT}>'
            elif i % 3 == 1:
                obj = f'"value number {i}"@en'
            else:
                obj = f"<http://example.org/resource/E{(i * 7) % (triples // 10 + 1)}>"
            fh.write(f"{subject} {predicate} {obj} .\n")
            if i % 10 == 0:
                fh.write(f'{subject} <{LABEL}> "Entity {i // 10}" .\n')


def child(path: str, sample: int, url: str, out: str) -> dict:
    """Read, sample and check in this process; return timings and peak RSS."""
    import kgcheck.api as api

    baseline_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    verdicts = Path(out) / "verdicts.jsonl"
    first: list[tuple[float, float]] = []
    done = threading.Event()

    def watch(start: float) -> None:
        while not done.is_set():
            if verdicts.exists() and verdicts.stat().st_size > 0:
                first.append((time.perf_counter() - start, time.process_time() - cpu_start))
                return
            time.sleep(0.002)

    start, cpu_start = time.perf_counter(), time.process_time()
    watcher = threading.Thread(target=watch, args=(start,), daemon=True)
    watcher.start()
    plan = api.plan_run(triples=path, sample=sample, seed=0, strategy="dka",
                        model="ollama:bench", out=out, settings={"base_url": url})
    read_seconds = time.perf_counter() - start
    read_cpu = time.process_time() - cpu_start
    result = asyncio.run(api.execute(plan, concurrency=4))
    total = time.perf_counter() - start
    done.set()
    watcher.join()
    return {
        "facts_sampled": len(plan.facts),
        "named_facts": sum(1 for f in plan.facts if f.names),
        "verdicts": result.summary["n"],
        "errors": result.summary["errors"],
        "read_and_sample_seconds": round(read_seconds, 2),
        "read_and_sample_cpu_seconds": round(read_cpu, 2),
        "first_verdict_seconds": round(first[0][0], 2) if first else None,
        "first_verdict_cpu_seconds": round(first[0][1], 2) if first else None,
        "all_verdicts_seconds": round(total, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_after_imports_mb": round(baseline_kb / 1024, 1),
    }


def linear_fit(xs: list[float], ys: list[float]) -> dict[str, float]:
    """Fit ``y = intercept + slope * x`` by least squares (x in millions of triples)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)
    return {"seconds_per_million": round(slope, 2), "fixed_seconds": round(my - slope * mx, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--sizes", default="250000,500000,1000000")
    parser.add_argument("--sample", type=int, default=1000)
    parser.add_argument("--child", nargs=3, metavar=("FILE", "URL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.sample, args.child[1], args.child[2])))
        return

    sys.path.insert(0, str(ROOT))
    from tests.support.stubs import Behaviour, OllamaStub

    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with (tempfile.TemporaryDirectory() as tmp,
          OllamaStub(Behaviour(answer="T"), models=("bench",)) as stub):
        for size in sizes:
            path = Path(tmp) / f"kg-{size}.nt"
            started = time.perf_counter()
            generate(path, size)
            generated = time.perf_counter() - started
            out = Path(tmp) / f"run-{size}"
            done = subprocess.run(
                [sys.executable, __file__, "--sample", str(args.sample), "--child", str(path),
                 stub.url, str(out)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"size {size}: the measuring process failed:\n{done.stderr}")
            row = {"triples": size, "file_mb": round(path.stat().st_size / 1e6, 1),
                   "generate_seconds": round(generated, 2),
                   **json.loads(done.stdout.strip().splitlines()[-1])}
            for key in ("first_verdict_seconds", "first_verdict_cpu_seconds"):
                if row[key] is not None:
                    row[f"{key}_per_million"] = round(row[key] / (size / 1e6), 2)
            rows.append(row)
            path.unlink()
    per_million = [r.get("first_verdict_seconds_per_million") for r in rows]
    cpu_per_million = [r.get("first_verdict_cpu_seconds_per_million") for r in rows]
    largest = max(rows, key=lambda r: r["triples"])
    print(json.dumps({
        "benchmark": "rdf_sample",
        "python": platform.python_version(),
        "sample": args.sample,
        "model": "ollama stub on loopback (answers T at once)",
        "runs": rows,
        "goal_peak_rss_below_mb": 300,
        "peak_rss_mb_at_largest": largest["peak_rss_mb"],
        "meets_rss_goal": largest["peak_rss_mb"] < 300,
        "first_verdict_seconds_per_million": per_million,
        "first_verdict_cpu_seconds_per_million": cpu_per_million,
        # max / min of the per-million figures: 1.0 is perfectly linear. Wall-clock time
        # on a shared machine is noisy; CPU time (of the measuring process) is not.
        "linearity_spread": (round(max(per_million) / min(per_million), 2)
                             if all(per_million) else None),
        "cpu_linearity_spread": (round(max(cpu_per_million) / min(cpu_per_million), 2)
                                 if all(cpu_per_million) else None),
        # The first verdict also pays fixed costs (the graph and model imports, the first
        # call): a line with an intercept describes it better than seconds / size.
        "first_verdict_fit": linear_fit([r["triples"] / 1e6 for r in rows],
                                        [r["first_verdict_seconds"] for r in rows])
        if len(rows) > 1 and all(per_million) else None,
        "first_verdict_cpu_fit": linear_fit([r["triples"] / 1e6 for r in rows],
                                            [r["first_verdict_cpu_seconds"] for r in rows])
        if len(rows) > 1 and all(cpu_per_million) else None,
    }, indent=1))


if __name__ == "__main__":
    main()
