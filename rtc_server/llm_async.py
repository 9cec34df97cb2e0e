"""Async iteration over a synchronous `ChatLLM.stream()` running on a worker thread.

Cancelling the consumer (or leaving the loop) sets the engine's cancel event, which stops
generation within one token; the thread is not awaited, so cancellation is immediate.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Sequence
from concurrent.futures import Executor

from engines.llm.base import ChatLLM, ChatMessage

_DONE = object()


async def stream_llm(
    llm: ChatLLM,
    messages: Sequence[ChatMessage],
    *,
    max_new_tokens: int,
    executor: Executor,
) -> AsyncGenerator[str, None]:
    loop = asyncio.get_running_loop()
    # Unbounded on purpose: the producer is a thread that must never block on the loop, and
    # it is bounded anyway by max_new_tokens.
    queue: asyncio.Queue[object] = asyncio.Queue()
    cancel = threading.Event()

    def put(item: object) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop closed under us: nobody is listening any more
            cancel.set()

    def run() -> None:
        try:
            for delta in llm.stream(messages, max_new_tokens=max_new_tokens, cancel=cancel):
                if cancel.is_set():
                    break
                put(delta)
            put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, re-raised there
            put(exc)

    loop.run_in_executor(executor, run)
    try:
        while True:
            item = await queue.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, str)
            yield item
    finally:
        cancel.set()
