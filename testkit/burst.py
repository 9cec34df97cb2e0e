"""A burst of answers on one chat engine (bench/gpu_llm.py): questions asked at once, each
answer's first and last delta timed from the ask."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from engines.llm.base import ChatLLM, ChatMessage


@dataclass
class Burst:
    first_ms: list[float] = field(default_factory=list)  # every answer of every round
    last_ms: list[float] = field(default_factory=list)
    deltas_per_s: list[float] = field(default_factory=list)  # per round, all its answers


async def _one(llm: ChatLLM, question: str, max_new_tokens: int,
               t0: float) -> tuple[float, float, int]:
    first = last = float("nan")
    n = 0
    async for _ in llm.stream([ChatMessage("user", question)], max_new_tokens=max_new_tokens):
        now = (time.perf_counter() - t0) * 1000
        first = now if n == 0 else first
        last, n = now, n + 1
    return first, last, n


async def burst(llm: ChatLLM, questions: list[str], streams: int, rounds: int,
                max_new_tokens: int) -> Burst:
    """`rounds` bursts of `streams` questions (taken in turn from `questions`) asked at once."""
    out = Burst()
    for r in range(rounds):
        asked = [questions[(r * streams + i) % len(questions)] for i in range(streams)]
        t0 = time.perf_counter()
        got = await asyncio.gather(*(_one(llm, q, max_new_tokens, t0) for q in asked))
        out.first_ms += [g[0] for g in got]
        out.last_ms += [g[1] for g in got]
        out.deltas_per_s.append(sum(g[2] for g in got) / (max(g[1] for g in got) / 1000))
    return out
