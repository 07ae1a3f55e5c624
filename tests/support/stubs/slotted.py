"""An OpenAI-compatible stub with a fixed number of slots, like a model server at capacity.

Each answer takes ``seconds``. With ``mode="reject"`` a request that finds every slot busy
gets ``429 Too Many Requests`` at once (a rate-limited API); with ``mode="queue"`` it waits
for a slot (a vLLM-style server: latency grows, throughput does not). The stub's capacity
is ``slots / seconds`` answers per second. ``python -m tests.support.stubs.slotted --slots 8``
serves one in the foreground (benchmarks run it in its own process, off their event loop).
"""

from __future__ import annotations

import argparse
import threading
import time
from dataclasses import dataclass
from typing import Any

from tests.support.stubs.base import Behaviour, serve_in_foreground
from tests.support.stubs.openai import OpenAIHandler, OpenAIStub


@dataclass
class Slots:
    """The server's capacity and what it does beyond it."""

    slots: int = 4
    seconds: float = 0.1
    mode: str = "reject"
    busy: int = 0
    rejected: int = 0
    peak: int = 0

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.free = threading.Semaphore(self.slots)


class SlottedHandler(OpenAIHandler):
    """Answer within the slots; beyond them reject with 429 or queue."""

    def completions(self, body: Any) -> None:
        """Hold a slot for ``seconds``, then answer as the OpenAI stub does."""
        slots: Slots = self.server.slots  # type: ignore[attr-defined]
        if slots.mode == "reject":
            if not slots.free.acquire(blocking=False):
                with slots.lock:
                    slots.rejected += 1
                self.send_json(429, {"error": {"message": "Rate limit reached: all slots are "
                                               "busy", "type": "requests", "param": None,
                                               "code": "rate_limit_exceeded"}})
                return
        else:
            slots.free.acquire()
        try:
            with slots.lock:
                slots.busy += 1
                slots.peak = max(slots.peak, slots.busy)
            time.sleep(slots.seconds)
            super().completions(body)
        finally:
            with slots.lock:
                slots.busy -= 1
            slots.free.release()


class SlottedStub(OpenAIStub):
    """An OpenAI-compatible server with ``slots`` concurrent answers of ``seconds`` each."""

    handler = SlottedHandler

    def __init__(self, slots: Slots, behaviour: Behaviour | None = None) -> None:
        super().__init__(behaviour)
        self.slots = slots

    def start(self) -> SlottedStub:
        """Serve, with the slots where the handlers find them."""
        super().start()
        assert self._server is not None
        self._server.slots = self.slots  # type: ignore[attr-defined]
        return self

    @property
    def capacity(self) -> float:
        """Answers per second the server can give."""
        return self.slots.slots / self.slots.seconds


def main() -> None:
    """Serve a slotted stub until interrupted; print its URL first."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.stubs.slotted")
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--mode", choices=["reject", "queue"], default="reject")
    args = parser.parse_args()
    serve_in_foreground(SlottedStub(Slots(args.slots, args.seconds, args.mode)))


if __name__ == "__main__":
    main()
