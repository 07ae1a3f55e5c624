"""The batch runner: verdicts stream to disk, a killed run resumes without loss or duplicates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kgcheck.data.datasets import load_facts
from kgcheck.data.runfolder import RunError, read_verdicts, verdict_files
from kgcheck.graphs.strategies.dka import DKAContext, builder
from kgcheck.runs.runner import RunInfo, RunWarning, check_facts
from tests.conftest import ROOT


def _invoker(model: str):
    graph = builder.compile()
    context = DKAContext(model=model)

    async def invoke(fact):
        return await graph.ainvoke({"fact": fact.as_input()}, context=context)

    return invoke


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_run_writes_every_verdict_and_a_summary(tmp_path) -> None:
    facts = load_facts("yago")[:40]
    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=["replay:gemma2:9b"])
    result = await check_facts(facts, _invoker("replay:gemma2:9b"), info, tmp_path,
                             concurrency=4, show_progress=False)
    lines = _lines(tmp_path / "verdicts.jsonl")
    assert sorted(r["fact_id"] for r in lines) == sorted(f.id for f in facts)
    assert all(r["gold"] in ("T", "F") and r["model"] == "replay:gemma2:9b" for r in lines)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary == result.summary
    for key in ("dataset", "method", "models", "n", "f1_true", "f1_false", "invalid", "seconds",
                "facts_per_second"):
        assert key in summary
    assert summary["n"] == 40


async def test_existing_run_needs_resume_or_fresh_and_must_match(tmp_path) -> None:
    facts = load_facts("yago")[:5]
    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=["replay:gemma2:9b"])
    await check_facts(facts, _invoker("replay:gemma2:9b"), info, tmp_path, show_progress=False)
    with pytest.raises(RunError, match="already holds 5 verdicts: pass resume=True"):
        await check_facts(facts, _invoker("replay:gemma2:9b"), info, tmp_path, show_progress=False)
    other = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=["replay:mistral:7b"])
    with pytest.raises(RunError, match="holds a different run.*models"):
        await check_facts(facts, _invoker("replay:mistral:7b"), other, tmp_path, resume=True,
                        show_progress=False)
    fresh = await check_facts(facts, _invoker("replay:mistral:7b"), other, tmp_path, fresh=True,
                            show_progress=False)
    assert fresh.summary["n"] == 5


async def test_resume_retries_errors_and_skips_a_torn_line(tmp_path) -> None:
    facts = load_facts("yago")[:6]
    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=["replay:gemma2:9b"])
    await check_facts(facts[:4], _invoker("replay:gemma2:9b"), info, tmp_path, show_progress=False)
    path = tmp_path / "verdicts.jsonl"
    records = _lines(path)
    records[0]["error"] = "ConnectError: refused"
    records[0]["label"] = "NA"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"fact_id": "torn", "la')
    calls: list[str] = []
    inner = _invoker("replay:gemma2:9b")

    async def counting(fact):
        calls.append(fact.id)
        return await inner(fact)

    with pytest.warns(RunWarning, match="line 5: incomplete or malformed JSON"):
        result = await check_facts(facts, counting, info, tmp_path, resume=True,
                                 show_progress=False)
    assert sorted(calls) == sorted([records[0]["fact_id"], facts[4].id, facts[5].id])
    lines = _lines(path)
    assert sorted(r["fact_id"] for r in lines) == sorted(f.id for f in facts)
    assert result.summary["errors"] == 0


def _cli_run(out: Path, limit: int, concurrency: int, latency: float) -> list[str]:
    return [sys.executable, "-m", "kgcheck.cli", "run", "--dataset", "yago", "--limit",
            str(limit), "--concurrency", str(concurrency), "--replay-latency", str(latency),
            "--out", str(out), "--no-progress"]


CLI_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _start_and_stop(cmd: list[str], verdicts: Path, after: int, sig: int,
                    env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a run, send ``sig`` once ``after`` verdicts are on disk; return the process."""
    # A child inherits an ignored SIGINT from a background shell; restore the default.
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env or CLI_ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if written_lines(verdicts) >= after:
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    return proc


def kill_and_resume(cmd: list[str], verdicts: Path, *, after: int, total: int,
                    env: dict[str, str] | None = None, timeout: float = 120,
                    before_resume: Callable[[], None] | None = None) -> int:
    """Kill -9 a run once ``after`` verdicts are written, resume it; return how many were.

    ``verdicts`` is a verdicts file, or a run folder (its verdict files: a sharded run's).
    """
    proc = _start_and_stop(cmd, verdicts, after=after, sig=signal.SIGKILL, env=env)
    proc.communicate(timeout=10)
    written = len(read_verdicts(verdicts))
    assert after <= written < total, "the run should have been killed part way"
    if before_resume is not None:
        before_resume()
    done = subprocess.run(cmd + ["--resume"], cwd=ROOT, env=env or CLI_ENV,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return written


def written_lines(verdicts: Path) -> int:
    """Count the lines of a verdicts file, or of a run folder's verdict files."""
    paths = verdict_files(verdicts) if verdicts.is_dir() else [verdicts]
    return sum(len(p.read_bytes().splitlines()) for p in paths if p.exists())


def test_killed_run_resumes_with_exactly_one_verdict_per_fact(tmp_path) -> None:
    out = tmp_path / "run"
    cmd = _cli_run(out, limit=120, concurrency=4, latency=0.05)
    verdicts = out / "verdicts.jsonl"
    written = kill_and_resume(cmd, verdicts, after=20, total=120)
    lines = _lines(verdicts)
    ids = [r["fact_id"] for r in lines]
    assert len(ids) == len(set(ids)) == 120
    assert ids[:written] == list(read_verdicts(verdicts))[:written]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 120
    assert summary["ran_this_time"] == 120 - written


def test_ctrl_c_keeps_verdicts_and_says_how_to_resume(tmp_path) -> None:
    out = tmp_path / "run"
    verdicts = out / "verdicts.jsonl"
    proc = _start_and_stop(_cli_run(out, limit=60, concurrency=2, latency=0.2), verdicts,
                           after=4, sig=signal.SIGINT)
    output, _ = proc.communicate(timeout=30)
    kept = len(read_verdicts(verdicts))
    assert proc.returncode == 130
    assert f"interrupted: {kept} verdicts are kept" in " ".join(output.split())
    assert "--resume" in output and "Traceback" not in output
    assert 4 <= kept < 60


async def test_two_runs_cannot_share_a_folder(tmp_path) -> None:
    from kgcheck.data.runfolder import exclusive as _exclusive

    facts = load_facts("yago")[:2]
    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=["replay:gemma2:9b"])
    with _exclusive(tmp_path):
        with pytest.raises(RunError, match="another kgcheck run is writing to"):
            await check_facts(facts, _invoker("replay:gemma2:9b"), info, tmp_path,
                            show_progress=False)
    result = await check_facts(facts, _invoker("replay:gemma2:9b"), info, tmp_path,
                             show_progress=False)
    assert result.summary["n"] == 2


def _count_reads(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[Path]:
    """Count the times ``path`` is read through the run folder's reader, from now on."""
    from kgcheck.data import runfolder

    reads: list[Path] = []
    scan = runfolder.scan_verdicts

    def counted(file: Path):
        if Path(file).resolve() == path.resolve():
            reads.append(Path(file))
        return scan(file)

    monkeypatch.setattr(runfolder, "scan_verdicts", counted)
    return reads


async def test_the_summary_and_the_outcomes_read_the_verdicts_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kgcheck.data.facts import Fact
    from kgcheck.runs.outcomes import RunOutcomes

    recorded = load_facts("yago")[:4]
    # Outcomes worth counting: a fact the recordings lack (an error) and a dirty row.
    unknown = Fact(id="not-recorded", dataset="YAGO", subject="Nobody", predicate="knows",
                   object="Nothing")
    dirty = Fact.from_triple("dirty", "YAGO", ["Paris", "capitalOf", None])
    info = RunInfo(dataset="YAGO", strategy="dka", method="DKA", models=["replay:gemma2:9b"])
    reads = _count_reads(monkeypatch, tmp_path / "verdicts.jsonl")
    result = await check_facts([*recorded, unknown, dirty], _invoker("replay:gemma2:9b"), info,
                               tmp_path, show_progress=False)
    outcomes = result.outcome_counts()
    assert len(reads) == 1  # the summary and the outcomes, in one pass
    monkeypatch.undo()
    assert outcomes == RunOutcomes.of(read_verdicts(tmp_path).values())
    assert (outcomes.facts, outcomes.failed, outcomes.skipped) == (6, 1, 1)
    assert result.summary["errors"] == 1 and result.summary["skipped"] == 1


def test_a_local_run_reads_its_verdicts_once_at_the_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from kgcheck.cli import app

    out = tmp_path / "run"
    reads = _count_reads(monkeypatch, out / "verdicts.jsonl")
    result = CliRunner().invoke(app, ["run", "--dataset", "yago", "--limit", "5", "--model",
                                      "replay:gemma2:9b", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert len(reads) == 1
