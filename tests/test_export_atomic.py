"""An export is whole or absent: a full disk or kill -9 part way keeps the old file."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_runs import cli_run
from tests.conftest import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
KG = "subject,predicate,object\n" + "".join(
    f"Town{i},locatedIn,Region{i}\n" for i in range(30))


@pytest.fixture
def run_dir(tmp_path: Path, scripted) -> Path:
    kg = tmp_path / "kg.csv"
    kg.write_text(KG)
    return cli_run(kg, scripted("atomic", ["T", "F"] * 15), tmp_path / "run",
                   "--concurrency", "1")


def _export(run_dir: Path, fmt: str, target: Path, *extra: str,
            limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def limited() -> None:
        # Python ignores SIGXFSZ: a write past the limit fails with EFBIG, as on a full disk.
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, "-m", "kgcheck.cli", "export", str(run_dir),
                           "--format", fmt, "--out", str(target), *extra], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120, preexec_fn=limited)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "nt", "ttl"])
def test_a_full_disk_keeps_the_old_export_and_says_so_in_one_line(run_dir: Path,
                                                                  fmt: str) -> None:
    target = run_dir.parent / f"exp.{fmt}"
    assert _export(run_dir, fmt, target, "--only", "T").returncode == 0
    old = target.read_bytes()
    full = _export(run_dir, fmt, run_dir.parent / "probe", limit=None)
    assert full.returncode == 0 and len((run_dir.parent / "probe").read_bytes()) > len(old)
    failed = _export(run_dir, fmt, target, limit=len(old) + 16)
    assert failed.returncode == 2, failed.stderr
    assert "Traceback" not in failed.stderr and len(failed.stderr.strip().splitlines()) <= 2
    message = " ".join(failed.stderr.split())
    assert f"{target}: cannot write the export (File too large)" in message
    assert target.read_bytes() == old
    assert sorted(p.name for p in target.parent.iterdir() if p.name.startswith(".exp")) == []


def test_kill_9_part_way_keeps_the_old_export(run_dir: Path) -> None:
    target = run_dir.parent / "exp.ttl"
    assert _export(run_dir, "ttl", target).returncode == 0
    old = target.read_bytes()
    # The export is killed for real after it wrote part of the new file.
    script = (
        "import os, signal, sys\n"
        "import evals.export as export\n"
        "write = export.write_rows\n"
        "def dying(rows, fmt, sink, **kw):\n"
        "    sink.write(b'@prefix broken'); sink.flush(); os.fsync(sink.fileno())\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "export.write_rows = dying\n"
        f"export.export_run({str(run_dir)!r}, 'ttl', {str(target)!r})\n")
    killed = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV, timeout=120)
    assert killed.returncode == -9
    assert target.read_bytes() == old
    # The killed export could not remove its temporary file: the next export does.
    assert len(list(target.parent.glob(".exp.ttl.*.tmp"))) == 1
    assert _export(run_dir, "ttl", target, "--only", "T").returncode == 0
    assert target.read_bytes() != old
    assert list(target.parent.glob(".exp.ttl.*.tmp")) == []
