"""bench/gpu_llm.py's burst (testkit/burst.py) on a stand-in engine: each answer's
first and last delta are timed from the ask, over every stream of every round."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from engines.llm import ChatMessage
from testkit.burst import burst


class Turns:
    """Answers one at a time, 3 deltas each, 10 ms apart: the n-th of a burst waits for
    the ones before it."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.asked: list[str] = []

    async def stream(self, messages: Sequence[ChatMessage], *,
                     max_new_tokens: int) -> AsyncIterator[str]:
        self.asked.append(messages[-1].content)
        async with self.lock:
            for word in ("a", "b", "c")[:max_new_tokens]:
                await asyncio.sleep(0.01)
                yield word


def test_a_burst_times_every_answer_from_the_ask() -> None:
    engine = Turns()
    llm: Any = engine
    got = asyncio.run(burst(llm, ["q1", "q2", "q3"], streams=3, rounds=2, max_new_tokens=3))
    assert engine.asked == ["q1", "q2", "q3", "q1", "q2", "q3"]
    # Sleeps only bound from below: per round the answers' first deltas come >= 10, 40 and
    # 70 ms after the ask (each waits for the whole answers before it), the last >= 30, 60, 90.
    for r in (0, 3):
        firsts, lasts = got.first_ms[r:r + 3], got.last_ms[r:r + 3]
        assert all(f >= bound for f, bound in zip(firsts, (9, 39, 69), strict=True)), firsts
        assert all(x >= bound for x, bound in zip(lasts, (29, 59, 89), strict=True)), lasts
    assert len(got.deltas_per_s) == 2 and min(got.deltas_per_s) > 0
