"""Which chunk the process's TTS threads synthesize next: the one whose audio is needed first.

The sessions of one server process share its TTS threads. Taken in arrival order, a burst of
answers (sessions asking at about the same time) queued each session's first chunk behind
the others' later chunks, whose audio was not needed for a second or more: on the H200
machine, 5-6 sessions per worker, the first audio left ~0.5 s after the LLM's first token
(bench/RESULTS.md, gpu). So the queue is earliest deadline first: a chunk is due when the
audio its turn already has runs out (`slack_s` from now; a first chunk: now), and a free
thread takes the waiting chunk due first (the same due: the one that came first).

A chunk's thread stays taken until the synthesis returns, even when the chunk's turn was
cancelled meanwhile (a running synthesis cannot be stopped): a freed slot goes to the next
chunk only when its thread is free, so the executor never queues work behind the queue's back.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")


class SpeechQueue:
    """At most `threads` calls on `executor` at once; the waiting ones go earliest-due first."""

    def __init__(self, executor: Executor, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self._executor = executor
        self._free = threads
        self._waiting: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def waiting(self) -> int:
        """Calls waiting for a thread (cancelled ones may still be counted until skipped)."""
        return len(self._waiting)

    async def run(self, slack_s: float, fn: Callable[..., T], *args: Any,
                  on_start: Callable[[], None] | None = None) -> T:
        """`fn(*args)` on a thread once every call due before `now + slack_s` has one;
        `on_start()` (on the loop) as it gets its thread."""
        loop = asyncio.get_running_loop()
        await self._take(loop, loop.time() + max(0.0, slack_s))
        try:
            if on_start is not None:
                on_start()
            job: Future[T] = self._executor.submit(fn, *args)
        except BaseException:
            self._give_back()
            raise

        def done(_: Future[T]) -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(self._give_back)

        job.add_done_callback(done)
        return await asyncio.wrap_future(job)

    async def _take(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        if self._free and not self._waiting:
            self._free -= 1
            return
        granted: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._waiting, (due, next(self._order), granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._give_back()  # granted as the caller went away: pass the thread on
            raise

    def _give_back(self) -> None:
        while self._waiting:
            _, _, granted = heapq.heappop(self._waiting)
            if not granted.done():
                granted.set_result(None)
                return
        self._free += 1
