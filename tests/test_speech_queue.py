"""The speech queue: the sessions' TTS calls, earliest due first, never more than its threads."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from rtc_server.speech_queue import SpeechQueue


class Gate:
    """A call that blocks its thread until released, recording the order calls started."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release = threading.Event()
        self.running = threading.Semaphore(0)

    def __call__(self, name: str) -> str:
        self.started.append(name)
        self.running.release()
        if not self.release.wait(10.0):
            raise TimeoutError(name)
        return name


async def _until_started(gate: Gate) -> None:
    assert await asyncio.to_thread(gate.running.acquire, True, 10.0)


async def _busy(queue: SpeechQueue, gate: Gate, name: str = "busy") -> asyncio.Task[str]:
    """A call holding the queue's (one) thread until `gate` is released, once it runs."""
    task = asyncio.create_task(queue.run(0.0, gate, name))
    await _until_started(gate)
    return task


async def test_the_chunk_due_first_goes_first() -> None:
    with ThreadPoolExecutor(1) as pool:
        queue, gate = SpeechQueue(pool, 1), Gate()
        busy = await _busy(queue, gate)
        later = asyncio.create_task(queue.run(2.0, gate, "second chunk, 2 s of audio ahead"))
        await asyncio.sleep(0)
        first = asyncio.create_task(queue.run(0.0, gate, "another session's first chunk"))
        await asyncio.sleep(0)
        assert queue.waiting == 2
        gate.release.set()
        assert await asyncio.gather(busy, later, first) == [
            "busy", "second chunk, 2 s of audio ahead", "another session's first chunk"]
        assert gate.started == [
            "busy", "another session's first chunk", "second chunk, 2 s of audio ahead"]


async def test_same_due_keeps_arrival_order_and_width_is_respected() -> None:
    with ThreadPoolExecutor(4) as pool:
        queue, gate = SpeechQueue(pool, 2), Gate()
        tasks = [asyncio.create_task(queue.run(0.0, gate, f"c{i}")) for i in range(5)]
        await _until_started(gate)
        await _until_started(gate)
        await asyncio.sleep(0.05)
        assert gate.started == ["c0", "c1"]  # two threads, though the pool has four
        gate.release.set()
        assert await asyncio.gather(*tasks) == [f"c{i}" for i in range(5)]
        assert gate.started == [f"c{i}" for i in range(5)]


async def test_a_cancelled_waiter_never_runs_and_passes_its_turn_on() -> None:
    with ThreadPoolExecutor(1) as pool:
        queue, gate = SpeechQueue(pool, 1), Gate()
        busy = await _busy(queue, gate)
        gone = asyncio.create_task(queue.run(0.0, gate, "gone"))
        kept = asyncio.create_task(queue.run(1.0, gate, "kept"))
        await asyncio.sleep(0)
        gone.cancel()
        gate.release.set()
        assert await busy == "busy" and await kept == "kept"
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert gate.started == ["busy", "kept"]


async def test_a_cancelled_runner_holds_its_thread_until_it_returns() -> None:
    with ThreadPoolExecutor(2) as pool:
        queue, gate = SpeechQueue(pool, 1), Gate()
        running = await _busy(queue, gate, "cancelled while running")
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        nxt = asyncio.create_task(queue.run(0.0, gate, "next"))
        await asyncio.sleep(0.05)
        assert gate.started == ["cancelled while running"]  # its thread is still busy
        gate.release.set()
        assert await nxt == "next"


async def test_a_failing_call_raises_to_its_caller_and_frees_its_thread() -> None:
    def fail() -> None:
        raise RuntimeError("the voice failed")

    with ThreadPoolExecutor(1) as pool:
        queue = SpeechQueue(pool, 1)
        with pytest.raises(RuntimeError, match="the voice failed"):
            await queue.run(0.0, fail)
        assert await queue.run(0.0, lambda: "after") == "after"


async def test_on_start_is_called_as_the_call_gets_its_thread() -> None:
    with ThreadPoolExecutor(1) as pool:
        queue, gate, marks = SpeechQueue(pool, 1), Gate(), []
        busy = await _busy(queue, gate)
        waiting = asyncio.create_task(
            queue.run(0.0, gate, "waiting", on_start=lambda: marks.append(len(gate.started))))
        await asyncio.sleep(0.05)
        assert marks == []
        gate.release.set()
        await asyncio.gather(busy, waiting)
        assert marks == [1]  # after "busy" started, before "waiting" did


def test_width_must_be_positive() -> None:
    with ThreadPoolExecutor(1) as pool, pytest.raises(ValueError, match="threads"):
        SpeechQueue(pool, 0)
