"""A full disk while verdicts are written: one clear line, and an exact resume afterwards.

The disk is filled for real from the kernel's point of view: the run's process gets a
file-size limit (RLIMIT_FSIZE), so its writes past it fail with EFBIG as on a full disk.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
LIMIT = 20_000  # bytes: room for a few dozen verdicts


def _cmd(out: Path) -> list[str]:
    return [sys.executable, "-m", "kgcheck.cli", "run", "--dataset", "yago", "--limit", "150",
            "--concurrency", "4", "--out", str(out), "--no-progress"]


def _limited() -> None:
    # Python ignores SIGXFSZ, so a write past the limit fails with EFBIG instead of killing.
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]


def test_a_full_disk_stops_with_one_line_and_the_resume_is_exact(tmp_path) -> None:
    out = tmp_path / "run"
    full = subprocess.run(_cmd(out), cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=120, preexec_fn=_limited)
    assert full.returncode == 2, full.stdout + full.stderr
    message = " ".join(full.stderr.split())
    assert "Traceback" not in full.stderr and "cannot write" in message
    assert "verdicts.jsonl" in message and "--resume" in message
    assert len(full.stderr.strip().splitlines()) <= 3  # one message (wrapped at most)
    written = _records(out)  # every line whole: the failed write left nothing behind
    assert 0 < len(written) < 150
    # Space freed: the resume completes the run with exactly one verdict per fact.
    done = subprocess.run([*_cmd(out), "--resume"], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    records = _records(out)
    ids = [r["fact_id"] for r in records]
    assert len(ids) == len(set(ids)) == 150
    assert records[:len(written)] == written
    clean = tmp_path / "clean"
    subprocess.run(_cmd(clean), cwd=ROOT, env=ENV, check=True, capture_output=True, timeout=120)
    labels = {r["fact_id"]: r["label"] for r in records}
    assert labels == {r["fact_id"]: r["label"] for r in _records(clean)}
