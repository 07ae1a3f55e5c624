"""What kind of failure an exception is: the one taxonomy every retry and stop rule reads.

A failed call is one of a few kinds (``Failure``). The kind decides three things, each in
one place here:

- whether a retry may help (``is_transient``): the connection, the clock, an overloaded or
  failing server; never a bad request, bad credentials or an unreadable reply;
- whether it asks for fewer requests (``is_overload``): 408, 429, 502, 503, 504 and
  timeouts, the signal an adaptive concurrency limit backs off on;
- what a run of them means for a run (``RUN_STOPS``): a server that cannot be reached, one
  that answers but not usefully, or a setting no fact will escape.

Live exceptions are classified by their HTTP status where they carry one, then by type;
verdicts keep only the type's name (``error_type``), so names are classified by the same
table (``classify_name``), which also covers the SDKs' classes without importing them.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Literal

import httpx

__all__ = [
    "Failure",
    "OVERLOAD_STATUS",
    "RUN_STOPS",
    "TRANSIENT_STATUS",
    "classify",
    "classify_name",
    "classify_status",
    "is_overload",
    "is_transient",
    "run_stop",
    "status_of",
]


class Failure(StrEnum):
    """The kinds of failure a call to a server (or a run's setup) can end in."""

    RATE_LIMITED = "rate-limited"
    """429: the server takes fewer requests from this client."""
    OVERLOADED = "overloaded"
    """502, 503, 504: the server, or the gateway before it, is too busy."""
    SERVER_ERROR = "server-error"
    """Any other 5xx but 501 and 505: the server failed on this request."""
    TIMEOUT = "timeout"
    """No answer in time (connect, read, write, pool, 408, a whole-call bound)."""
    UNREACHABLE = "unreachable"
    """Nothing answers: refused, reset or dropped connections, unknown host."""
    AUTH = "auth"
    """401 or 403: credentials missing, wrong or not allowed this."""
    BAD_REQUEST = "bad-request"
    """Another 4xx, or 501/505: this request will not work, however often it is sent."""
    BAD_REPLY = "bad-reply"
    """The server answered, but the reply cannot be read (not JSON, cut short)."""
    CONFIG = "config"
    """A setting no fact escapes: an unknown model, strategy or a bad prompt file."""
    SERVER_GONE = "server-gone"
    """A model server the run itself started (local llama.cpp) has exited."""
    OTHER = "other"
    """Anything else: one fact's own trouble."""


# Statuses that say "fewer requests, please", whatever retries the client then makes.
OVERLOAD_STATUS = frozenset({408, 429, 502, 503, 504})
# Statuses a later attempt may get past: overloads and server failures. 501 (not
# implemented) and 505 (HTTP version) say the request itself is the trouble.
TRANSIENT_STATUS = frozenset({408, 429, *range(500, 600)}) - {501, 505}

_TRANSIENT = frozenset({Failure.RATE_LIMITED, Failure.OVERLOADED, Failure.SERVER_ERROR,
                        Failure.TIMEOUT, Failure.UNREACHABLE})
_OVERLOAD = frozenset({Failure.RATE_LIMITED, Failure.OVERLOADED, Failure.TIMEOUT})

RunStop = Literal["config", "unreachable", "server", "server-gone"]
# How a run reads a fact failed this way: a setting stops it at once; a run of facts that
# could not reach the server, or reached one that answered uselessly, stops it too.
RUN_STOPS: dict[Failure, RunStop] = {
    Failure.CONFIG: "config",
    # Nothing will answer any later fact: the run stops at once (resumable).
    Failure.SERVER_GONE: "server-gone",
    Failure.UNREACHABLE: "unreachable",
    Failure.TIMEOUT: "unreachable",
    Failure.AUTH: "unreachable",
    Failure.RATE_LIMITED: "server",
    Failure.OVERLOADED: "server",
    Failure.SERVER_ERROR: "server",
    Failure.BAD_REPLY: "server",
}

# Exception class names of httpx, the openai and ollama SDKs, the Python standard library
# and kgcheck itself, by kind. Names (not classes) because verdicts record only the name,
# and because the SDKs are imported only when a model of theirs is used.
_NAMES: dict[str, Failure] = {
    **dict.fromkeys((
        "PromptError", "UnknownModelError", "UnknownProviderError", "UnknownStrategyError",
        "LocalModelError",
    ), Failure.CONFIG),
    "LocalServerDiedError": Failure.SERVER_GONE,
    **dict.fromkeys((
        "ConnectError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
        "ConnectionAbortedError", "BrokenPipeError", "ReadError", "WriteError",
        "NetworkError", "RemoteProtocolError", "ProxyError", "APIConnectionError",
        "OpenAIConnectionError", "ModelConnectionError", "ModelUnreachableError",
    ), Failure.UNREACHABLE),
    **dict.fromkeys((
        "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException",
        "TimeoutError", "APITimeoutError", "OpenAITimeoutError", "ModelTimeoutError",
    ), Failure.TIMEOUT),
    **dict.fromkeys((
        "AuthenticationError", "PermissionDeniedError", "OpenAIAuthenticationError",
    ), Failure.AUTH),
    **dict.fromkeys((
        "RateLimitError", "OpenAIRateLimitError", "ModelRateLimitError",
    ), Failure.RATE_LIMITED),
    # openai's InternalServerError is its class for every status from 500 on; without the
    # status, a recorded one counts as the server overloaded, as 502-504 do.
    **dict.fromkeys((
        "ServiceUnavailableError", "InternalServerError",
    ), Failure.OVERLOADED),
    **dict.fromkeys((
        "ResponseError", "APIStatusError", "HTTPStatusError", "OpenAIAPIError",
        "ModelAPIError",
    ), Failure.SERVER_ERROR),
    **dict.fromkeys((
        "BadRequestError", "NotFoundError", "ConflictError", "UnprocessableEntityError",
    ), Failure.BAD_REQUEST),
    **dict.fromkeys((
        "ModelReplyError", "JSONDecodeError", "APIResponseValidationError",
        "BodyTooLargeError",
    ), Failure.BAD_REPLY),
}


def classify_status(status: int) -> Failure:
    """Return the kind of failure an HTTP status means (OTHER below 400)."""
    if status in (401, 403):
        return Failure.AUTH
    if status == 408:
        return Failure.TIMEOUT
    if status == 429:
        return Failure.RATE_LIMITED
    if status in (502, 503, 504):
        return Failure.OVERLOADED
    if status in TRANSIENT_STATUS:
        return Failure.SERVER_ERROR
    if status >= 400:
        return Failure.BAD_REQUEST
    return Failure.OTHER


def classify_name(error_type: str | None) -> Failure:
    """Return the kind of failure a recorded exception class name stands for."""
    return _NAMES.get(error_type or "", Failure.OTHER)


def status_of(exc: BaseException) -> int | None:
    """Return the HTTP status an exception carries (its own or its response's), if any."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = getattr(getattr(exc, "response", None), "status_code", None)
    # ollama's ResponseError uses -1 for "no status" (a streamed error, say).
    return status if isinstance(status, int) and status > 0 else None


def classify(exc: BaseException) -> Failure:
    """Return the kind of failure ``exc`` is: by its HTTP status, else its type."""
    for cls in type(exc).__mro__:
        # A setting, an unreadable reply, a dead server: whatever status came with it.
        kind = _NAMES.get(cls.__name__)
        if kind in (Failure.CONFIG, Failure.BAD_REPLY, Failure.SERVER_GONE):
            return kind
    status = status_of(exc)
    if status is not None and status >= 400:
        return classify_status(status)
    if hasattr(exc, "status_code") and status is None:
        # A status error without a usable status (ollama's mid-stream errors): no rule.
        return Failure.OTHER
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return Failure.TIMEOUT
    if isinstance(exc, httpx.TransportError | ConnectionError):
        return Failure.UNREACHABLE
    if isinstance(exc, json.JSONDecodeError):
        return Failure.BAD_REPLY
    for cls in type(exc).__mro__:
        kind = _NAMES.get(cls.__name__)
        if kind is not None:
            return kind
    return Failure.OTHER


def is_transient(exc: BaseException) -> bool:
    """Tell whether a later attempt may succeed: transport trouble, 5xx, 429 or 408."""
    return classify(exc) in _TRANSIENT


def is_overload(exc: BaseException | Failure) -> bool:
    """Tell whether a failure asks for fewer requests (429, 502-504, 408, timeouts)."""
    return (exc if isinstance(exc, Failure) else classify(exc)) in _OVERLOAD


def run_stop(kind: Failure) -> RunStop | None:
    """Return which stop rule of a run a failure of this kind counts towards, if any."""
    return RUN_STOPS.get(kind)
