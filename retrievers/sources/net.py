"""HTTP for evidence sources: one guarded, rate-limited, capped client.

Every request an evidence source makes goes through ``Net``: only http(s); a per-request
deadline that covers the body too (a page that drips bytes cannot hold a run); at most
``max_bytes`` read; retries with backoff on connection errors, 429 and 5xx; one request per
``host_interval`` seconds to any host; redirects followed by hand, each hop checked; and
robots.txt honoured for pages (``robots=True``). Bodies are decoded (gzip, deflate, zstd)
as they arrive and ``max_bytes`` caps the decoded size, so a compressed bomb costs the cap
(``kgcheck.data.httpbody``).

The SSRF guard sits where the connection is made: a network backend under httpx resolves
the host itself, refuses private, loopback, link-local and reserved addresses (unless
allowed) and connects to the address it checked. So a redirect to a private address, or a
public name that resolves to one (DNS rebinding included), is refused as surely as a
literal ``http://10.0.0.1/``.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import httpcore
import httpx

from kgcheck.data.httpbody import ACCEPT_ENCODING, BodyDecodeError, aread_capped
from kgcheck.failures import TRANSIENT_STATUS, Failure, classify

USER_AGENT = "kgcheck-evidence/1.0 (+https://github.com/kgcheck)"
MAX_REDIRECTS = 5

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class NetError(Exception):
    """A request that failed for good: unreachable, refused by policy, or a bad status."""


class BlockedURL(NetError):
    """A URL the policy refuses: not http(s), a private address, or disallowed by robots.txt."""


def parse_allowed(setting: str | bool) -> tuple[bool, tuple[IPNetwork, ...]]:
    """Read ``allow_private_urls``: false, true, or a comma list of networks (127.0.0.0/8)."""
    value = str(setting).strip().lower()
    if value in ("", "false", "no", "0", "off"):
        return False, ()
    if value in ("true", "yes", "1", "on"):
        return True, ()
    networks = []
    for part in value.split(","):
        try:
            networks.append(ipaddress.ip_network(part.strip(), strict=False))
        except ValueError:
            raise ValueError(f"allow_private_urls={setting!r}: {part.strip()!r} is not true, "
                             "false or a network such as 127.0.0.0/8") from None
    return False, tuple(networks)


@dataclass(frozen=True)
class NetPolicy:
    """What ``Net`` may do: address guard, caps, pacing and retries."""

    allow_private: str = "false"
    timeout: float = 10.0
    max_bytes: int = 2_000_000
    host_interval: float = 1.0
    retries: int = 2
    backoff: float = 0.25

    def address_allowed(self, address: str) -> bool:
        """Tell whether a resolved address may be connected to."""
        ip = ipaddress.ip_address(address.split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        public = ip.is_global and not ip.is_multicast
        if public:
            return True
        everything, networks = parse_allowed(self.allow_private)
        return everything or any(ip in n for n in networks)


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolve, check and connect to the checked address (TLS still names the host)."""

    def __init__(self, policy: NetPolicy) -> None:
        self.policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None
                          ) -> httpcore.AsyncNetworkStream:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM)
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        refused = [a for a in addresses if not self.policy.address_allowed(a)]
        if refused or not addresses:
            raise BlockedURL(f"{host} resolves to {', '.join(refused) or 'nothing'}: a private "
                             "or loopback address (set allow_private_urls to allow it)")
        return await self._inner.connect_tcp(addresses[0], port, timeout=timeout,
                                             local_address=local_address,
                                             socket_options=socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None
                                  ) -> httpcore.AsyncNetworkStream:
        raise BlockedURL(f"unix socket {path}: evidence is fetched over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """Return the process's TLS context (loading the CA bundle costs about 0.2 s)."""
    return httpx.create_ssl_context()


def guarded_transport(policy: NetPolicy) -> httpx.AsyncHTTPTransport:
    """Return an httpx transport whose connections pass the address guard."""
    transport = httpx.AsyncHTTPTransport(retries=0, verify=ssl_context())
    # httpx takes no network backend argument; its pool is rebuilt around the guarded one.
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context(), network_backend=_GuardedBackend(policy))
    return transport


@dataclass
class Response:
    """A finished request: where it ended, its status, type, charset and (capped) body."""

    url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool = False


@dataclass
class _Pacing:
    """Shared by every client of the process: the next time each host may be asked."""

    next_time: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reserve(self, host: str, interval: float) -> float:
        """Book the host's next slot; returns seconds to wait for it."""
        with self.lock:
            now = time.monotonic()
            slot = max(now, self.next_time.get(host, 0.0))
            self.next_time[host] = slot + interval
            return slot - now


PACING = _Pacing()
_ROBOTS: dict[str, RobotFileParser] = {}
_DISALLOW_ALL = ["User-agent: *", "Disallow: /"]
# asyncio locks belong to one event loop; each loop gets its own, dropped with the loop.
_ROBOTS_READING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary())
_ROBOTS_LOCK = threading.Lock()


class NetStats:
    """Requests sent over the network by this process (the cache's hit counts are elsewhere)."""

    requests = 0
    _lock = threading.Lock()

    @classmethod
    def count(cls) -> None:
        """Count one request sent."""
        with cls._lock:
            cls.requests += 1


class Net:
    """An async HTTP client for one event loop, with the policy applied to every request."""

    def __init__(self, policy: NetPolicy, *, guard: bool = True) -> None:
        self.policy = policy
        # Configured API endpoints (a self-hosted SearxNG on localhost) are the user's
        # choice; the guard protects against addresses that come from fetched data.
        transport = (guarded_transport(policy) if guard
                     else httpx.AsyncHTTPTransport(retries=0, verify=ssl_context()))
        # trust_env=False: a proxy from the environment would bypass the address guard.
        self._client = httpx.AsyncClient(transport=transport, trust_env=False,
                                         follow_redirects=False,
                                         headers={"User-Agent": USER_AGENT,
                                                  "Accept-Encoding": ACCEPT_ENCODING},
                                         timeout=httpx.Timeout(policy.timeout))

    async def __aenter__(self) -> Net:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    @staticmethod
    def check_url(url: str) -> None:
        """Refuse anything but an absolute http(s) URL."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BlockedURL(f"{url[:200]!r}: only http(s) URLs are fetched")

    async def get(self, url: str, *, params: dict[str, str] | None = None,
                  method: str = "GET", data: dict[str, str] | None = None,
                  headers: dict[str, str] | None = None, robots: bool = False,
                  follow: bool = True) -> Response:
        """Fetch ``url`` (retrying transient failures); raise NetError when it cannot."""
        attempts = self.policy.retries + 1
        last: Exception | None = None
        for attempt in range(attempts):
            try:
                return await self._follow(url, params, method, data, headers or {}, robots,
                                          follow)
            except BlockedURL:
                raise
            except (httpx.TransportError, TimeoutError, _Retryable) as exc:
                last = exc
                if attempt + 1 < attempts:
                    await asyncio.sleep(self.policy.backoff * 2 ** attempt)
        raise NetError(f"{_short(url)}: {_describe(last)} (after {attempts} attempts)")

    async def _follow(self, url: str, params: dict[str, str] | None, method: str,
                      data: dict[str, str] | None, headers: dict[str, str], robots: bool,
                      follow: bool) -> Response:
        for _ in range(MAX_REDIRECTS + 1):
            self.check_url(url)
            if robots and not await self.robots_allow(url):
                raise BlockedURL(f"{_short(url)}: disallowed by the site's robots.txt")
            response = await self._once(url, params, method, data, headers)
            location = response.headers.get("location") if response.status in (
                301, 302, 303, 307, 308) else None
            if location is None or not follow:
                return response.finish()
            url = urljoin(url, location)
            params, data, method = None, None, "GET"
        raise NetError(f"{_short(url)}: more than {MAX_REDIRECTS} redirects")

    async def _once(self, url: str, params: dict[str, str] | None, method: str,
                    data: dict[str, str] | None, headers: dict[str, str]) -> _Partial:
        host = (urlsplit(url).hostname or "").lower()
        wait = PACING.reserve(host, self.policy.host_interval)
        if wait > 0:
            await asyncio.sleep(wait)
        NetStats.count()
        # One deadline for the whole exchange: httpx's timeouts are per read.
        async with asyncio.timeout(self.policy.timeout):
            request = self._client.build_request(method, url, params=params, data=data,
                                                 headers=headers)
            response = await self._client.send(request, stream=True)
            try:
                if response.status_code in TRANSIENT_STATUS:
                    raise _Retryable(f"HTTP {response.status_code}")
                # Decoded as it arrives and cut at the cap: a gzip bomb costs max_bytes.
                body = await aread_capped(response, self.policy.max_bytes)
            except BodyDecodeError as exc:
                raise NetError(f"{_short(url)}: {exc}") from None
            finally:
                await response.aclose()
        return _Partial(str(response.url), response.status_code, response.headers,
                        body.body(), body.over)

    async def robots_allow(self, url: str) -> bool:
        """Tell whether the site's robots.txt lets this client fetch ``url`` (read once)."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        with _ROBOTS_LOCK:
            parser = _ROBOTS.get(origin)
            # Facts fetched at once ask the same site: one of them reads its robots.txt.
            per_loop = _ROBOTS_READING.setdefault(asyncio.get_running_loop(), {})
            reading = per_loop.setdefault(origin, asyncio.Lock())
        if parser is None:
            async with reading:
                return await self._read_robots(origin, url)
        return parser.can_fetch(USER_AGENT, url)

    async def _read_robots(self, origin: str, url: str) -> bool:
        with _ROBOTS_LOCK:
            parser = _ROBOTS.get(origin)
        if parser is None:
            parser = RobotFileParser(origin + "/robots.txt")
            try:
                found = await self._once(origin + "/robots.txt", None, "GET", None, {})
            except BlockedURL:
                raise
            except (httpx.TransportError, TimeoutError, _Retryable):
                # A site whose robots.txt cannot be read is not fetched (as crawlers do).
                parser.parse(_DISALLOW_ALL)
            else:
                if found.status in (401, 403):
                    parser.parse(_DISALLOW_ALL)
                elif found.status >= 400:
                    parser.parse([])  # no robots.txt: everything may be fetched
                else:
                    parser.parse(found.body.decode("utf-8", "replace").splitlines())
            with _ROBOTS_LOCK:
                _ROBOTS[origin] = parser
        return parser.can_fetch(USER_AGENT, url)


class _Retryable(Exception):
    """A status worth another attempt (``kgcheck.failures.TRANSIENT_STATUS``)."""


@dataclass
class _Partial:
    url: str
    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool

    def finish(self) -> Response:
        content_type = self.headers.get("content-type", "")
        mime, _, rest = content_type.partition(";")
        charset = None
        for param in rest.split(";"):
            key, _, value = param.strip().partition("=")
            if key.lower() == "charset" and value:
                charset = value.strip('"\' ').lower()
        return Response(self.url, self.status, mime.strip().lower(), charset, self.body,
                        self.truncated)


def _short(url: str) -> str:
    return url if len(url) <= 120 else url[:117] + "..."


def _describe(exc: Exception | None) -> str:
    if exc is not None and classify(exc) is Failure.TIMEOUT:
        return "timed out"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({exc})" if str(exc) else "cannot connect"
    return str(exc) or type(exc).__name__


def forget_robots() -> None:
    """Drop the robots.txt rules read so far (tests start each server afresh)."""
    with _ROBOTS_LOCK:
        _ROBOTS.clear()
        _ROBOTS_READING.clear()
