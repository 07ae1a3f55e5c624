"""Keep secrets out of everything kgcheck writes or prints: files, console, logs, traces.

One place decides what a secret looks like, and every writer asks it:

- :func:`redact_settings` for settings (run.json, summaries): a value whose key names a
  credential (``search_api_key``, ``token``, ``password``, ``authorization``, ...) becomes
  ``***``, and URLs in any value lose their credentials;
- :func:`redact_url` for a URL: no ``user:password@`` part, and credential-like query
  parameters (``?token=``, ``api_key=``, ``sig=``, ...) keep their name but not their value;
- :func:`redact_text` for free text that may quote URLs or ``key=value`` pairs (error
  messages, log lines, span attributes);
- :func:`redact_logs` makes every log record go through :func:`redact_text`.

It lives in the providers layer, the lowest one that handles URLs and keys, so that the
runner, the graphs, the CLI and the tracing set-up can all import it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"

# Words that, as a whole part of a name (``search_api_key`` -> search, api, key), mark the
# name's value as a credential. Whole parts only: ``max_tokens`` and ``top_k`` stay visible.
SECRET_WORDS = frozenset({
    "key", "apikey", "token", "secret", "password", "passwd", "pwd", "pass", "auth",
    "authorization", "credential", "credentials", "sig", "signature", "cookie", "session",
    "bearer", "jwt",
})

_NAME_PART = re.compile(r"[A-Za-z][a-z]*|[0-9]+")
# A URL anywhere in a text, up to whitespace or a closing quote or bracket.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]{}]+")
# ``name=value`` outside URLs (a setting quoted in a message: ``search_api_key=...``).
_PAIR = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9_.-]*)(?P<sep>\s*=\s*)"
                   r"(?P<quote>['\"]?)(?P<value>[^\s'\"&,;)]+)")
# Credential headers as a message may quote them (``X-API-Key: ...``).
_HEADER = re.compile(r"(?i)\b(authorization|x-api-key|api-key|cookie)(\s*:\s*)['\"]?[^\s'\",;]+")
_HEADER_NAMES = ("authorization", "api-key", "cookie")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Tell whether a setting, header or query parameter name holds a credential."""
    # Cached: every verdict record is redacted, and its keys are the same few dozen names.
    parts = {part.lower() for part in _NAME_PART.findall(name)}
    return bool(parts & SECRET_WORDS) or name.lower().replace("-", "_") in {"x_api_key"}


def redact_url(url: str) -> str:
    """Return ``url`` without ``user:password@`` and with credential query values masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    netloc = parts.netloc.rsplit("@", 1)[1] if "@" in parts.netloc else parts.netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_name(name) for name, _ in pairs):
            query = urlencode([(name, MASK if is_secret_name(name) else value)
                               for name, value in pairs], safe="*")
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _redact_pair(match: re.Match[str]) -> str:
    if not is_secret_name(match["name"]):
        return match[0]
    return f"{match['name']}{match['sep']}{match['quote']}{MASK}"


def redact_text(text: str) -> str:
    """Mask credentials in free text: inside URLs, ``api_key=...`` pairs, bearer tokens."""
    if not text:
        return text
    # Each pattern runs only on text that can hold it: evidence texts are long and many.
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m[0]), text)
    lowered = text.lower()
    if "bearer" in lowered or "basic" in lowered:
        text = _BEARER.sub(lambda m: f"{m[1]} {MASK}", text)
    if ":" in text and any(name in lowered for name in _HEADER_NAMES):
        text = _HEADER.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
    if "=" in text:
        text = _PAIR.sub(_redact_pair, text)
    return text


def redact_value(value: Any) -> Any:
    """Mask credentials in a value: URLs in strings, secret keys in nested mappings."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return redact_settings(value)
    if isinstance(value, list | tuple):
        return type(value)(redact_value(item) for item in value)
    return value


def redact_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``settings`` fit to write or print: no credential in any value.

    A secret-named key keeps its place (so a reader sees that one was set) with ``***``;
    an empty one stays empty.
    """
    return {
        key: (MASK if value not in (None, "") else value) if is_secret_name(str(key))
        else redact_value(value)
        for key, value in settings.items()
    }


_FORMATTER = logging.Formatter()


class _RedactingRecordFactory:
    """A log record factory that masks credentials in each record's message."""

    def __init__(self, factory: Any) -> None:
        self.factory = factory

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = self.factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's own business
            return record
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            # Tracebacks quote URLs too (httpx: "for url '...'"); formatters reuse exc_text.
            record.exc_text = redact_text(_FORMATTER.formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return record


def redact_logs() -> None:
    """Mask credentials in every log record from now on (httpx logs full request URLs)."""
    current = logging.getLogRecordFactory()
    if not isinstance(current, _RedactingRecordFactory):
        logging.setLogRecordFactory(_RedactingRecordFactory(current))


__all__ = ["MASK", "is_secret_name", "redact_logs", "redact_settings", "redact_text",
           "redact_url", "redact_value"]
