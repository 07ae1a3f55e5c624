"""How many facts a run checks at once: fixed, or adapted to what the model server takes.

``AdaptiveLimit`` is additive-increase / multiplicative-decrease (AIMD) with a slow start,
the rules TCP uses for the same problem. It measures the run in rounds (one round: as many
completed facts as the current limit). It starts by doubling the limit each round, until
the first sign of congestion; from then on it adds one slot per round while latency holds,
that is while the round's mean latency stays within ``tolerance`` of the best round seen. A
longer latency means requests queue at the server, so the limit steps back by one. An
overload signal (429, 503 or a timeout, retried or not: see ``kgcheck.providers.pressure``)
cuts the limit to ``backoff`` of itself, at most once per round, and remembers the level
that overloaded the server: the limit then climbs back to just below it and stays there,
probing one step higher only every ``probe_rounds`` calm rounds (a rate-limited server
keeps its limit, so hovering under it beats a sawtooth). The limit stays within
``[minimum, maximum]``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kgcheck.providers.pressure import OVERLOAD_STATUS

# Verdict error types that mean "the server is overloaded or too slow", not "this fact".
OVERLOAD_ERRORS = {
    "RateLimitError", "APITimeoutError", "OpenAITimeoutError", "ReadTimeout", "TimeoutError",
    "TimeoutException", "ModelTimeoutError", "InternalServerError", "ServiceUnavailableError",
}


def is_overload(exc: BaseException) -> bool:
    """Tell whether a transport failure means the server wants fewer requests."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status in OVERLOAD_STATUS or type(exc).__name__ in OVERLOAD_ERRORS or (
        isinstance(exc, TimeoutError))


class FixedLimit:
    """A fixed number of facts in flight."""

    def __init__(self, limit: int) -> None:
        self.maximum = self.current = limit

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the slots (the runner starts exactly ``limit`` workers)."""
        yield

    def done(self, seconds: float, *, overloaded: bool = False) -> None:
        """Note a finished fact (nothing to adapt)."""

    def signal(self, exc: BaseException) -> None:
        """Note an overload signal (nothing to adapt)."""


class AdaptiveLimit:
    """An AIMD concurrency limit over a fixed pool of ``maximum`` workers.

    Args:
        maximum: The most facts in flight (``--max-concurrency``).
        initial: Where to start.
        minimum: The fewest facts in flight.
        tolerance: How much longer than the best round's mean latency a round may take
            before the limit stops growing (1.5: half as long again).
        backoff: The share of the limit kept after an overload signal.
        probe_rounds: Calm rounds below the last overloaded level before trying it again.

    """

    def __init__(self, maximum: int, *, initial: int = 2, minimum: int = 1,
                 tolerance: float = 1.5, backoff: float = 0.7, probe_rounds: int = 8) -> None:
        if maximum < 1:
            raise ValueError(f"--max-concurrency must be at least 1, got {maximum}")
        self.maximum = maximum
        self.minimum = max(1, min(minimum, maximum))
        self.current = max(self.minimum, min(initial, maximum))
        self.tolerance = tolerance
        self.backoff = backoff
        self.in_flight = 0
        self.peak = self.current
        self.cuts = 0
        # Doubling each round until the first congestion, then one more per round.
        self.slow_start = True
        self.probe_rounds = probe_rounds
        self._ceiling: int | None = None
        self._calm = 0
        self._changed = asyncio.Condition()
        self._round: list[float] = []
        self._round_overloaded = False
        self._cut_this_round = False
        self._best_latency = math.inf
        self._round_started = time.perf_counter()
        self.history: list[tuple[float, int]] = [(0.0, self.current)]
        self._t0 = time.perf_counter()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait until fewer than ``current`` facts are in flight, then hold a slot."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < self.current)
            self.in_flight += 1
        try:
            yield
        finally:
            async with self._changed:
                self.in_flight -= 1
                self._changed.notify_all()

    def signal(self, exc: BaseException) -> None:
        """Back off on an overload signal from the transport (once per round)."""
        if is_overload(exc):
            self._overloaded()

    def _overloaded(self) -> None:
        self._round_overloaded = True
        if self._cut_this_round:
            return
        self._cut_this_round = True
        self.cuts += 1
        self.slow_start = False
        self._ceiling = self.current
        self._calm = 0
        self._set(max(self.minimum, math.floor(self.current * self.backoff)))

    def done(self, seconds: float, *, overloaded: bool = False) -> None:
        """Note one finished fact and its latency; adapt at the end of a round."""
        if overloaded:
            self._overloaded()
        self._round.append(seconds)
        if len(self._round) < self.current:
            return
        mean = sum(self._round) / len(self._round)
        if not self._round_overloaded:
            self._best_latency = min(self._best_latency, mean)
            if mean <= self._best_latency * self.tolerance:
                self._set(min(self.maximum, self._grown()))
            else:
                self.slow_start = False
                self._set(max(self.minimum, self.current - 1))
        self._round = []
        self._round_overloaded = False
        self._cut_this_round = False
        self._round_started = time.perf_counter()

    def _grown(self) -> int:
        grown = self.current * 2 if self.slow_start else self.current + 1
        if self._ceiling is None or grown < self._ceiling:
            return grown
        self._calm += 1
        if self._calm >= self.probe_rounds:
            # Long calm at the old ceiling: the server may take more now.
            self._calm = 0
            return self.current + 1
        return max(self.current, self._ceiling - 1)

    def _set(self, value: int) -> None:
        if value == self.current:
            return
        self.current = value
        self.peak = max(self.peak, value)
        self.history.append((round(time.perf_counter() - self._t0, 3), value))
        # Waiters re-check their condition when a slot frees; a raised limit must wake
        # them now. notify_all needs the lock, which a sync caller cannot await: schedule.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.create_task(self._wake())

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()


Limit = FixedLimit | AdaptiveLimit


def parse_concurrency(value: str | int, maximum: int = 64) -> Limit:
    """Turn ``--concurrency N`` or ``--concurrency auto`` into a limit."""
    if isinstance(value, int) or str(value).strip().isdigit():
        number = int(value)
        if number < 1:
            raise ValueError(f"--concurrency must be at least 1, got {number}")
        return FixedLimit(number)
    if str(value).strip().lower() == "auto":
        return AdaptiveLimit(maximum)
    raise ValueError(f"--concurrency {value!r}: expected a whole number or 'auto'")
