"""What the tests of the LLM engines do alike: collect an answer, cancel a consumer that
sits parked after its first deltas (as a turn waiting on the playout does), and hold the
decode thread while streams queue up."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from engines.llm.base import ChatLLM, ChatMessage
from engines.llm.decode_thread import DecodeThread


async def answer(
    llm: ChatLLM, messages: list[ChatMessage], n: int, stop: Sequence[str] = ()
) -> str:
    return "".join([d async for d in llm.stream(messages, max_new_tokens=n, stop=stop)])


async def labelled(llm: ChatLLM, label: str, question: str, order: list[str],
                   n: int = 80) -> str:
    """The answer to `question`; `label` appended to `order` at each delta (which answer
    spoke when, among answers asked together)."""
    said = []
    async for delta in llm.stream([ChatMessage("user", question)], max_new_tokens=n):
        said.append(delta)
        order.append(label)
    return "".join(said)


async def cancel_parked(llm: ChatLLM, question: str, parked_after: int, n: int) -> list[str]:
    """Stream an answer to `question` (at most `n` tokens), park the consumer once it has
    `parked_after` deltas, then cancel it; the deltas it got."""
    got: list[str] = []

    async def consume() -> None:
        async for delta in llm.stream([ChatMessage("user", question)], max_new_tokens=n):
            got.append(delta)
            if len(got) == parked_after:
                await asyncio.Event().wait()  # parked here until cancelled

    task = asyncio.ensure_future(consume())
    while len(got) < parked_after:  # noqa: ASYNC110 - observing the consumer task
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return got


async def hold_thread(thread: DecodeThread, gate: threading.Event) -> asyncio.Future[None]:
    """Occupy `thread` until `gate` is set; returns once it is occupied, so every job queued
    after this call waits behind it (await the future after setting `gate`)."""
    entered = threading.Event()

    def block() -> None:
        entered.set()
        gate.wait(10)

    loop = asyncio.get_running_loop()
    held = loop.run_in_executor(None, thread.call, block)
    await loop.run_in_executor(None, entered.wait, 10)
    return held
