"""One clock per session: the timeline both outbound tracks and the scheduler share.

Time is seconds since `start()`. Tracks compute pts from sample/frame counts on this timeline
and sleep until `origin + pts`, so audio and video can never drift apart (each track pacing
itself from its own start time is the classic aiortc lip-sync bug).

`Timer` is injectable so tests run the tracks on a fake clock without real sleeping.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Timer(Protocol):
    def now(self) -> float: ...

    async def sleep(self, delay: float) -> None: ...


class MonotonicTimer:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, delay: float) -> None:
        await asyncio.sleep(delay)


class FakeTimer:
    """Deterministic timer for tests: sleeping advances time instantly."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, delay: float) -> None:
        self._now += max(0.0, delay)

    async def sleep(self, delay: float) -> None:
        self.advance(delay)
        await asyncio.sleep(0)


class MediaClock:
    """Session timeline. `time()` is seconds since `start()` (0.0 before it)."""

    def __init__(self, timer: Timer | None = None) -> None:
        self._timer: Timer = timer or MonotonicTimer()
        self._origin: float | None = None

    @property
    def started(self) -> bool:
        return self._origin is not None

    def start(self) -> None:
        """Fix the origin. Idempotent: the first call wins."""
        if self._origin is None:
            self._origin = self._timer.now()

    def time(self) -> float:
        if self._origin is None:
            return 0.0
        return self._timer.now() - self._origin

    async def sleep_until(self, t: float) -> None:
        """Sleep until timeline time `t` (returns at once if it has passed)."""
        self.start()
        delay = t - self.time()
        if delay > 0:
            await self._timer.sleep(delay)
