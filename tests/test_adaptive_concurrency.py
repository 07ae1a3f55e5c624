"""Adaptive concurrency: AIMD grows while latency holds and backs off on overload."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import kgcheck
from kgcheck.evals.concurrency import AdaptiveLimit, FixedLimit, is_overload, parse_concurrency
from tests.stubs.slotted import Slots, SlottedStub


class Status(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"status {status}")
        self.status_code = status


def finish_round(limit: AdaptiveLimit, seconds: float) -> None:
    for _ in range(limit.current):
        limit.done(seconds)


def test_it_doubles_until_congestion_then_grows_by_one_per_round() -> None:
    limit = AdaptiveLimit(64, initial=2)
    levels = []
    for _ in range(3):
        finish_round(limit, 0.1)
        levels.append(limit.current)
    assert levels == [4, 8, 16]
    limit.signal(Status(429))  # congestion: 16 -> 11, and slow start ends
    levels = []
    for _ in range(3):
        finish_round(limit, 0.1)
        levels.append(limit.current)
    assert levels == [11, 12, 13], "the overloaded round holds, then one more per round"


def test_it_stops_at_the_maximum() -> None:
    limit = AdaptiveLimit(4, initial=2)
    for _ in range(10):
        finish_round(limit, 0.1)
    assert limit.current == 4 and limit.peak == 4


def test_queueing_latency_steps_it_back() -> None:
    limit = AdaptiveLimit(32, initial=4)
    finish_round(limit, 0.1)
    assert limit.current == 8
    # Requests now wait at the server: twice the best latency is past the tolerance.
    finish_round(limit, 0.2)
    assert limit.current == 7 and not limit.slow_start
    finish_round(limit, 0.1)
    assert limit.current == 8


def test_an_overload_signal_cuts_once_per_round() -> None:
    limit = AdaptiveLimit(32, initial=10)
    limit.signal(Status(429))
    assert limit.current == 7
    limit.signal(Status(503))
    assert limit.current == 7, "a second signal in the same round cut again"
    finish_round(limit, 0.1)
    assert limit.current == 7, "an overloaded round must not grow the limit"
    limit.signal(Status(429))
    assert limit.current == 4 and limit.cuts == 2
    limit.signal(Status(400))  # a bad request is not overload
    assert limit.current == 4


def test_it_never_drops_below_the_minimum() -> None:
    limit = AdaptiveLimit(8, initial=1)
    for _ in range(5):
        limit.signal(Status(429))
        finish_round(limit, 0.1)
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


@pytest.mark.integration
def test_auto_backs_off_from_a_server_at_capacity(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
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
    assert summary["concurrency"]["final"] <= 12


def test_after_an_overload_it_hovers_below_that_level_and_probes_now_and_then() -> None:
    limit = AdaptiveLimit(64, initial=10, probe_rounds=3)
    limit.signal(Status(429))  # 10 overloaded the server
    assert limit.current == 7
    levels = []
    for _ in range(6):
        finish_round(limit, 0.1)
        levels.append(limit.current)
    # The overloaded round holds; then 8, 9 (just below 10), hold, then a probe to 10.
    assert levels == [7, 8, 9, 9, 9, 10]
