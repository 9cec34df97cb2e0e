"""bench/llm_burst.py's measurement on a stand-in engine: each answer's first and last delta
are timed from the ask, over every stream of every round."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from bench.llm_burst import burst
from engines.llm import ChatMessage


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
    row = asyncio.run(burst(llm, ["q1", "q2", "q3"], streams=3, rounds=2, max_new_tokens=3))
    assert engine.asked == ["q1", "q2", "q3", "q1", "q2", "q3"]
    # Sleeps only bound from below: per round the answers' first deltas come >= 10, 40 and
    # 70 ms after the ask (each waits for the whole answers before it), the last >= 90.
    assert row["first_ms_p50"] >= 35 and row["first_ms_p95"] >= 60
    assert row["last_ms_p95"] >= 80 and row["deltas_per_s_p50"] > 0
