"""The one hop between the event loop and a synchronous decode loop: a dedicated thread.

`DecodeThread.stream(job)` runs `job(cancel)` (a sync iterator of text deltas that checks the
`threading.Event` before every token) on the engine's own single thread and hands each delta
to the awaiting coroutine with `loop.call_soon_threadsafe`: no queue polling, no second
thread. Jobs run one at a time, in order (one model, one KV cache); a job still waiting for
the thread is dropped when its consumer goes away, a running one stops at its next token.
A job may yield `YIELD` between tokens: it is queued again behind the streams waiting, which
go first (a turn's first words should not wait for every earlier answer to be whole; the job
itself decides when, `others_waiting()`, and how to resume).

The thread also owns whatever the model needs to live on one thread (a CUDA context, a
llama.cpp context): every call into the model happens there. `background(work)` runs
best-effort work (warming the KV cache) only while no stream is queued or running, and
`work`'s event tells it to stop as soon as one arrives.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import aclosing
from typing import Final, TypeVar

from common.cpu_priority import THINKING, lower_this_thread

T = TypeVar("T")


class Yield:
    """A job's "the streams waiting may go first" (`YIELD`)."""


YIELD: Final = Yield()
Job = Callable[[threading.Event], Iterable[str | Yield]]
DONE: Final = object()  # a stream's end, after its last delta


class Mailbox:
    """A stream's deltas from the decode thread to the coroutine awaiting them.

    `put` (any thread) hands over a delta, an exception or `DONE` with
    `call_soon_threadsafe`; unbounded, as the producer must never block on the loop (the
    job's token limit bounds it). A closed loop means nobody listens: `cancel` is set."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._items: asyncio.Queue[object] = asyncio.Queue()
        self.cancel = threading.Event()

    def put(self, item: object) -> None:
        try:
            self._loop.call_soon_threadsafe(self._items.put_nowait, item)
        except RuntimeError:  # the loop closed under us
            self.cancel.set()

    async def deltas(self) -> AsyncGenerator[str, None]:
        """The deltas until `DONE`; an exception put is raised here."""
        while (item := await self._items.get()) is not DONE:
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, str)
            yield item


class DecodeThread:
    def __init__(self, name: str, lower: int = THINKING) -> None:
        # Below the listening path's priority by `lower` nice levels (common/cpu_priority.py);
        # llama.cpp's worker threads, started from this one, inherit it.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name,
                                        initializer=lower_this_thread, initargs=(lower,))
        self.lower = lower  # nice levels below the listening path it runs at
        self._lock = threading.Lock()
        self._streams = 0  # queued or running
        self._yield = threading.Event()  # set while a stream waits: background work stops

    def lower_to(self, lower: int) -> None:
        """On the decode thread: run `lower` levels below the listening path from now on, if
        that is lower than now (an engine placed on a GPU that decodes on the CPU after all:
        the priority it was given for waiting on a device is too high for CPU work). Threads
        it starts afterwards (torch's, llama.cpp's) inherit it; a raise would need privileges."""
        if lower > self.lower:
            lower_this_thread(lower - self.lower)
            self.lower = lower

    def background(self, work: Callable[[threading.Event], None]) -> bool:
        """Queue `work(stop)` unless a stream is queued or running; False if skipped."""
        with self._lock:
            if self._streams:
                return False

        def run() -> None:
            with self._lock:
                if self._streams:
                    return
            work(self._yield)

        self._pool.submit(run)
        return True

    def others_waiting(self) -> bool:
        """Another stream is queued (or resting after a `YIELD`) besides the caller's."""
        with self._lock:
            return self._streams > 1

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the decode thread and wait for it (loading, warm-up, token counts)."""
        return self._pool.submit(fn).result()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Queue `fn` on the decode thread; its future (await it with `asyncio.wrap_future`)."""
        return self._pool.submit(fn)

    def start(self, fn: Callable[[], None]) -> None:
        """Queue `fn` on the decode thread without waiting (engines/llm/batch_streams.py: a
        loop over the streams decoding together, which returns when none is left)."""
        self._pool.submit(fn)

    async def stream(self, job: Job) -> AsyncGenerator[str, None]:
        mailbox = Mailbox()
        cancel, hand_over = mailbox.cancel, mailbox.put

        def run(resumed: Iterator[str | Yield] | None = None) -> None:
            outcome: object = DONE
            produced: Iterator[str | Yield] | None = resumed
            try:
                if produced is None:
                    produced = iter(job(cancel))
                while not cancel.is_set():  # (checked before a resumed job prefills again)
                    delta = next(produced, DONE)
                    if delta is DONE:
                        break
                    if isinstance(delta, Yield):
                        self._pool.submit(run, produced)  # FIFO: the waiting ones go first
                        return
                    assert isinstance(delta, str)
                    hand_over(delta)
                close = getattr(produced, "close", None)
                if close is not None:
                    close()  # here, on the thread that owns the model
            except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
                outcome = exc
            self._stream_done()  # before the consumer hears the end: the thread is free
            hand_over(outcome)

        with self._lock:
            self._streams += 1
            self._yield.set()
        try:
            future = self._pool.submit(run)
        except BaseException:
            self._stream_done()
            raise
        try:
            async with aclosing(mailbox.deltas()) as deltas:
                async for delta in deltas:
                    yield delta
        finally:
            cancel.set()
            if future.cancel():  # a job still queued behind another never starts
                self._stream_done()

    def _stream_done(self) -> None:
        with self._lock:
            self._streams -= 1
            if not self._streams:
                self._yield.clear()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
