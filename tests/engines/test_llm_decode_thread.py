"""DecodeThread: one job at a time, and a job that yields (`YIELD`) lets the streams waiting go
first, then resumes where it stopped. Fake jobs (no model); the order is made deterministic by
holding the thread until every stream is queued."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from common.cpu_priority import SPEAKING, THINKING
from engines.llm.decode_thread import YIELD, DecodeThread, Yield
from tests.support.llm import hold_thread


def job(name: str, parts: int, log: list[str], yield_after: int | None = None
        ) -> Iterator[str | Yield]:
    for k in range(parts):
        log.append(f"{name}{k}")  # on the decode thread, in the order the thread ran them
        yield f"{name}{k}"
        if yield_after is not None and k + 1 == yield_after:
            yield YIELD


async def collect(stream: AsyncIterator[str]) -> list[str]:
    return [d async for d in stream]


async def started(streams: list[AsyncIterator[str]]) -> list[asyncio.Task[list[str]]]:
    """Each stream's task, once every one has queued its job (one turn of the loop runs each
    async generator up to its first await: the submit comes before it)."""
    tasks = [asyncio.ensure_future(collect(s)) for s in streams]
    await asyncio.sleep(0)
    return tasks


async def test_a_yielding_job_lets_the_waiting_stream_go_first_then_resumes() -> None:
    thread = DecodeThread("test")
    gate = threading.Event()
    log: list[str] = []
    hold = await hold_thread(thread, gate)
    a = thread.stream(lambda cancel: job("a", 4, log, yield_after=2))
    b = thread.stream(lambda cancel: job("b", 2, log))
    tasks = await started([a, b])
    assert thread.others_waiting()
    gate.set()
    await hold
    got_a, got_b = await asyncio.gather(*tasks)
    assert got_a == ["a0", "a1", "a2", "a3"] and got_b == ["b0", "b1"]
    assert log == ["a0", "a1", "b0", "b1", "a2", "a3"]
    assert not thread.others_waiting()
    thread.close()


async def test_a_yield_with_nobody_waiting_goes_on_at_once() -> None:
    thread = DecodeThread("test")
    log: list[str] = []
    got = await collect(thread.stream(lambda cancel: job("a", 3, log, yield_after=1)))
    assert got == ["a0", "a1", "a2"] and log == got
    thread.close()


async def test_a_stream_given_up_while_it_rests_never_resumes() -> None:
    """The consumer goes away while its job waits behind another after a YIELD: the job is
    closed on the thread without another part, and the thread is free again."""
    thread = DecodeThread("test")
    gate = threading.Event()
    log: list[str] = []
    closed = threading.Event()

    def closing_job(cancel: threading.Event) -> Iterator[str | Yield]:
        try:
            yield from job("a", 4, log, yield_after=1)
        finally:
            closed.set()

    b_gate = threading.Event()

    def slow_b(cancel: threading.Event) -> Iterator[str | Yield]:
        b_gate.wait()  # b runs while a rests behind it
        yield from job("b", 1, log)

    hold = await hold_thread(thread, gate)
    a = thread.stream(closing_job)
    first = asyncio.ensure_future(anext(a))  # queued first: a runs first
    task_b = asyncio.ensure_future(collect(thread.stream(slow_b)))
    await asyncio.sleep(0)
    gate.set()
    await hold
    assert await first == "a0"
    await a.aclose()  # a's consumer goes away while a rests (or is about to)
    b_gate.set()
    assert await task_b == ["b0"]
    await asyncio.get_running_loop().run_in_executor(None, closed.wait, 10)
    assert closed.is_set() and log[:2] == ["a0", "b0"] and "a2" not in log
    assert await collect(thread.stream(lambda cancel: job("c", 1, log))) == ["c0"]
    thread.close()


def test_the_thread_runs_lower_by_the_levels_it_was_given() -> None:
    """A CPU decode (llama.cpp) sits below the speaking threads; a GPU decode, which mostly
    waits for the device and gates the first audio, is given their level instead."""
    if not hasattr(os, "getpriority"):
        pytest.skip("no per-thread priorities here")
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    for lower in (THINKING, SPEAKING):
        thread = DecodeThread("test", lower)
        try:
            nice = thread.call(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        finally:
            thread.close()
        assert nice == min(19, base + lower)


def test_a_thread_lowered_later_stays_lowered() -> None:
    """A GPU decode's thread that ends up decoding on the CPU ("auto" fell back) drops to the
    CPU decode's level; it is never raised again."""
    if not hasattr(os, "getpriority"):
        pytest.skip("no per-thread priorities here")
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    thread = DecodeThread("test", SPEAKING)
    try:
        thread.call(lambda: thread.lower_to(THINKING))
        thread.call(lambda: thread.lower_to(SPEAKING))
        nice = thread.call(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    finally:
        thread.close()
    assert nice == min(19, base + THINKING) and thread.lower == THINKING
