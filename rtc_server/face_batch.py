"""Cross-session batching of face-model calls: the chunks that arrive together share one call.

Contract: `FaceBatcher.predict(features) -> offsets` (async) for one session's chunk. The first
request that finds the batcher idle opens a window of `window_s`; every request that arrives
before it closes (or until `max_batch` are waiting) goes into one `predict_batch` call on the
face executor (one thread: it owns the CUDA context and the captured graphs), and each caller
gets its own frames, equal to a batch-1 call within float rounding (batching pads with
silence, which the model reads past every utterance anyway). Requests that arrive while a
call runs wait for the next one; a request that has already waited a whole window when the
worker comes back to it is dispatched at once, so nobody waits more than one window plus the
call before it. Each request is checked before it queues (a bad one fails only its caller);
a failing call fails only the callers in it; a caller that is cancelled is dropped from its
batch, or its late result is. At most `max_pending` requests wait; more callers wait for room.

Why only on the GPU (`enabled()`): a CUDA call costs nearly the same for 1 or 64 utterances
(bench/RESULTS.md, section gpu), while on the CPU a batch costs the sum of its parts, so the
window would only add latency there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from engines.face.config import FaceConfig
from engines.face.errors import FaceError

logger = logging.getLogger(__name__)

BatchFn = Callable[[Sequence[np.ndarray]], list[np.ndarray]]


def enabled(config: FaceConfig) -> bool:
    """`[face] batch`, or by default: on for torch on CUDA and for TensorRT."""
    if config.batch is not None:
        return config.batch
    return config.engine == "tensorrt" or (
        config.engine == "torch" and config.device.startswith("cuda")
    )


@dataclass(frozen=True)
class BatchReport:
    size: int  # requests in the call
    waited_s: float  # longest wait of one of them, from its arrival to the call's start
    run_s: float  # the call itself, on the executor


@dataclass
class _Request:
    features: np.ndarray
    future: asyncio.Future[np.ndarray]
    arrived: float


class FaceBatcher:
    def __init__(
        self,
        predict_batch: BatchFn,
        executor: Executor,
        *,
        window_s: float,
        max_batch: int,
        max_pending: int = 256,
        check: Callable[[np.ndarray], np.ndarray] | None = None,
        on_batch: Callable[[BatchReport], None] | None = None,
        timer: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if window_s < 0 or max_batch < 1 or max_pending < max_batch:
            raise ValueError("window_s >= 0, max_batch >= 1, max_pending >= max_batch")
        self._predict_batch = predict_batch
        self._executor = executor
        self._window_s = window_s
        self._max_batch = max_batch
        self._check = check
        self._on_batch = on_batch
        self._timer = timer  # the window's wait (a fake in tests)
        self._clock = clock
        self._pending: deque[_Request] = deque()
        self._room = asyncio.Semaphore(max_pending)
        self._arrived = asyncio.Event()  # something is pending
        self._full = asyncio.Event()  # a whole batch is pending: close the window early
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    async def predict(self, features: np.ndarray) -> np.ndarray:
        """This chunk's landmark offsets, computed in a batch with whatever else is waiting."""
        if self._closed:
            raise FaceError("the face batcher is closed")
        checked = self._check(features) if self._check is not None else features
        async with self._room:
            future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
            self._pending.append(_Request(checked, future, self._clock()))
            self._arrived.set()
            if len(self._pending) >= self._max_batch:
                self._full.set()
            if self._worker is None:
                self._worker = asyncio.get_running_loop().create_task(
                    self._work(), name="face-batcher"
                )
            return await future  # cancelled with its caller: the worker skips it

    def stop(self) -> None:
        """Stop the worker from the loop's thread without waiting for it (sync shutdown
        paths); requests still waiting fail with `FaceError`. Idempotent."""
        self._closed = True
        if self._worker is not None:
            self._worker.cancel()
        self._fail_pending(FaceError("the face batcher was closed"))

    async def close(self) -> None:
        """Stop the worker and wait until it has stopped. Idempotent."""
        worker = self._worker
        self.stop()
        self._worker = None
        if worker is not None:
            await asyncio.gather(worker, return_exceptions=True)

    def _fail_pending(self, exc: BaseException) -> None:
        while self._pending:
            request = self._pending.popleft()
            if not request.future.done():
                request.future.set_exception(exc)

    async def _work(self) -> None:
        try:
            while True:
                await self._arrived.wait()
                await self._window()
                batch = self._take()
                if batch:
                    await self._run(batch)
        finally:
            self._fail_pending(FaceError("the face batcher stopped"))

    async def _window(self) -> None:
        """Wait until the oldest pending request has waited `window_s`, or a batch is full."""
        left = self._pending[0].arrived + self._window_s - self._clock()
        if left <= 0 or len(self._pending) >= self._max_batch:
            return
        self._full.clear()
        timer = asyncio.ensure_future(self._timer(left))
        full = asyncio.ensure_future(self._full.wait())
        try:
            await asyncio.wait({timer, full}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            full.cancel()

    def _take(self) -> list[_Request]:
        batch: list[_Request] = []
        while self._pending and len(batch) < self._max_batch:
            request = self._pending.popleft()
            if not request.future.done():  # its caller went away
                batch.append(request)
        if not self._pending:
            self._arrived.clear()
        if len(self._pending) < self._max_batch:
            self._full.clear()
        return batch

    async def _run(self, batch: list[_Request]) -> None:
        start = self._clock()
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(
                self._executor, self._predict_batch, [r.features for r in batch]
            )
        except Exception as exc:  # noqa: BLE001 - handed to exactly this batch's callers
            logger.warning("face batch of %d failed: %s", len(batch), exc)
            for request in batch:
                if not request.future.done():
                    request.future.set_exception(exc)
            return
        for request, result in zip(batch, results, strict=True):
            if not request.future.done():
                request.future.set_result(result)
        if self._on_batch is not None:
            waited = start - min(r.arrived for r in batch)
            self._on_batch(BatchReport(len(batch), waited, self._clock() - start))
