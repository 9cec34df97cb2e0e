"""Cross-session face batching (rtc_server/face_batch.py): equal results, own frames per
caller, the window's bound on the wait, failures confined to their callers.

No wall clock: the window's timer and the clock are fakes the tests drive, and the model
call blocks on events where a test needs a call to be "running".
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import numpy as np
import pytest

from engines.face import FaceConfig, create_face
from engines.face.errors import FaceError, InvalidInputError
from engines.face.features import log_mel
from engines.face.runtime import FaceRuntime
from rtc_server.engine_set import Engines, face_batcher
from rtc_server.face_batch import BatchReport, FaceBatcher, enabled

TOLERANCE = 1e-5  # max abs, face units: batching pads with silence, only float rounding differs


class FakeTimer:
    """The window's wait: returns only when the test fires it."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.fire = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await self.fire.wait()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A model call that records its batches and returns each input's first column, so every
    caller can tell its own result from the others'; `hold` keeps a call running."""

    def __init__(self) -> None:
        self.batches: list[list[float]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.started = threading.Event()
        self.fail_on: float | None = None

    def __call__(self, batch: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.batches.append([float(f[0, 0]) for f in batch])
        self.started.set()
        self.hold.wait(5)
        if self.fail_on is not None and any(float(f[0, 0]) == self.fail_on for f in batch):
            raise FaceError("the model failed")
        return [f[:, :1].copy() for f in batch]


def chunk(tag: float, rows: int = 8) -> np.ndarray:
    return np.full((rows, 80), tag, np.float32)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(1)
    yield executor
    executor.shutdown(wait=True)


@pytest.fixture(scope="module")
def ort_face() -> FaceRuntime:
    return create_face()


def utterances(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        seconds = 0.4 + 0.37 * i
        t = np.arange(int(seconds * 16000)) / 16000
        pcm = 0.2 * np.sin(2 * np.pi * (2 + i) * t) ** 2 * rng.standard_normal(len(t))
        out.append(log_mel(pcm.astype(np.float32), 16000))
    return out


async def test_batched_results_equal_batch_1(ort_face: FaceRuntime,
                                             pool: ThreadPoolExecutor) -> None:
    """Six sessions' chunks of different lengths in one call give each its batch-1 frames."""
    timer = FakeTimer()
    reports: list[BatchReport] = []
    batcher = FaceBatcher(ort_face.predict_batch, pool, window_s=0.002, max_batch=64,
                          check=ort_face.check, on_batch=reports.append, timer=timer)
    feats = utterances(6)
    tasks = [asyncio.ensure_future(batcher.predict(f)) for f in feats]
    while len(timer.asked) < 1:  # noqa: ASYNC110 - until the window is open
        await asyncio.sleep(0)
    timer.fire.set()
    results = await asyncio.gather(*tasks)
    assert [r.size for r in reports] == [6]
    for f, got in zip(feats, results, strict=True):
        expected = ort_face.predict(f)
        assert got.shape == expected.shape == (len(f) // 4, 68, 2)
        assert np.abs(got - expected).max() < TOLERANCE
    await batcher.close()


async def test_torch_cpu_batches_equal_batch_1(pool: ThreadPoolExecutor) -> None:
    face = create_face(FaceConfig(engine="torch"))
    batcher = FaceBatcher(face.predict_batch, pool, window_s=0.0, max_batch=4)
    feats = utterances(4)
    results = await asyncio.gather(*(batcher.predict(f) for f in feats))
    for f, got in zip(feats, results, strict=True):
        assert np.abs(got - face.predict(f)).max() < TOLERANCE
    await batcher.close()


async def test_each_session_gets_its_own_frames_and_the_window_bounds_the_wait(
    pool: ThreadPoolExecutor,
) -> None:
    """The first request opens a window of exactly window_s; what arrives before it closes
    shares the call; a request after it goes into the next call."""
    model, timer, clock = Recorder(), FakeTimer(), Clock()
    batcher = FaceBatcher(model, pool, window_s=0.003, max_batch=8, timer=timer, clock=clock)
    first = [asyncio.ensure_future(batcher.predict(chunk(float(i)))) for i in range(3)]
    while not timer.asked:  # noqa: ASYNC110 - until the window is open
        await asyncio.sleep(0)
    assert timer.asked == [pytest.approx(0.003)]
    timer.fire.set()
    results = await asyncio.gather(*first)
    assert [float(r[0, 0]) for r in results] == [0.0, 1.0, 2.0]
    timer.fire.clear()
    late = asyncio.ensure_future(batcher.predict(chunk(9.0)))
    while len(timer.asked) < 2:  # noqa: ASYNC110
        await asyncio.sleep(0)
    timer.fire.set()
    assert float((await late)[0, 0]) == 9.0
    assert model.batches == [[0.0, 1.0, 2.0], [9.0]]
    await batcher.close()


async def test_requests_that_waited_through_a_call_go_next_without_a_new_window(
    pool: ThreadPoolExecutor,
) -> None:
    """Nobody waits more than one window plus the call before it."""
    model, timer, clock = Recorder(), FakeTimer(), Clock()
    reports: list[BatchReport] = []
    batcher = FaceBatcher(model, pool, window_s=0.002, max_batch=8, timer=timer, clock=clock,
                          on_batch=reports.append)
    timer.fire.set()
    model.hold.clear()
    running = asyncio.ensure_future(batcher.predict(chunk(1.0)))
    while not model.started.is_set():  # noqa: ASYNC110 - until the call is running
        await asyncio.sleep(0)
    waiting = [asyncio.ensure_future(batcher.predict(chunk(float(i)))) for i in (2, 3)]
    await asyncio.sleep(0)
    clock.now += 0.004  # the running call takes longer than a window
    model.hold.set()
    await asyncio.gather(running, *waiting)
    assert model.batches == [[1.0], [2.0, 3.0]]
    assert len(timer.asked) == 1  # the second call opened no window: its oldest waited enough
    assert reports[1].waited_s == pytest.approx(0.004)
    await batcher.close()


async def test_a_full_batch_closes_the_window_early(pool: ThreadPoolExecutor) -> None:
    model, timer = Recorder(), FakeTimer()
    batcher = FaceBatcher(model, pool, window_s=1.0, max_batch=3, timer=timer, clock=Clock())
    tasks = [asyncio.ensure_future(batcher.predict(chunk(float(i)))) for i in range(5)]
    while not timer.asked:  # noqa: ASYNC110 - the three went at once; the two left wait
        await asyncio.sleep(0)
    assert model.batches == [[0.0, 1.0, 2.0]] and timer.asked == [pytest.approx(1.0)]
    timer.fire.set()
    results = await asyncio.gather(*tasks)
    assert [float(r[0, 0]) for r in results] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert model.batches == [[0.0, 1.0, 2.0], [3.0, 4.0]]
    await batcher.close()


async def test_a_failing_call_fails_only_its_callers(pool: ThreadPoolExecutor) -> None:
    model, timer = Recorder(), FakeTimer()
    model.fail_on = 1.0
    batcher = FaceBatcher(model, pool, window_s=0.002, max_batch=2, timer=timer)
    outcomes = await asyncio.gather(*(batcher.predict(chunk(float(i))) for i in range(4)),
                                    return_exceptions=True)
    assert isinstance(outcomes[0], FaceError) and isinstance(outcomes[1], FaceError)
    assert [float(r[0, 0]) for r in outcomes[2:]] == [2.0, 3.0]  # type: ignore[index]
    await batcher.close()


async def test_bad_input_fails_only_its_caller(ort_face: FaceRuntime,
                                               pool: ThreadPoolExecutor) -> None:
    batcher = FaceBatcher(ort_face.predict_batch, pool, window_s=0.0, max_batch=8,
                          check=ort_face.check)
    good = utterances(1)[0]
    outcomes = await asyncio.gather(batcher.predict(np.full((8, 80), np.nan, np.float32)),
                                    batcher.predict(good), return_exceptions=True)
    assert isinstance(outcomes[0], InvalidInputError)
    assert isinstance(outcomes[1], np.ndarray) and outcomes[1].shape == (len(good) // 4, 68, 2)
    await batcher.close()


async def test_a_cancelled_caller_is_dropped_from_its_batch(pool: ThreadPoolExecutor) -> None:
    model, timer = Recorder(), FakeTimer()
    batcher = FaceBatcher(model, pool, window_s=0.002, max_batch=8, timer=timer)
    gone = asyncio.ensure_future(batcher.predict(chunk(1.0)))
    kept = asyncio.ensure_future(batcher.predict(chunk(2.0)))
    while not timer.asked:  # noqa: ASYNC110
        await asyncio.sleep(0)
    gone.cancel()
    timer.fire.set()
    assert float((await kept)[0, 0]) == 2.0
    assert gone.cancelled() and model.batches == [[2.0]]
    await batcher.close()


async def test_the_queue_is_bounded(pool: ThreadPoolExecutor) -> None:
    """With room for two, a third caller waits (outside the queue) until one is answered."""
    model, timer = Recorder(), FakeTimer()
    timer.fire.set()
    model.hold.clear()
    batcher = FaceBatcher(model, pool, window_s=0.0, max_batch=2, max_pending=2, timer=timer)
    tasks = [asyncio.ensure_future(batcher.predict(chunk(float(i)))) for i in range(3)]
    while not model.started.is_set():  # noqa: ASYNC110
        await asyncio.sleep(0)
    for _ in range(5):
        await asyncio.sleep(0)
    assert model.batches == [[0.0, 1.0]] or model.batches == [[0.0]]
    assert all(not t.done() for t in tasks)
    model.hold.set()
    await asyncio.gather(*tasks)
    assert sorted(sum(model.batches, [])) == [0.0, 1.0, 2.0]
    await batcher.close()


async def test_close_fails_waiting_requests_and_is_idempotent(pool: ThreadPoolExecutor) -> None:
    model, timer = Recorder(), FakeTimer()
    batcher = FaceBatcher(model, pool, window_s=0.002, max_batch=8, timer=timer)
    waiting = asyncio.ensure_future(batcher.predict(chunk(1.0)))
    while not timer.asked:  # noqa: ASYNC110
        await asyncio.sleep(0)
    await batcher.close()
    await batcher.close()
    with pytest.raises(FaceError):
        await waiting
    with pytest.raises(FaceError, match="closed"):
        await batcher.predict(chunk(2.0))
    assert model.batches == []


def test_batching_is_on_for_gpu_runtimes_only_unless_configured() -> None:
    assert not enabled(FaceConfig())
    assert not enabled(FaceConfig(engine="torch"))
    assert enabled(FaceConfig(engine="torch", device="cuda:1"))
    assert enabled(FaceConfig(engine="tensorrt"))
    assert enabled(FaceConfig(batch=True))
    assert not enabled(FaceConfig(engine="torch", device="cuda", batch=False))


class NullLLM:
    def close(self) -> None:
        pass


async def test_engines_animate_through_the_batcher_equals_the_direct_call(
    ort_face: FaceRuntime,
) -> None:
    """`Engines.animate` keeps its signature and its result with batching on."""
    engines = Engines(asr=cast(Any, None), llm=cast(Any, NullLLM()), tts=cast(Any, None),
                      face=ort_face, make_smoother=lambda: None)
    engines.face_batcher = face_batcher(FaceConfig(batch=True, batch_window_ms=0.0), ort_face,
                                        engines.pools.face)
    assert isinstance(engines.face_batcher, FaceBatcher)
    pcm = (3000 * np.sin(np.arange(20000) / 9.0)).astype(np.int16)
    direct = ort_face.animate(pcm, 24000)
    batched = await engines.animate(pcm, 24000)
    assert batched.shape == direct.shape and np.abs(batched - direct).max() < TOLERANCE
    engines.close()  # the server's sync shutdown path stops the batcher too
    with pytest.raises(FaceError, match="closed"):
        await engines.face_batcher.predict(utterances(1)[0])
    await engines.face_batcher.close()
