"""Adaptive concurrency: AIMD grows while latency holds and backs off on overload."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import kgcheck
from kgcheck.providers import pressure
from kgcheck.runs.concurrency import AdaptiveLimit, FixedLimit, is_overload, parse_concurrency
from tests.support.stubs.slotted import Slots, SlottedStub


class Status(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"status {status}")
        self.status_code = status


def finish_round(limit: AdaptiveLimit, seconds: float = 0.002) -> None:
    """A round of facts that each took ``seconds``, all started after the round began."""
    time.sleep(seconds)
    for _ in range(limit.current):
        limit.done(seconds)


def rounds(limit: AdaptiveLimit, count: int, seconds: float = 0.002) -> list[int]:
    levels = []
    for _ in range(count):
        finish_round(limit, seconds)
        levels.append(limit.current)
    return levels


def test_it_doubles_until_congestion_then_grows_by_one_per_round() -> None:
    limit = AdaptiveLimit(64, initial=2)
    assert rounds(limit, 3) == [4, 8, 16]
    limit.signal(Status(429))  # the doubling overshot: back to 8, the last calm level
    assert limit.current == 8 and not limit.slow_start
    assert rounds(limit, 3) == [8, 9, 10], "the overloaded round holds, then one per round"


def test_an_overload_after_a_calm_round_steps_back_by_one_and_persisting_cuts_deeper() -> None:
    limit = AdaptiveLimit(64, initial=12)
    limit.signal(Status(429))  # no calm round yet: 12 -> 8 (0.7)
    assert rounds(limit, 2) == [8, 9]
    limit.signal(Status(429))  # just past the edge after a calm round: one step back
    assert limit.current == 8
    finish_round(limit)
    limit.signal(Status(429))  # overloaded two rounds in a row: the server takes less now
    assert limit.current == 5 and limit.cuts == 3


def test_it_stops_at_the_maximum() -> None:
    limit = AdaptiveLimit(4, initial=2)
    rounds(limit, 10)
    assert limit.current == 4 and limit.peak == 4


def test_queueing_latency_steps_it_back_towards_what_the_server_works_on() -> None:
    limit = AdaptiveLimit(64, initial=16)
    finish_round(limit, 0.002)
    assert limit.current == 32
    # Requests now wait at the server: 1.6 times the best latency is past the tolerance,
    # and by Little's law the server works on about 32 / 1.6 = 20 of them.
    finish_round(limit, 0.0032)
    assert limit.current == 20 and not limit.slow_start
    # Latency four times the best: never more than half at once.
    finish_round(limit, 0.002)
    assert limit.current == 21
    finish_round(limit, 0.008)
    assert limit.current == 10


def test_a_round_of_facts_started_before_a_cut_neither_grows_nor_cuts_it() -> None:
    limit = AdaptiveLimit(64, initial=8)
    finish_round(limit, 0.002)
    assert limit.current == 16
    finish_round(limit, 0.004)  # queueing: 16 -> 8
    assert limit.current == 8
    # Facts that were queued under 16 finish now, slowly: they say nothing about 8.
    for _ in range(8):
        limit.done(0.05)
    assert limit.current == 8
    finish_round(limit, 0.002)
    assert limit.current == 9


def test_an_overload_signal_cuts_once_per_round() -> None:
    limit = AdaptiveLimit(32, initial=10)
    limit.signal(Status(429))
    assert limit.current == 7
    limit.signal(Status(503))
    assert limit.current == 7, "a second signal in the same round cut again"
    finish_round(limit)
    assert limit.current == 7, "an overloaded round must not grow the limit"
    limit.signal(Status(429))
    assert limit.current == 4 and limit.cuts == 2
    limit.signal(Status(400))  # a bad request is not overload
    assert limit.current == 4


def test_it_never_drops_below_the_minimum() -> None:
    limit = AdaptiveLimit(8, initial=1)
    for _ in range(5):
        limit.signal(Status(429))
        finish_round(limit)
    assert limit.current >= 1


def test_overload_means_429_503_and_timeouts() -> None:
    assert is_overload(Status(429)) and is_overload(Status(503)) and is_overload(TimeoutError())
    assert not is_overload(Status(404)) and not is_overload(ValueError("bad"))


def test_parse_concurrency() -> None:
    assert isinstance(parse_concurrency("8"), FixedLimit)
    auto = parse_concurrency("auto", 16)
    assert isinstance(auto, AdaptiveLimit) and auto.maximum == 16
    with pytest.raises(ValueError, match="whole number or 'auto'"):
        parse_concurrency("lots")
    with pytest.raises(ValueError, match="at least 1"):
        parse_concurrency("0")


async def test_slots_are_held_up_to_the_current_limit() -> None:
    limit = AdaptiveLimit(8, initial=2)
    in_flight = peak = 0

    async def one() -> None:
        nonlocal in_flight, peak
        async with limit.slot():
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1

    await asyncio.gather(*(one() for _ in range(8)))
    assert peak == 2


async def test_a_turned_away_fact_lends_its_slot_until_its_retry_goes_out() -> None:
    limit = AdaptiveLimit(8, initial=2)
    order: list[str] = []
    b_started, c_started, retry_may_go = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def turned_away() -> None:
        async with limit.slot() as held:
            await b_started.wait()
            limit.signal(Status(429))  # the hook, in this fact's context: lend the slot
            assert held.lent and limit.in_flight == 1
            await retry_may_go.wait()  # the client's retry pause
            await limit.retake()  # the request hook, before the retry goes out
            order.append("a retries")
            assert not held.lent
        order.append("a done")

    async def busy(name: str, started: asyncio.Event, seconds: float) -> None:
        async with limit.slot():
            order.append(f"{name} starts")
            started.set()
            await asyncio.sleep(seconds)
        order.append(f"{name} done")

    async def pause_then_retry() -> None:
        await c_started.wait()
        retry_may_go.set()

    await asyncio.gather(turned_away(), busy("b", b_started, 0.05),
                         busy("c", c_started, 0.1), pause_then_retry())
    # The 429 cut the limit 2 -> 1 (no calm round yet) and lent a's slot, which c took
    # once b had finished (the limit is 1 now); a's retry waited for c in turn.
    assert order.index("b done") < order.index("c starts") < order.index("c done")
    assert order.index("c done") < order.index("a retries")
    assert limit.in_flight == 0 and limit.lent == 1


async def test_time_lent_is_not_counted_as_latency() -> None:
    limit = AdaptiveLimit(8)
    async with limit.slot() as held:
        limit.signal(Status(429))
        await asyncio.sleep(0.05)
        await limit.retake()
        await asyncio.sleep(0.01)
        assert 0.009 <= held.active_seconds() < 0.04


async def test_requests_await_the_run_gate_and_overload_answers_reach_the_listener() -> None:
    import httpx

    seen: list[BaseException] = []
    gated: list[str] = []

    async def gate() -> None:
        gated.append("gate")

    def answer(request: httpx.Request) -> httpx.Response:
        gated.append("sent")
        return httpx.Response(429 if request.url.path == "/busy" else 200)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer),
                                 event_hooks=pressure.async_hooks()) as client:
        with pressure.listening(seen.append, gate):
            await client.get("http://model/ok")
            await client.get("http://model/busy")
        await client.get("http://model/ok")  # outside the run: no gate, no listener
    assert gated == ["gate", "sent", "gate", "sent", "sent"]
    assert [getattr(exc, "status_code", None) for exc in seen] == [429]


@pytest.mark.usefixtures("no_openai_env")
def test_auto_backs_off_from_a_server_at_capacity(tmp_path: Path) -> None:
    facts = [{"id": str(n), "subject": f"S{n}", "predicate": "p", "object": "o"}
             for n in range(60)]
    with SlottedStub(Slots(slots=3, seconds=0.05, mode="reject")) as stub:
        result = kgcheck.run(facts=facts, model="openai-compatible:stub-model", out=tmp_path,
                             settings={"base_url": stub.url, "retry_backoff": 0.05,
                                       "max_retries": 8},
                             concurrency="auto", max_concurrency=12, cache=False)
    summary = result.summary
    # Every fact answered despite the 429s, and the limit was cut when they came.
    assert summary["errors"] == 0 and summary["verdicts"]["T"] == 60
    assert summary["concurrency"]["mode"] == "auto"
    assert stub.slots.rejected > 0 and summary["concurrency"]["backoffs"] > 0
    assert summary["concurrency"]["lent"] > 0, "turned-away facts kept their slots"
    assert summary["concurrency"]["final"] <= 12


def test_after_an_overload_it_hovers_below_that_level_and_probes_now_and_then() -> None:
    limit = AdaptiveLimit(64, initial=10, probe_rounds=3)
    limit.signal(Status(429))  # 10 overloaded the server
    assert limit.current == 7
    # The overloaded round holds; then 8, 9 (just below 10), hold, then a probe to 10.
    assert rounds(limit, 6) == [7, 8, 9, 9, 9, 10]
    limit.signal(Status(429))  # the probe found the edge still there: back to 9
    assert limit.current == 9
