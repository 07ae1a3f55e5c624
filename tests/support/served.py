"""A `kgcheck review` or `kgcheck view` process started by a test, and how to stop it."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass


@dataclass
class Served:
    """A serving kgcheck process and the address it printed."""

    url: str
    token: str
    proc: subprocess.Popen
    output: list[str]

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]


def stop_served(served: Served) -> int:
    """Stop the server as a person does (Ctrl-C); return its exit code."""
    if served.proc.poll() is None:
        os.killpg(served.proc.pid, signal.SIGINT)
        try:
            served.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(served.proc.pid, signal.SIGKILL)
            served.proc.wait(timeout=10)
    return served.proc.returncode
