"""A real Virtuoso (Debian ``virtuoso-opensource-7``) for tests, in a temp folder on loopback.

``start_virtuoso(workdir)`` writes a copy of the package's ``virtuoso.ini`` whose database,
log, lock and transaction files live in ``workdir``, binds both ports to 127.0.0.1, starts
``virtuoso-t`` in the foreground and yields the endpoint once ``/sparql`` answers; leaving
the block stops the server. ``load`` puts an N-Triples or Turtle file into a named graph
with ``isql-vt``. The ``virtuoso`` fixture starts one server per test session; without the
package it skips with how to install it, and under CI (``CI=true``) it fails instead.
The ``dba`` password is the package's public default: the server listens on loopback only.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

INI = Path("/etc/virtuoso-opensource-7/virtuoso.ini")
INSTALL = "apt-get install -y virtuoso-opensource-7"


@dataclass
class Virtuoso:
    """A running server: its SPARQL endpoint URL, SQL port and data folder."""

    url: str
    sql_port: int
    http_port: int
    workdir: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_ini(workdir: Path, sql_port: int, http_port: int) -> Path:
    """Write a virtuoso.ini that keeps every file in ``workdir`` and listens on loopback."""
    files = {"DatabaseFile": "virtuoso{}.db", "ErrorLogFile": "virtuoso{}.log",
             "LockFile": "virtuoso{}.lck", "TransactionFile": "virtuoso{}.trx"}
    section, lines = "", []
    for line in INI.read_text().splitlines():
        match = re.match(r"\s*\[(.+)\]", line)
        if match:
            section = match.group(1)
        key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith(
            ";") else ""
        if section in ("Database", "TempDatabase") and key in files:
            name = files[key].format("-temp" if section == "TempDatabase" else "")
            line = f"{key} = {workdir / name}"
        elif section == "Parameters" and key == "ServerPort":
            line = f"ServerPort = 127.0.0.1:{sql_port}"
        elif section == "HTTPServer" and key == "ServerPort":
            line = f"ServerPort = 127.0.0.1:{http_port}"
        elif section == "Parameters" and key == "DirsAllowed":
            line = f"DirsAllowed = ., {workdir}, /usr/share/virtuoso-opensource-7/vad"
        lines.append(line)
    ini = workdir / "virtuoso.ini"
    ini.write_text("\n".join(lines) + "\n")
    return ini


def _answers(url: str) -> bool:
    try:
        response = httpx.get(url, params={"query": "ASK { ?s ?p ?o }"},
                             headers={"Accept": "application/sparql-results+json"}, timeout=2)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


@contextmanager
def start_virtuoso(workdir: Path, *, wait: float = 90.0) -> Iterator[Virtuoso]:
    """Run Virtuoso from ``workdir`` on free loopback ports until the block ends."""
    binary = shutil.which("virtuoso-t")
    if binary is None:
        raise FileNotFoundError(f"virtuoso-t not found; install it: {INSTALL}")
    workdir.mkdir(parents=True, exist_ok=True)
    sql_port, http_port = _free_port(), _free_port()
    ini = write_ini(workdir, sql_port, http_port)
    log = (workdir / "server.out").open("wb")
    process = subprocess.Popen([binary, "+foreground", "+configfile", str(ini)], cwd=workdir,
                               stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{http_port}/sparql"
    try:
        deadline = time.monotonic() + wait
        while not _answers(url):
            if process.poll() is not None:
                raise RuntimeError(f"virtuoso-t exited with {process.returncode}: "
                                   f"{(workdir / 'server.out').read_text()[-500:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Virtuoso did not answer on {url} within {wait:.0f} s")
            time.sleep(0.3)
        yield Virtuoso(url, sql_port, http_port, workdir)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def isql(server: Virtuoso, statement: str) -> str:
    """Run SQL (``exec=...``) through ``isql-vt`` as dba; raise with its output on failure."""
    done = subprocess.run(["isql-vt", f"127.0.0.1:{server.sql_port}", "dba", "dba",
                           f"exec={statement}"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or "*** Error" in done.stdout + done.stderr:
        raise RuntimeError(f"isql-vt failed: {done.stdout[-400:]} {done.stderr[-400:]}")
    return done.stdout


def load(server: Virtuoso, path: Path, graph: str) -> None:
    """Load an N-Triples or Turtle file into ``graph`` (copied into the server's folder)."""
    target = server.workdir / f"load-{path.name}"
    shutil.copyfile(path, target)
    isql(server, f"DB.DBA.TTLP_MT(file_to_string_output('{target}'), '', '{graph}'); "
                 "checkpoint;")


@pytest.fixture(scope="session")
def virtuoso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Virtuoso]:
    """One Virtuoso per test session (skips locally when absent, fails under CI)."""
    if shutil.which("virtuoso-t") is None or shutil.which("isql-vt") is None:
        message = f"Virtuoso is not installed; install it with: {INSTALL}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with start_virtuoso(tmp_path_factory.mktemp("virtuoso")) as server:
        yield server
