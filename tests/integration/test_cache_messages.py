"""The answer cache speaks in plain lines: where it is, once, and what went wrong with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def _run(tmp_path: Path, *extra: str, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "kgcheck.cli", "run", "--dataset", "yago", "--limit", "2",
         "--out", str(tmp_path / "run"), "--no-progress", *extra], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, capture_output=True,
        text=True, timeout=120)


def test_a_corrupt_cache_is_one_plain_warning_line(tmp_path: Path) -> None:
    broken = tmp_path / "answers.sqlite"
    broken.write_bytes(b"this is not an SQLite database" * 100)
    done = _run(tmp_path, "--cache", str(broken))
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "not a readable cache" in line]
    assert len(said) == 1 and said[0].startswith("warning: answer cache "), done.stderr
    # Not Python's format: no file and line of the call, no source line under it.
    assert "cache.py" not in done.stderr and "warnings.warn" not in done.stderr
    assert "CacheWarning" not in done.stderr
    assert list(tmp_path.glob("answers.sqlite.corrupt-*"))


def test_the_run_says_once_where_the_answer_cache_is(tmp_path: Path) -> None:
    folder = tmp_path / "cache-home"
    done = _run(tmp_path, env={"KGCHECK_CACHE_DIR": str(folder)})
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("answer cache: ")]
    assert lines == [f"answer cache: {folder / 'answers.sqlite'} (--no-cache asks the model "
                     "every time)"]
    quiet = _run(tmp_path, "--no-cache", "--fresh")
    assert quiet.returncode == 0 and "answer cache: " not in quiet.stderr
