"""`make bench`: a failing script fails it; one without its data says so and is skipped."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


def _script(folder: Path, name: str, status: int) -> str:
    path = folder / name
    path.write_text(f"import sys\nprint('{{\"benchmark\": \"{name}\"}}')\nsys.exit({status})\n")
    return str(path)


def _run_all(*scripts: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH / "run_all.py"), *scripts],
                          capture_output=True, text=True, timeout=60, check=False)


def test_one_failing_script_fails_the_whole_run(tmp_path: Path) -> None:
    done = _run_all(_script(tmp_path, "bench_ok.py", 0), _script(tmp_path, "bench_bad.py", 1),
                    _script(tmp_path, "bench_absent.py", 77), _script(tmp_path, "bench_z.py", 0))
    assert done.returncode == 1
    assert "bench: 2 ran, 1 skipped, 1 failed" in done.stdout
    assert "failed: bench_bad.py (exit 1)" in done.stdout
    assert "skipped: bench_absent.py" in done.stdout
    assert '"benchmark": "bench_z.py"' in done.stdout  # the run went on after the failure


def test_skipped_scripts_do_not_fail_the_run(tmp_path: Path) -> None:
    done = _run_all(_script(tmp_path, "bench_ok.py", 0), _script(tmp_path, "bench_absent.py", 77))
    assert done.returncode == 0 and "bench: 1 ran, 1 skipped, 0 failed" in done.stdout


def test_the_makefile_runs_every_benchmark_through_run_all() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = makefile[makefile.index("\nbench:"):].split("\n\n")[0]
    assert "benchmarks/run_all.py benchmarks/bench_*.py" in target
    assert "; done" not in target


@pytest.mark.parametrize(("script", "needs"), [
    ("bench_rag_index.py", "rag_dataset/yago/"), ("bench_rag_quality.py", "rag_dataset/yago/"),
    ("bench_rag_run.py", "rag_dataset/yago/"), ("bench_reproduce.py", "--data DIR")])
def test_a_benchmark_without_the_studys_data_prints_skipped_and_how_to_get_it(
        tmp_path: Path, script: str, needs: str) -> None:
    # A checkout with no ../shared beside it: the scripts' default data is absent.
    copy = tmp_path / "checkout" / "benchmarks"
    copy.mkdir(parents=True)
    for name in (script, "rag_corpus.py"):
        shutil.copy(BENCH / name, copy / name)
    done = subprocess.run([sys.executable, str(copy / script)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 77, done.stderr
    record = json.loads(done.stdout)
    assert "github.com/FactCheck-AI/FactCheck" in record["skipped"]
    assert needs in record["skipped"] and "Traceback" not in done.stderr
