"""A local Ray cluster that cannot outlive the run that started it.

``ray.init()`` starts a local cluster's processes (GCS, raylet, dashboard and runtime-env
agents, workers) as children of the driver; after a ``kill -9`` of the driver some of
them stay up and ignore SIGTERM. So kgcheck starts its local cluster itself: ``ray start
--head --block`` in a session of its own, every Ray process inherits that session, and a
watchdog (a small process in yet another session, immune to the terminal's Ctrl-C and
hang-up) polls the driver's pid and kills the whole session once the driver is gone. A
normal stop does the same from the driver, then dismisses the watchdog.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LocalCluster", "kill_session", "session_pids", "watch"]

START_TIMEOUT = 240.0
STOP_GRACE = 5.0
POLL_SECONDS = 0.5


def _stat(pid: int) -> list[str] | None:
    """Return the fields of ``/proc/<pid>/stat`` after the command name (None: gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()


def _started_at(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields else None  # starttime: tells a reused pid apart


def is_alive(pid: int, started_at: str | None = None) -> bool:
    """Tell whether a process runs (a zombie or a reused pid does not count)."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return started_at is None or fields[19] == started_at


def session_pids(session: int) -> list[int]:
    """Return the processes of a session (Linux ``/proc``), its leader included."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and fields[3] == str(session) and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def kill_session(session: int, *, spare: int | None = None) -> None:
    """SIGKILL every process of a session until none is left (``spare``: one to keep)."""
    for _ in range(50):
        pids = [p for p in session_pids(session) if p != spare]
        if not pids:
            return
        for pid in pids:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def watch(driver: int, started_at: str | None, session: int, temp_dir: str) -> None:
    """Wait while the driver lives; then kill the cluster's session and remove its files."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    while is_alive(driver, started_at) and session_pids(session):
        time.sleep(POLL_SECONDS)
    kill_session(session)
    shutil.rmtree(temp_dir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ray_command() -> list[str]:
    script = Path(sys.executable).parent / "ray"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from ray.scripts.scripts import main; main()"]


@dataclass
class LocalCluster:
    """A local Ray cluster in its own session, with a watchdog on the driver's pid."""

    address: str
    head: subprocess.Popen[str]
    watchdog: subprocess.Popen[bytes]
    temp_dir: str

    @classmethod
    def start(cls, num_cpus: int | None = None) -> LocalCluster:
        """Start the cluster on 127.0.0.1 and its watchdog; return once Ray is up.

        Raises:
            RuntimeError: the cluster did not start (the message has Ray's last words).

        """
        port = _free_port()
        # Short: Ray's socket paths live under it and must stay below 108 characters.
        temp_dir = tempfile.mkdtemp(prefix="kgray-")
        command = [*_ray_command(), "start", "--head", "--block",
                   "--node-ip-address=127.0.0.1", f"--port={port}",
                   "--include-dashboard=false", "--disable-usage-stats",
                   f"--temp-dir={temp_dir}",
                   *([f"--num-cpus={num_cpus}"] if num_cpus else [])]
        # A cluster on loopback for this run only: no token to hand around.
        env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", **os.environ}
        head = subprocess.Popen(command, env=env, start_new_session=True, text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        watchdog = subprocess.Popen(
            [sys.executable, "-c", "import sys; from kgcheck.runs.ray_cluster import watch; "
             "watch(int(sys.argv[1]), sys.argv[2] or None, int(sys.argv[3]), sys.argv[4])",
             str(os.getpid()), _started_at(os.getpid()) or "", str(head.pid), temp_dir],
            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                p for p in sys.path if p)})
        cluster = cls(f"127.0.0.1:{port}", head, watchdog, temp_dir)
        lines = _lines_of(head)
        said: list[str] = []
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                cluster.stop()
                raise RuntimeError(f"ray start gave no sign of life in {START_TIMEOUT:.0f} s"
                                   ) from None
            if line is None:
                cluster.stop()
                raise RuntimeError("ray start ended: " + " ".join(said[-3:]))
            said.append(line.rstrip())
            if "Ray runtime started" in line:
                return cluster

    def stop(self) -> None:
        """Stop every process of the cluster, dismiss the watchdog, remove the files."""
        with suppress(ProcessLookupError):
            self.head.send_signal(signal.SIGTERM)  # --block stops the cluster on SIGTERM
        with suppress(subprocess.TimeoutExpired):
            self.head.wait(STOP_GRACE)
        kill_session(self.head.pid)
        with suppress(subprocess.TimeoutExpired):
            self.head.wait(STOP_GRACE)
        self.watchdog.terminate()
        with suppress(subprocess.TimeoutExpired):
            self.watchdog.wait(STOP_GRACE)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _lines_of(process: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """Read a process's output on a thread (so a full pipe never blocks it); None at the end."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines
