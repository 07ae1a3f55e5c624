"""Whole-KG runs in flat memory: peak RSS of a full run against the number of facts.

Generates N-Triples files (facts of 50 predicates, an ``rdfs:label`` line for every tenth
fact) in a temp folder and measures, each in a fresh ``kgcheck run`` process (the CLI,
``--no-cache --no-progress --concurrency 16``), against a stub Ollama server in its own
process that answers at once:

- ``full``: a DKA run over every fact of files of ``--facts`` sizes (default 20,000 and
  100,000): peak RSS (the process's own, from ``wait4``), wall and CPU seconds, CPU ms per
  fact; for the code of this tree and, with ``--before REV``, for the ``kgcheck`` package of
  that revision (exported with ``git archive``; the other top-level packages are this
  tree's). Goal: peak RSS grows by at most 30 MB from the smallest to the largest file.
- ``resume_1m`` (``--million``): a run over a 1,000,000-fact file whose folder already
  holds verdicts for all but the last 1,000 facts: the run is started for real, killed
  (kill -9) once ``run.json`` and its first verdict are written, and the other verdicts are
  appended with kgcheck's own record builder (the model's answer ``T``, as the stub's);
  then ``kgcheck run --resume`` streams the file, indexes the 999,000 verdicts on disk,
  checks the last 1,000 facts and writes the summary over all 1,000,000. Goal: peak RSS
  under 300 MB.

Prints one JSON document. The machine has 2 shared cores: compare within one run.

    python benchmarks/bench_flat_memory.py [--facts 20000,100000] [--before REV] [--million]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"


def generate(path: Path, facts: int) -> None:
    """Write ``facts`` N-Triples facts, with a label line after every tenth."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(facts):
            subject = f"<http://example.org/resource/E{i}>"
            fh.write(f"{subject} <http://example.org/ontology/p{i % 50}> "
                     f'"value number {i}"@en .\n')
            if i % 10 == 0:
                fh.write(f'{subject} <{LABEL}> "Entity {i}" .\n')


def command(path: Path, url: str, out: Path, *extra: str) -> list[str]:
    """Return the ``kgcheck run`` command line over a whole file."""
    return [sys.executable, "-c", "from kgcheck.cli import app; app()", "run",
            "--triples", str(path), "--strategy", "dka", "--model", "ollama:bench",
            "--base-url", url, "--out", str(out), "--no-progress", "--no-cache",
            "--concurrency", "16", *extra]


def measured(cmd: list[str], env: dict[str, str], cwd: Path) -> dict:
    """Run ``cmd`` to its end; return its wall and CPU seconds and its own peak RSS."""
    start = time.perf_counter()
    process = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[3:6])} failed ({process.returncode}):\n{stderr}")
    return {"seconds": round(time.perf_counter() - start, 2),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def full_run(path: Path, facts: int, url: str, tmp: Path, pythonpath: str | None) -> dict:
    """Measure one full run over ``path``."""
    env = {**os.environ, "PYTHONPATH": pythonpath or ""}
    out = tmp / f"run-{facts}-{'before' if pythonpath else 'after'}"
    found = measured(command(path, url, out), env, tmp)
    summary = json.loads((out / "summary.json").read_text())
    if summary["n"] != facts or summary["errors"]:
        raise SystemExit(f"{out}: {summary['n']} verdicts, {summary['errors']} errors")
    return {**found, "cpu_ms_per_fact": round(1000 * found["cpu_seconds"] / facts, 2),
            "facts_per_second": round(facts / found["seconds"], 1)}


def resume_million(tmp: Path, url: str, left: int = 1000) -> dict:
    """Measure a resume of a 1,000,000-fact run with all but ``left`` facts done."""
    from kgcheck.api import plan_run
    from kgcheck.data.runfolder import VERDICTS
    from kgcheck.runs.runner import record_of

    facts = 1_000_000
    path = tmp / "kg-1m.nt"
    generate(path, facts)
    out = tmp / "run-1m"
    env = {**os.environ, "PYTHONPATH": ""}
    process = subprocess.Popen(command(path, url, out), env=env, cwd=tmp,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    verdicts = out / VERDICTS
    while process.poll() is None and not (verdicts.exists() and verdicts.stat().st_size):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    info = json.loads((out / "run.json").read_text())
    done = {json.loads(line)["fact_id"] for line in verdicts.read_text().splitlines()}
    plan = plan_run(triples=path, model="ollama:bench", base_url=url)
    if plan.info.input["sha256"] != info["input"]["sha256"]:
        raise SystemExit("the plan's fingerprint is not the run's")
    started = time.perf_counter()
    with verdicts.open("a", encoding="utf-8") as fh:
        for n, fact in enumerate(plan.facts):
            if n >= facts - left:
                break
            if fact.id in done:
                continue
            verdict = {"fact_id": fact.id, "label": "T", "method": "DKA",
                       "model": "ollama:bench", "raw": "T", "tokens_in": 26, "tokens_out": 2,
                       "seconds": 0.002}
            fh.write(json.dumps(record_of(fact, verdict, info["run_id"])) + "\n")
    written = time.perf_counter() - started
    found = measured(command(path, url, out, "--resume"), env, tmp)
    summary = json.loads((out / "summary.json").read_text())
    if summary["n"] != facts:
        raise SystemExit(f"{out}: {summary['n']} verdicts, not {facts}")
    return {"facts": facts, "done_before": facts - left,
            "ran_this_time": summary["ran_this_time"], "prepare_seconds": round(written, 1),
            **found}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--facts", default="20000,100000")
    parser.add_argument("--before", default=None, help="git revision of the old code")
    parser.add_argument("--million", action="store_true", help="add the 1,000,000 resume")
    args = parser.parse_args()
    sizes = [int(n) for n in args.facts.split(",")]
    sys.path.insert(0, str(ROOT))
    from tests.support.stubs.process import start_stub_process

    stub, url = start_stub_process("tests.support.stubs", "ollama", "--answer", "T",
                                   "--models", "bench")
    rows = []
    try:
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            before = None
            if args.before:
                before = tmp / "before"
                before.mkdir()
                archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before,
                                          "kgcheck"], capture_output=True, check=True).stdout
                subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
            for facts in sizes:
                path = tmp / f"kg-{facts}.nt"
                generate(path, facts)
                row = {"facts": facts, "after": full_run(path, facts, url, tmp, None)}
                if before is not None:
                    row["before"] = full_run(path, facts, url, tmp, str(before))
                rows.append(row)
                path.unlink()
            million = resume_million(tmp, url) if args.million else None
    finally:
        stub.terminate()
        stub.wait()
    first, last = rows[0], rows[-1]
    growth = round(last["after"]["peak_rss_mb"] - first["after"]["peak_rss_mb"], 1)
    report = {
        "benchmark": "flat_memory",
        "python": platform.python_version(),
        "model": "ollama stub in its own process on loopback (answers T at once)",
        "before": args.before,
        "runs": rows,
        f"peak_rss_growth_mb_{first['facts']}_to_{last['facts']}_after": growth,
        "goal_growth_at_most_mb": 30,
        "meets_growth_goal": growth <= 30,
        "load_average_1min": round(os.getloadavg()[0], 1),
        "ru_maxrss_self_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if args.before:
        report[f"peak_rss_growth_mb_{first['facts']}_to_{last['facts']}_before"] = round(
            last["before"]["peak_rss_mb"] - first["before"]["peak_rss_mb"], 1)
    if million is not None:
        report["resume_1m"] = million
        report["goal_1m_peak_rss_below_mb"] = 300
        report["meets_1m_goal"] = million["peak_rss_mb"] < 300
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
