"""`[llm] batch_streams` (engines/llm/batch_streams.py over engines/llm/batch_graphs.py) in
the transformers engine, run on the CPU with the bundled 0.5B GGUF (eager steps; on a GPU
they are captured graphs): answers asked together decode in one step each, every word of a
written answer said once, more streams than rows wait for a row, a consumer leaving frees
its row, and each row keeps the persona (and its conversation) for the next prefix."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from engines.llm import ChatMessage
from engines.llm.config import LLMConfig
from engines.llm.errors import InvalidInputError
from engines.llm.forced import ForcedAnswer, ForcedAnswers
from engines.llm.local import TransformersLLM
from engines.llm.prompt import PromptBuilder
from tests.support.llm import answer, cancel_parked, hold_thread, labelled

pytestmark = pytest.mark.slow

WRITTEN = {
    "Tell me about octopuses.": "Octopuses have three hearts, blue blood and nine brains.",
    "Tell me about honey.": "Honey never spoils: pots of it were found in old tombs.",
    "Tell me about owls.": "Owls cannot move their eyes, so they turn their heads instead.",
}


@pytest.fixture(scope="module")
def llm() -> Iterator[TransformersLLM]:
    engine = TransformersLLM(
        "qwen2.5-coder-0.5b", prompt=PromptBuilder.for_persona("companion", "Ava"),
        temperature=0.0, history_tokens=512, batch_streams=2,
    )
    yield engine
    engine.close()


async def test_an_answer_through_the_rows(llm: TransformersLLM) -> None:
    said = await answer(llm, [ChatMessage("user", "What is the capital of France?")], 20)
    assert "paris" in said.lower(), said
    assert llm.last_prefill_tokens < 20  # the warm-up left the persona in every row


async def test_streams_asked_together_step_together_and_say_every_word(
        llm: TransformersLLM) -> None:
    """Three written answers asked at once on two rows: each said word for word, the
    second's first words before the first is whole (one step for both), the third once a
    row is free."""
    llm._forced = ForcedAnswers([ForcedAnswer(q, a) for q, a in WRITTEN.items()])
    order: list[str] = []

    import threading

    gate = threading.Event()
    hold = await hold_thread(llm._thread, gate)  # all three are waiting when the loop starts
    try:
        tasks = [asyncio.ensure_future(labelled(llm, label, q, order))
                 for label, q in zip("abc", WRITTEN, strict=True)]
        await asyncio.sleep(0)
        gate.set()
        await hold
        said = await asyncio.gather(*tasks)
    finally:
        gate.set()
        llm._forced = None
    assert said == list(WRITTEN.values())
    last = {label: len(order) - 1 - order[::-1].index(label) for label in "ab"}
    assert order.index("b") < last["a"] and order.index("a") < last["b"], order
    assert order.index("c") > min(last.values()), order  # a row had to come free first


async def test_a_consumer_leaving_frees_its_row(llm: TransformersLLM) -> None:
    got = await cancel_parked(llm, "Count from one to one hundred.", 3, 200)
    assert len(got) == 3
    # both rows free again: two answers come (one would wait 200 tokens for a row)
    two = await asyncio.gather(*(answer(llm, [ChatMessage("user", q)], 12)
                                 for q in ("What is 2 plus 2?", "What is 3 plus 3?")))
    assert "4" in two[0] or "four" in two[0].lower(), two
    assert "6" in two[1] or "six" in two[1].lower(), two


async def test_the_next_turn_prefills_only_its_new_tokens(llm: TransformersLLM) -> None:
    first = [ChatMessage("user", "I live in Paris.")]
    reply = await answer(llm, first, 12)
    second = [*first, ChatMessage("assistant", reply),
              ChatMessage("user", "Which city do I live in?")]
    await answer(llm, second, 8)
    assert llm.last_prefill_tokens < len(llm.prompt_ids(second)) // 3


async def test_a_prompt_beyond_the_cache_fails_that_stream_only(llm: TransformersLLM) -> None:
    async def too_long() -> str:
        return "".join([d async for d in llm.stream(
            [ChatMessage("user", "Hi")], max_new_tokens=100_000)])

    results = await asyncio.gather(
        too_long(), answer(llm, [ChatMessage("user", "What is 2 plus 2?")], 12),
        return_exceptions=True)
    assert isinstance(results[0], InvalidInputError)
    assert isinstance(results[1], str) and ("4" in results[1] or "four" in results[1].lower())


def test_the_option_is_checked() -> None:
    assert LLMConfig(engine="transformers", batch_streams=6).batch_streams == 6
    for bad in ({"engine": "transformers", "batch_streams": -1},
                {"engine": "transformers", "batch_streams": 65},
                {"engine": "llama-cpp", "batch_streams": 4}):
        with pytest.raises(InvalidInputError, match="batch_streams"):
            LLMConfig(**bad)  # type: ignore[arg-type]
