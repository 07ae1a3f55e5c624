"""How many facts a run checks at once: fixed, or adapted to what the model server takes.

``AdaptiveLimit`` is additive-increase / multiplicative-decrease (AIMD) with a slow start,
the rules TCP uses for the same problem. It measures the run in rounds (one round: as many
completed facts as the current limit). It starts by doubling the limit each
round, until the first sign of congestion; from then on it adds one slot per round while
latency holds, that is while the round's mean latency stays within ``tolerance`` of the
best round seen. A longer latency means requests queue at the server, so the limit steps
back by one.

An overload signal (429, 503 or a timeout, retried or not: see
``kgcheck.providers.pressure``) steps the limit back at most once per round, by as much as
the signal tells:

- in slow start, to the level of the last calm round (the doubling overshot);
- after a calm round, by one (the limit just probed past the server's edge, or one
  request raced another for a slot);
- after an overloaded round, to ``backoff`` of itself (the overload persists: the server
  takes less than before, e.g. because another client now shares it).

The limit then climbs back to just below the level that overloaded the server and stays
there, probing one step higher only every ``probe_rounds`` calm rounds (a rate-limited
server keeps its limit, so hovering under it beats a sawtooth). It stays within
``[minimum, maximum]``.

The limit counts facts whose requests are at the server. A fact whose request was turned
away lends its slot while its client waits to retry, and takes one again, waiting if need
be, before the retry goes out (``retake``, a request hook): a fact asleep in a retry pause
would otherwise hold a slot the server could fill, and a rejecting server would idle below
its capacity while the turned-away requests wait.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kgcheck.arguments import Arg, ArgumentError
from kgcheck.failures import is_overload

__all__ = ["AdaptiveLimit", "FixedLimit", "Held", "Limit", "parse_concurrency"]


class FixedLimit:
    """A fixed number of facts in flight."""

    def __init__(self, limit: int) -> None:
        self.maximum = self.current = limit

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Held]:
        """Hold one of the slots (the runner starts exactly ``limit`` workers)."""
        yield Held(None)

    def done(self, seconds: float, *, overloaded: bool = False) -> None:
        """Note a finished fact (nothing to adapt)."""

    def signal(self, exc: BaseException) -> None:
        """Note an overload signal (nothing to adapt)."""

    async def retake(self) -> None:
        """Let a request go out (slots are never lent)."""


class Held:
    """One fact's slot: lent or held, and how long the fact has been at work.

    Time lent is not work: a retry pause is not server latency.
    """

    __slots__ = ("limit", "lent", "_started", "_lent_at", "_lent_seconds")

    def __init__(self, limit: AdaptiveLimit | None) -> None:
        self.limit = limit
        self.lent = False
        self._started = time.perf_counter()
        self._lent_at = 0.0
        self._lent_seconds = 0.0

    def lend(self) -> None:
        """Mark the slot lent from now."""
        self.lent = True
        self._lent_at = time.perf_counter()

    def take(self) -> None:
        """Mark the slot held again."""
        self.lent = False
        self._lent_seconds += time.perf_counter() - self._lent_at

    def active_seconds(self) -> float:
        """Seconds since the slot was taken, less the time it was lent."""
        now = time.perf_counter()
        lent = self._lent_seconds + (now - self._lent_at if self.lent else 0.0)
        return max(0.0, now - self._started - lent)


# The slot of the fact this task works on; the graph's tasks inherit it.
_HELD: contextvars.ContextVar[Held | None] = contextvars.ContextVar("kgcheck_held_slot",
                                                                    default=None)


class AdaptiveLimit:
    """An AIMD concurrency limit over a fixed pool of ``maximum`` workers.

    Args:
        maximum: The most facts in flight (``--max-concurrency``).
        initial: Where to start.
        minimum: The fewest facts in flight.
        tolerance: How much longer than the best round's mean latency a round may take
            before the limit stops growing (1.5: half as long again).
        backoff: The share of the limit kept when overload persists over rounds.
        probe_rounds: Calm rounds below the last overloaded level before trying it again.

    """

    def __init__(self, maximum: int, *, initial: int = 4, minimum: int = 1,
                 tolerance: float = 1.5, backoff: float = 0.7, probe_rounds: int = 8) -> None:
        if maximum < 1:
            raise ArgumentError("{maximum} must be at least 1",
                                maximum=Arg("max_concurrency", maximum))
        self.maximum = maximum
        self.minimum = max(1, min(minimum, maximum))
        self.current = max(self.minimum, min(initial, maximum))
        self.tolerance = tolerance
        self.backoff = backoff
        self.probe_rounds = probe_rounds
        self.in_flight = 0
        self.peak = self.current
        self.cuts = 0
        self.lent = 0  # slots lent by turned-away facts while they waited to retry
        # Doubling each round until the first congestion, then one more per round.
        self.slow_start = True
        self._ceiling: int | None = None
        self._calm = 0
        # The level of the last calm round, and overloaded rounds in a row (one is the
        # server's edge, more a server that takes less than it did).
        self._calm_level: int | None = None
        self._overloaded_rounds = 0
        self._changed = asyncio.Condition()
        self._wakers: set[asyncio.Task[None]] = set()
        self._round: list[float] = []
        self._round_overloaded = False
        self._round_stale = False
        self._lowered_at = -math.inf
        self._cut_this_round = False
        self._best_latency = math.inf
        self.history: list[tuple[float, int]] = [(0.0, self.current)]
        self._t0 = time.perf_counter()

    async def _acquire(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < self.current)
            self.in_flight += 1

    async def _release(self) -> None:
        async with self._changed:
            self.in_flight -= 1
            self._notify_free()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Held]:
        """Wait until fewer than ``current`` facts are in flight, then hold a slot."""
        await self._acquire()
        held = Held(self)
        token = _HELD.set(held)
        try:
            yield held
        finally:
            _HELD.reset(token)
            if not held.lent:
                await self._release()

    async def retake(self) -> None:
        """Before a request goes out: take the slot back if this fact lent it."""
        held = _HELD.get()
        if held is None or held.limit is not self or not held.lent:
            return
        await self._acquire()
        held.take()

    def signal(self, exc: BaseException) -> None:
        """On an overload signal: lend this fact's slot, and back off (once per round)."""
        if not is_overload(exc):
            return
        held = _HELD.get()
        if held is not None and held.limit is self and not held.lent:
            held.lend()
            self.lent += 1
            self.in_flight -= 1
            self._wake_soon()
        self._overloaded()

    def _overloaded(self) -> None:
        self._round_overloaded = True
        # An excess still draining from an earlier cut says nothing of the current level.
        if self._cut_this_round or self.in_flight > self.current:
            return
        self._cut_this_round = True
        self.cuts += 1
        self._ceiling = self.current
        self._calm = 0
        if self.slow_start and self._calm_level is not None:
            target = min(self._calm_level, self.current - 1)
        elif self._overloaded_rounds == 0 and not self.slow_start:
            target = self.current - 1
        else:
            target = math.floor(self.current * self.backoff)
        self.slow_start = False
        self._set(max(self.minimum, target))

    def done(self, seconds: float, *, overloaded: bool = False) -> None:
        """Note one finished fact and its latency; adapt at the end of a round."""
        if overloaded:
            self._overloaded()
        self._round.append(seconds)
        # A fact that started before the limit was last lowered ran under the old level.
        self._round_stale |= time.perf_counter() - seconds < self._lowered_at
        if len(self._round) < self.current:
            return
        mean = sum(self._round) / len(self._round)
        self._overloaded_rounds = self._overloaded_rounds + 1 if self._round_overloaded else 0
        if not self._round_overloaded and not self._round_stale:
            self._calm_level = self.current
            self._best_latency = min(self._best_latency, mean)
            if mean <= self._best_latency * self.tolerance:
                self._set(min(self.maximum, self._grown()))
            else:
                # Requests queue: by Little's law the server works on about
                # limit x best / mean of them at once; step back towards that.
                self.slow_start = False
                queued = math.floor(self.current * self._best_latency / mean)
                self._set(max(self.minimum, self.current // 2,
                              min(self.current - 1, queued)))
        self._round = []
        self._round_overloaded = self._round_stale = False
        self._cut_this_round = False

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
        if value < self.current:
            self._lowered_at = time.perf_counter()
        self.current = value
        self.peak = max(self.peak, value)
        self.history.append((round(time.perf_counter() - self._t0, 3), value))
        self._wake_soon()

    def _wake_soon(self) -> None:
        # Waiters re-check their condition when a slot frees; a raised limit or a lent slot
        # must wake them now. Notifying needs the lock, which a sync caller cannot await.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._wake())
        # The loop keeps only a weak reference to a task: hold it until it has run.
        self._wakers.add(task)
        task.add_done_callback(self._wakers.discard)

    async def _wake(self) -> None:
        async with self._changed:
            self._notify_free()

    def _notify_free(self) -> None:
        # Wake as many waiters as there are free slots (waking all of them for each freed
        # slot costs the event loop a round of wake-ups per fact, with 64 waiting).
        free = self.current - self.in_flight
        if free > 0:
            self._changed.notify(free)


Limit = FixedLimit | AdaptiveLimit


def parse_concurrency(value: str | int, maximum: int = 64) -> Limit:
    """Turn ``--concurrency N`` or ``--concurrency auto`` into a limit."""
    if isinstance(value, int) or str(value).strip().isdigit():
        number = int(value)
        if number < 1:
            raise ArgumentError("{concurrency} must be at least 1",
                                concurrency=Arg("concurrency", number))
        return FixedLimit(number)
    if str(value).strip().lower() == "auto":
        return AdaptiveLimit(maximum)
    raise ArgumentError("{concurrency}: expected a whole number or 'auto'",
                        concurrency=Arg("concurrency", value))
