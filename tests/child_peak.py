"""Run ``kgcheck`` in a child process and measure that child's peak resident memory."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ChildRun:
    """What a child ``kgcheck`` process printed, its exit code and its peak RSS in bytes."""

    code: int
    stdout: str
    stderr: str
    peak_bytes: int


def run_kgcheck(args: list[str], cwd: Path, env: dict[str, str] | None = None,
                timeout: float = 120) -> ChildRun:
    """Run ``python -m kgcheck.cli ARGS``; the peak RSS is this child's, from ``os.wait4``."""
    out, err = cwd / ".child.out", cwd / ".child.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        child = subprocess.Popen([sys.executable, "-m", "kgcheck.cli", *args], cwd=cwd,
                                 env={**os.environ, "COLUMNS": "400", **(env or {})},
                                 stdout=stdout, stderr=stderr)
    # wait4 reaps the child and gives its own rusage (RUSAGE_CHILDREN would mix in others).
    killer = threading.Timer(timeout, child.kill)
    killer.start()
    try:
        _, status, usage = os.wait4(child.pid, 0)
    finally:
        killer.cancel()
    child.returncode = os.waitstatus_to_exitcode(status)
    return ChildRun(child.returncode, out.read_text(), err.read_text(),
                    usage.ru_maxrss * 1024)  # Linux reports kilobytes
