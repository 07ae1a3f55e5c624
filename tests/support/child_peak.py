"""Run ``kgcheck`` in a child process and measure that child's peak resident memory.

The peak is the child's own ``VmHWM`` (``/proc/self/status``), written as it exits. Not
``ru_maxrss``: Linux carries the parent's high-water mark into a child through fork and
exec, so a child of a large test process would report the parent's size.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# Runs the command line in the child and writes its VmHWM (kB) to the file argv[1] at exit.
_CHILD = """
import atexit, runpy, sys

def _peak(path=sys.argv[1]):
    with open("/proc/self/status") as status:
        kb = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(path, "w") as out:
        out.write(kb)

atexit.register(_peak)
sys.argv = ["kgcheck", *sys.argv[2:]]
runpy.run_module("kgcheck.cli", run_name="__main__")
"""


@dataclass
class ChildRun:
    """What a child ``kgcheck`` process printed, its exit code and its peak RSS in bytes."""

    code: int
    stdout: str
    stderr: str
    peak_bytes: int


def run_kgcheck(args: list[str], cwd: Path, env: dict[str, str] | None = None,
                timeout: float = 180) -> ChildRun:
    """Run ``kgcheck ARGS`` in a child process; return its output and its own peak RSS."""
    peak = cwd / ".child.peak"
    done = subprocess.run([sys.executable, "-c", _CHILD, str(peak), *args], cwd=cwd,
                          env={**os.environ, "COLUMNS": "400", **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
    return ChildRun(done.returncode, done.stdout, done.stderr,
                    int(peak.read_text()) * 1024)
