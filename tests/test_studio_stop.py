"""``kgcheck studio`` stopped by a signal to its own pid stops ``langgraph dev`` and its workers.

The command runs as a user starts it (the default reload mode, whose reloader spawns the
server process), on a free loopback port. Once it answers, SIGTERM (then, on a second
start on the same port, SIGINT) goes to kgcheck's pid alone: the port must be free again
and none of the processes it started may still run.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUIET = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true",
         "LANGSMITH_TRACING": "false"}
STARTUP_SECONDS = 120
KGCHECK = Path(sys.executable).parent / "kgcheck"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_is_free(port: int) -> bool:
    # SO_REUSEADDR, as servers bind: only a socket still listening on the port refuses it.
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _running(pid: int) -> bool:
    """Tell whether ``pid`` runs (a zombie no longer does: it holds no port)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _descendants(pid: int) -> set[int]:
    """Every process started, directly or not, by ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _start(tmp: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    env.update(QUIET, KGCHECK_HOME=str(tmp / "home"))
    with (tmp / f"studio-{port}-{time.monotonic_ns()}.log").open("w") as log:
        return subprocess.Popen([str(KGCHECK), "studio", "--port", str(port)], cwd=tmp,
                                env=env, stdout=log, stderr=subprocess.STDOUT)


def _wait_until_it_answers(proc: subprocess.Popen[bytes], port: int, tmp: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        assert proc.poll() is None, "kgcheck studio exited:\n" + "".join(
            p.read_text() for p in tmp.glob("studio-*.log"))[-4000:]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    pytest.fail("kgcheck studio did not answer /ok")


def test_a_signal_to_kgcheck_studio_stops_every_process_it_started(tmp_path: Path) -> None:
    port = _free_port()
    started: set[int] = set()
    try:
        for signum, status in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
            # The second start, on the same port, shows that the first freed it.
            proc = _start(tmp_path, port)
            _wait_until_it_answers(proc, port, tmp_path)
            workers = _descendants(proc.pid)
            started |= workers | {proc.pid}
            assert workers, "langgraph dev runs as a child of kgcheck studio"
            os.kill(proc.pid, signum)
            code = proc.wait(timeout=60)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and any(map(_running, workers)):
                time.sleep(0.2)
            assert not [pid for pid in workers if _running(pid)], signum
            assert _port_is_free(port), signum
            # It ends as a shell reports a process stopped by that signal.
            assert code == status, (signum, code)
    finally:
        for pid in started:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
