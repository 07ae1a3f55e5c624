"""A local Ray cluster kgcheck starts does not outlive its driver, even after kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgcheck.runs import ray_engine
from kgcheck.runs.ray_cluster import is_alive, kill_session, session_pids, watch

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "disabled",
       "RAY_USAGE_STATS_ENABLED": "0"}


def _stat(pid: int) -> tuple[int, str] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), fields[19]  # parent pid, start time


def _descendants(root: int) -> dict[int, str]:
    """Every process below ``root``, with its start time (so a reused pid is told apart)."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (found := _stat(int(entry.name))):
            parents[int(entry.name)] = found
    below: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, started) in parents.items():
            if ppid == parent and pid not in below:
                below[pid] = started
                frontier.append(pid)
    return below


@pytest.mark.slow
def test_kill_9_of_a_ray_driver_leaves_no_ray_process(tmp_path: Path) -> None:
    if ray_engine.ray is None:
        pytest.skip("Ray is not installed: pip install 'kgcheck[ray]'")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "kgcheck.cli", "run", "--dataset", "yago", "--limit", "60",
           "--out", str(out), "--no-progress", "--engine", "ray", "--ray-workers", "1",
           "--replay-latency", "1", "--concurrency", "2"]
    driver = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        verdicts = out / "verdicts.jsonl"
        while not (verdicts.exists() and verdicts.read_text().count("\n") >= 2):
            assert driver.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no verdict after 300 s"
            time.sleep(0.2)
        cluster = _descendants(driver.pid)
        names = {Path(f"/proc/{pid}/cmdline").read_bytes()[:40] for pid in cluster
                 if Path(f"/proc/{pid}/cmdline").exists()}
        assert any(b"DashboardAgent" in n or b"raylet" in n for n in names), names
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        driver.kill()
    deadline = time.monotonic() + 60
    while (left := [p for p, started in cluster.items() if is_alive(p, started)]) and \
            time.monotonic() < deadline:
        time.sleep(0.5)
    leftovers = {p: Path(f"/proc/{p}/cmdline").read_bytes()[:60] for p in left
                 if Path(f"/proc/{p}/cmdline").exists()}
    for pid in left:  # do not leave them to the next test either
        os.kill(pid, signal.SIGKILL)
    assert not leftovers, leftovers


def test_the_watchdog_kills_the_session_once_the_driver_is_gone(tmp_path: Path) -> None:
    # A stand-in cluster: a session whose leader has a child that ignores SIGTERM.
    ignoring = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, "
                "signal.SIG_IGN); subprocess.Popen([sys.executable, '-c', 'import signal, "
                "time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)']); "
                "time.sleep(600)")
    head = subprocess.Popen([sys.executable, "-c", ignoring], start_new_session=True)
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    files = tmp_path / "ray-temp"
    files.mkdir()
    started = _stat(driver.pid)
    assert started is not None
    watcher = subprocess.Popen(
        [sys.executable, "-c", "import sys; from kgcheck.runs.ray_cluster import watch; "
         "watch(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4])",
         str(driver.pid), started[1], str(head.pid), str(files)], cwd=ROOT, env=ENV,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(session_pids(head.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(session_pids(head.pid)) == 2
        time.sleep(1.0)
        assert watcher.poll() is None  # the driver lives: nothing happens
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
        watcher.wait(timeout=30)
        head.wait(timeout=10)
        assert session_pids(head.pid) == [] and not files.exists()
    finally:
        for process in (driver, watcher):
            process.kill()
        kill_session(head.pid)


def test_watch_returns_at_once_for_a_driver_that_is_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    session = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                               start_new_session=True)
    try:
        watch(gone.pid, None, session.pid, str(tmp_path / "none"))
        session.wait(timeout=10)
        assert session.returncode == -signal.SIGKILL
    finally:
        session.kill()
