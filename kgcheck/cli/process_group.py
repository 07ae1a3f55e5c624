"""Run a server command in a process group of its own and stop the whole group with kgcheck.

``langgraph dev`` starts workers of its own (uvicorn's reloader spawns the server process).
Had kgcheck died of a signal alone, they would keep running, adopted by init, holding the
port. Here a SIGINT, SIGTERM or SIGHUP to kgcheck's pid goes to the whole group, the command
gets ``GRACE_SECONDS`` to stop, and whatever of the group is left then is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from types import FrameType

__all__ = ["GRACE_SECONDS", "run_in_own_group"]

# How long the command has to stop after a signal before its group is killed.
GRACE_SECONDS = 10.0
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass  # the group is gone already


def run_in_own_group(command: Sequence[str], env: Mapping[str, str],
                     grace: float = GRACE_SECONDS) -> int:
    """Run ``command`` in a new process group until it ends or kgcheck gets a signal.

    Args:
        command: The program and its arguments.
        env: Its environment.
        grace: Seconds the group has to stop after a signal before it is killed.

    Returns:
        The command's exit status, or 128 + the signal's number when a signal stopped it
        (130 for Ctrl-C, as a shell reports it).

    """
    if not hasattr(os, "waitid"):  # no process groups to speak of (Windows)
        return subprocess.run(list(command), env=dict(env), check=False).returncode
    received: list[int] = []
    process: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if process is not None:
            _signal_group(process.pid, signum)

    # Installed before the command starts, so that no signal falls between the two.
    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    try:
        # Its own group (not its own session): it keeps the terminal for its output, and a
        # Ctrl-C reaches it once, through kgcheck.
        process = subprocess.Popen(list(command), env=dict(env), process_group=0)
        if received:
            _signal_group(process.pid, received[0])
        stop_by = None
        while not _ended(process.pid):
            if received and stop_by is None:
                stop_by = time.monotonic() + grace
            if stop_by is not None and time.monotonic() > stop_by:
                _signal_group(process.pid, signal.SIGKILL)
            time.sleep(0.2)
    finally:
        if process is not None:
            # The group outlives its leader: a worker the command left behind would hold
            # the port. Nothing of the group has a reason to run once the command ended.
            # The leader is reaped only after this, so its pid (the group's id) cannot have
            # been given to another process yet.
            _signal_group(process.pid, signal.SIGKILL)
            process.wait()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 + received[0] if received else process.returncode


def _ended(pid: int) -> bool:
    """Tell whether the child ``pid`` has exited, without reaping it."""
    found = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    return found is not None
