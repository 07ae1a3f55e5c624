"""Start a stub server in a process of its own: what a benchmark measures is then the client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def start_stub_process(module: str, *options: str) -> tuple[subprocess.Popen[str], str]:
    """Run ``python -m module options...`` (a stub that prints its URL); return it and the URL.

    ``module`` is ``tests.support.stubs`` (then ``options`` start with ``ollama``, ``openai`` or
    ``azure``) or ``tests.support.stubs.slotted``.
    """
    process = subprocess.Popen([sys.executable, "-m", module, *options], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit(f"the stub server {module} {' '.join(options)} did not start: {url!r}")
    return process, url
