"""The models an Ollama server has pulled (``GET /api/tags``), and Ollama's rules for names.

Before a run, ``check_pulled`` asks the server for its models, so that a model that was
never pulled stops the run with the fix (``ollama pull MODEL``) instead of failing at the
first fact. A server that does not list its models (an older one, an error, a proxy's page)
does not stop the run: the first call then says what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpx

from kgcheck.data import safe_json
from kgcheck.data.httpbody import ACCEPT_ENCODING, BodyDecodeError, read_capped
from kgcheck.providers.secrets import redact_url
from kgcheck.providers.transports import REACH_TIMEOUT, UnknownModelError, ssl_context

__all__ = ["canonical_name", "check_pulled", "pulled_models"]

# Ollama's defaults for the parts of a name left out: ``gemma2`` is
# ``registry.ollama.ai/library/gemma2:latest``.
DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
# A model's entry in /api/tags is a few hundred bytes: this holds thousands of them.
MAX_TAGS_BYTES = 4 * 2**20
# Models named in the message when the one asked for is missing.
SHOWN = 5


def canonical_name(name: str) -> str:
    """Spell an Ollama model name in full, as Ollama compares names (case-insensitively).

    ``gemma2`` and ``registry.ollama.ai/library/gemma2:latest`` are the same model; a
    digest (``@sha256:...``) is left out.
    """
    rest = name.strip().split("@", 1)[0]
    tag = DEFAULT_TAG
    # A colon after the last slash starts the tag; one before it is a host's port.
    if rest.rfind(":") > rest.rfind("/"):
        rest, tag = rest.rsplit(":", 1)
    parts = rest.split("/")
    model = parts[-1]
    namespace = parts[-2] if len(parts) > 1 else DEFAULT_NAMESPACE
    host = "/".join(parts[:-2]).split("://", 1)[-1] or DEFAULT_HOST
    return f"{host}/{namespace}/{model}:{tag or DEFAULT_TAG}".lower()


def pulled_models(host: str, timeout: float) -> list[str] | None:
    """Return the names of the models an Ollama server has; None when it does not say."""
    url = host.rstrip("/") + "/api/tags"
    limit = min(timeout, REACH_TIMEOUT) if timeout > 0 else REACH_TIMEOUT
    try:
        with httpx.stream("GET", url, headers={"Accept-Encoding": ACCEPT_ENCODING},
                          verify=ssl_context(), timeout=limit,
                          follow_redirects=True) as response:
            if response.status_code != 200:
                return None
            body = read_capped(response, MAX_TAGS_BYTES)
    except (httpx.HTTPError, BodyDecodeError):
        return None
    if body.over:
        return None
    try:
        data = safe_json.parse(body.body())
    except ValueError:
        return None
    listed = data.get("models") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return None
    names: list[str] = []
    for entry in listed:
        if isinstance(entry, dict):
            # ``name`` is what `ollama list` shows; ``model`` is the same name, kept apart.
            names += [str(entry[key]) for key in ("name", "model")
                      if isinstance(entry.get(key), str) and entry[key]]
    return list(dict.fromkeys(names))


def _display_names(listed: Iterable[str]) -> list[str]:
    """One name per model, as the server spells it (``name`` and ``model`` often repeat)."""
    seen: dict[str, str] = {}
    for item in listed:
        seen.setdefault(canonical_name(item), item)
    return list(seen.values())


def _shown(listed: Iterable[str]) -> str:
    names = _display_names(listed)
    if not names:
        return "it has no models"
    more = len(names) - SHOWN
    return "it has " + ", ".join(names[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def check_pulled(name: str, host: str, timeout: float) -> None:
    """Raise UnknownModelError, with the fix, when the server lists its models without ``name``."""
    listed = pulled_models(host, timeout)
    if listed is None:
        return
    wanted = canonical_name(name)
    if any(canonical_name(other) == wanted for other in listed):
        return
    raise UnknownModelError(f"ollama:{name} at {redact_url(host)}: the server has no model "
                            f"{name!r} ({_shown(listed)}); pull it with `ollama pull {name}`")
