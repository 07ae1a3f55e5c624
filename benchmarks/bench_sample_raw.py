"""Sampling over raw lines: ``--sample 1000`` against a raw parse of the file, before and after.

Generates files of each ``--format`` (default 250,000 and 1,000,000 lines) in a temp
folder: ``nt``, N-Triples (facts of 50 predicates with IRIs, typed and language-tagged
literals, and an ``rdfs:label`` line for every tenth fact); ``jsonl``, ``csv`` and ``tsv``,
the same facts with an id and a label each (a CSV object in seven holding a comma, a TSV
one a tab, so quoted).
Then, each in a fresh process (so that peak RSS is its own), and all in this one run (the
machine is noisy: compare the ratios, not the seconds):

- ``raw_parse``: the yardstick, terms untouched: pyoxigraph parsing N-Triples, ``json.loads``
  of every JSON line, the csv module reading every row (with its delimiter);
- ``sample``: ``kgcheck.select_facts(FILE, sample=1000, seed=0)``, with the names;
- ``first_verdict``: ``kgcheck run --triples FILE --sample 1000`` (the CLI, startup
  included) against a stub Ollama server on loopback that answers at once
  (tests/support/stubs), timed from the start of the process to the first line of
  ``verdicts.jsonl`` (then the run is stopped), in wall-clock and in the run's CPU
  seconds (from /proc: steadier when other jobs share the cores);

each for the code of this tree ("after") and for the ``kgcheck`` package of ``--before REV``
("before", exported with ``git archive`` into the temp folder; the other top-level
packages are this tree's). Reports seconds, peak RSS (ru_maxrss) and the ratios
raw_parse / sample (goal: at least 1, i.e. sampling at least as fast as the raw parse) and
before / after, plus whether the two samples are the same facts. An N-Triples sample parses
every line (exact: the facts, ids and names of a whole read, a malformed line refused), so
it stays below the raw parse it includes.

    python benchmarks/bench_sample_raw.py [--format nt,jsonl,csv,tsv] [--lines 250000,1000000]
        [--before main]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SAMPLE = 1000


FORMATS = ("nt", "jsonl", "csv", "tsv")
TABLES = {".csv": ",", ".tsv": "\t"}


def generate(path: Path, lines: int) -> None:
    """Write ``lines`` lines of the file's format (its suffix)."""
    if path.suffix == ".nt":
        generate_nt(path, lines)
        return
    table = path.suffix in TABLES
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter=TABLES.get(path.suffix, ","), lineterminator="\n")
        if table:
            writer.writerow(["id", "subject", "predicate", "object", "label"])
        odd = "a tab\t" if path.suffix == ".tsv" else "a comma"
        for i in range(lines - table):
            obj = f"value number {i}" if i % 7 else f"value, with {odd} {i}"
            row = [f"f{i}", f"http://example.org/resource/E{i // 10}",
                   f"http://example.org/ontology/p{i % 50}", obj, "T" if i % 3 else "F"]
            if table:
                writer.writerow(row)
            else:
                fh.write(json.dumps(dict(zip(("id", "subject", "predicate", "object", "label"),
                                             row, strict=True))) + "\n")


def raw_parse(path: str) -> int:
    """Parse every line of a file, terms untouched; return how many records it holds."""
    import pyoxigraph as ox

    if path.endswith(".nt"):
        return sum(1 for _ in ox.parse(path=path, format=ox.RdfFormat.N_TRIPLES))
    with open(path, encoding="utf-8", newline="") as fh:
        if (suffix := Path(path).suffix) in TABLES:
            return sum(1 for _ in csv.reader(fh, delimiter=TABLES[suffix])) - 1
        return sum(1 for line in fh if json.loads(line))


def generate_nt(path: Path, lines: int) -> None:
    """Write ``lines`` lines of N-Triples: facts, and a label after every tenth fact."""
    written = i = 0
    with path.open("w", encoding="utf-8") as fh:
        while written < lines:
            subject = f"<http://example.org/resource/E{i // 10}>"
            if i % 3 == 0:
                obj = f'"{i}"^^<{XSD_INT}>'
            elif i % 3 == 1:
                obj = f'"value number {i}"@en'
            else:
                obj = f"<http://example.org/resource/E{(i * 7) % (lines // 10 + 1)}>"
            fh.write(f"{subject} <http://example.org/ontology/p{i % 50}> {obj} .\n")
            written += 1
            if i % 10 == 0 and written < lines:
                fh.write(f'{subject} <{LABEL}> "Entity {i // 10}" .\n')
                written += 1
            i += 1


def child(mode: str, path: str) -> dict:
    """Measure one thing in this process, after its imports: a raw parse or a sample."""
    import pyoxigraph  # noqa: F401 - imported before the clock starts

    if mode != "raw_parse":
        import kgcheck
        import kgcheck.api  # noqa: F401 - imported before the clock starts, as the CLI does
        import kgcheck.data.sampling as sampling
        import kgcheck.runs.plan  # noqa: F401
    imported_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start, cpu = time.perf_counter(), time.process_time()
    if mode == "raw_parse":
        out: dict = {"records": raw_parse(path)}
    else:
        facts = kgcheck.select_facts(path, sample=SAMPLE, seed=0)
        out = {"facts": len(facts), "named": sum(1 for f in facts if f.names),
               "ids": [f.id for f in facts], "code": sampling.__file__}
    return {**out, "seconds": round(time.perf_counter() - start, 3),
            "cpu_seconds": round(time.process_time() - cpu, 3),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "rss_after_imports_mb": round(imported_mb, 1)}


def measure(mode: str, path: Path, pythonpath: str | None) -> dict:
    """Run ``child`` in a fresh process with the given code first on the path."""
    env = {**os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    done = subprocess.run([sys.executable, __file__, "--child", mode, str(path)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} {path.name}: the measuring process failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def first_verdict(path: Path, url: str, out: Path, pythonpath: str | None) -> dict:
    """Time ``kgcheck run --sample`` from its start to the first verdict written."""
    env = {**os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    verdicts = out / "verdicts.jsonl"
    command = [sys.executable, "-c", "from kgcheck.cli import app; app()", "run",
               "--triples", str(path), "--sample", str(SAMPLE), "--seed", "0",
               "--strategy", "dka", "--model", "ollama:bench", "--base-url", url,
               "--out", str(out), "--no-progress", "--no-cache"]
    start = time.perf_counter()
    # Run from the temp folder: a working directory holding kgcheck/ would come first.
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, cwd=out.parent,
                               stderr=subprocess.PIPE, text=True)
    first = cpu = None
    while process.poll() is None:
        if verdicts.exists() and verdicts.stat().st_size > 0:
            first = time.perf_counter() - start
            cpu = cpu_seconds(process.pid)
            process.terminate()  # the rest of the run is not what is measured here
            process.wait()
            break
        time.sleep(0.005)
    if first is None:
        raise SystemExit(f"kgcheck run {path.name} wrote no verdict:\n{process.stderr.read()}")
    return {"first_verdict_seconds": round(first, 2),
            "first_verdict_cpu_seconds": round(cpu, 2) if cpu is not None else None}


def cpu_seconds(pid: int) -> float | None:
    """Return the CPU time (user + system) a running process has used, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--lines", default="250000,1000000")
    parser.add_argument("--format", default="nt", help="comma-separated: nt, jsonl, csv, tsv")
    parser.add_argument("--before", default="main", help="git revision of the old code")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    if unknown := [f for f in formats if f not in FORMATS]:
        parser.error(f"--format {', '.join(unknown)}: unknown; known: {', '.join(FORMATS)}")

    sys.path.insert(0, str(ROOT))
    from tests.support.stubs import Behaviour, OllamaStub

    revision = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.before],
                              capture_output=True, text=True, check=True).stdout.strip()
    rows = []
    with (tempfile.TemporaryDirectory() as tmp,
          OllamaStub(Behaviour(answer="T"), models=("bench",)) as stub):
        before = Path(tmp) / "before"
        before.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "kgcheck"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        show = "import kgcheck.cli; print(kgcheck.__file__)"
        imports = subprocess.run([sys.executable, "-c", show],
                                 env={**os.environ, "PYTHONPATH": str(before)}, cwd=tmp,
                                 capture_output=True, text=True, check=True).stdout
        if not imports.startswith(str(before)):
            raise SystemExit(f"the CLI run of the before code imports {imports}")
        for form, lines in [(f, int(n)) for f in formats for n in args.lines.split(",")]:
            path = Path(tmp) / f"kg-{lines}.{form}"
            generate(path, lines)
            raw = measure("raw_parse", path, None)
            after = measure("sample", path, None)
            old = measure("sample", path, str(before))
            if not old["code"].startswith(str(before)) or after["code"].startswith(str(before)):
                raise SystemExit("the before and after code were not the ones asked for")
            row = {
                "format": form, "lines": lines, "file_mb": round(path.stat().st_size / 1e6, 1),
                "raw_parse": {k: raw[k] for k in ("seconds", "cpu_seconds", "peak_rss_mb")},
                "sample_after": {k: after[k] for k in ("seconds", "cpu_seconds", "peak_rss_mb",
                                                       "rss_after_imports_mb", "facts",
                                                       "named")},
                "sample_before": {k: old[k] for k in ("seconds", "cpu_seconds", "peak_rss_mb",
                                                      "rss_after_imports_mb", "facts",
                                                      "named")},
                "same_sample_as_before": after["ids"] == old["ids"],
                "raw_parse_over_sample_after": round(raw["seconds"] / after["seconds"], 2),
                "raw_parse_over_sample_after_cpu": round(raw["cpu_seconds"]
                                                         / after["cpu_seconds"], 2),
                "raw_parse_over_sample_before": round(raw["seconds"] / old["seconds"], 2),
                "sample_speedup_before_over_after": round(old["seconds"] / after["seconds"], 2),
                "sample_speedup_before_over_after_cpu": round(old["cpu_seconds"]
                                                              / after["cpu_seconds"], 2),
                "lines_per_second_after": round(lines / after["seconds"]),
            }
            row["first_verdict_after"] = first_verdict(path, stub.url,
                                                       Path(tmp) / f"a{form}{lines}", None)
            row["first_verdict_before"] = first_verdict(path, stub.url,
                                                        Path(tmp) / f"b{form}{lines}", str(before))
            for unit in ("seconds", "cpu_seconds"):
                a, b = (row[k][f"first_verdict_{unit}"]
                        for k in ("first_verdict_after", "first_verdict_before"))
                row[f"first_verdict_speedup_before_over_after_{unit}"] = (
                    round(b / a, 2) if a and b else None)
            rows.append(row)
            path.unlink()
    summary = {}
    for form in formats:
        mine = [r for r in rows if r["format"] == form]
        largest = max(mine, key=lambda r: r["lines"])
        smallest = min(mine, key=lambda r: r["lines"])
        after = largest["first_verdict_after"]
        summary[form] = {
            "meets_speed_goal": largest["raw_parse_over_sample_after"] >= 1.0,
            # Wall clock on a shared machine; the CPU time of the run is the steadier figure.
            "meets_first_verdict_goal": (after["first_verdict_seconds"] or 99) < 3.0,
            "meets_first_verdict_goal_cpu": (after["first_verdict_cpu_seconds"] or 99) < 3.0,
            # Peak RSS of the largest file over the smallest: 1.0 is flat in the file's size.
            "peak_rss_growth_after": round(largest["sample_after"]["peak_rss_mb"]
                                           / smallest["sample_after"]["peak_rss_mb"], 2),
            "peak_rss_growth_before": round(largest["sample_before"]["peak_rss_mb"]
                                            / smallest["sample_before"]["peak_rss_mb"], 2),
        }
    print(json.dumps({
        "benchmark": "sample_raw",
        "python": platform.python_version(),
        "sample": SAMPLE,
        "before": revision,
        "model": "ollama stub on loopback (answers T at once)",
        "runs": rows,
        "goal_raw_parse_over_sample_at_least": 1.0,
        "goal_first_verdict_below_seconds": 3.0,
        "formats": summary,
        "load_average_1min": round(os.getloadavg()[0], 1),
    }, indent=1))

if __name__ == "__main__":
    main()
