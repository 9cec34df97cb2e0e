"""The transformers engine (the GPU path), run here on the CPU with the bundled 0.5B GGUF
dequantized once (~80 s on 2 cores the first time): streaming, prefix KV-cache reuse,
cancellation, serialized concurrent streams, the history budget and stop strings.

Greedy decoding; checks accept any right answer. (int8 numerics vary with the prefill split
and the CPU, so nothing here compares wording.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from engines.llm import ChatMessage
from engines.llm.local import TransformersLLM
from engines.llm.prompt import PromptBuilder
from tests.support.llm import answer, cancel_parked, hold_thread, labelled

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llm() -> Iterator[TransformersLLM]:
    engine = TransformersLLM(
        "qwen2.5-coder-0.5b", prompt=PromptBuilder.for_persona("companion", "Ava"),
        temperature=0.0, history_tokens=512,
    )
    yield engine
    engine.close()


async def test_streams_an_answer(llm: TransformersLLM) -> None:
    deltas = [d async for d in llm.stream(
        [ChatMessage("user", "What is the capital of France?")], max_new_tokens=20)]
    assert len(deltas) >= 3 and all(isinstance(d, str) for d in deltas)
    assert "paris" in "".join(deltas).lower()
    # The load-time warm-up left the persona prompt in the KV cache: only this turn prefills.
    assert llm.last_prefill_tokens < 20


async def test_next_turn_prefills_only_new_tokens(llm: TransformersLLM) -> None:
    first = [ChatMessage("user", "I live in Paris.")]
    reply = await answer(llm, first, 12)
    second = [*first, ChatMessage("assistant", reply),
              ChatMessage("user", "Which city do I live in?")]
    full = len(llm.prompt_ids(second))
    reused = await answer(llm, second, 16)
    assert llm.last_prefill_tokens < full // 3  # persona and first turn came from the cache
    assert "paris" in reused.lower(), reused


async def test_cancel_stops_the_decode(llm: TransformersLLM) -> None:
    got = await cancel_parked(llm, "Count from one to one hundred.", 3, 200)
    # The decode thread is free again: the next answer comes (it would wait 200 tokens).
    assert await answer(llm, [ChatMessage("user", "Say hi.")], 4)
    assert len(got) == 3


async def test_concurrent_streams_are_serialized_safely(llm: TransformersLLM) -> None:
    two, three = await asyncio.gather(
        answer(llm, [ChatMessage("user", "What is 2 plus 2?")], 12),
        answer(llm, [ChatMessage("user", "What is 3 plus 3?")], 12),
    )
    assert "4" in two or "four" in two.lower(), two
    assert "6" in three or "six" in three.lower(), three


def test_history_stays_within_budget(llm: TransformersLLM) -> None:
    long_chat: list[ChatMessage] = []
    for i in range(40):
        long_chat += [ChatMessage("user", f"Tell me fact number {i} about the sea."),
                      ChatMessage("assistant", "The sea is big and full of salt water. " * 3)]
    long_chat.append(ChatMessage("user", "Thanks!"))
    ids = llm.prompt_ids(long_chat)
    system = llm.count_tokens(llm.prompt.system)
    assert len(ids) <= system + llm.history_tokens + 8  # plus the generation prompt markers
    assert "Thanks!" in llm.tokenizer.decode(ids)


async def test_stop_strings(llm: TransformersLLM) -> None:
    text = await answer(llm, [ChatMessage("user", "List the numbers 1, 2, 3, 4, 5.")], 30,
                        stop=["3"])
    assert "3" not in text and "4" not in text


async def test_forced_answers_are_said_word_for_word(llm: TransformersLLM) -> None:
    """Timing-equivalent decoding (engines/llm/forced.py) on the eager CPU path: the written
    answer comes out exactly, and the next turn reuses it from the cache as a real answer."""
    from engines.llm.forced import ForcedAnswer, ForcedAnswers

    written = "Octopuses have three hearts and blue blood. Isn't that odd?"
    llm._forced = ForcedAnswers([ForcedAnswer("Tell me about octopuses.", written)])
    try:
        first = [ChatMessage("user", "tell me about octopuses")]
        short = await answer(llm, first, 4)  # max_new_tokens still caps it
        assert written.startswith(short) and len(short) < len(written)
        said = await answer(llm, first, 60)
        assert said == written
        second = [*first, ChatMessage("assistant", said), ChatMessage("user", "Why?")]
        await answer(llm, second, 8)
        assert llm.last_prefill_tokens < 20  # the written answer was in the cache
    finally:
        llm._forced = None


async def test_streams_asking_together_take_turns_and_say_every_word(
    llm: TransformersLLM,
) -> None:
    """Two answers asked together: the second's first words come before the first answer is
    whole (the first gives the thread up after FIRST_SLICE_TOKENS), and each resumed answer
    goes on exactly where it stopped (written answers: no word lost or said twice). Turns are
    taken on the graph decoder (CUDA); switched on here for the eager CPU path, which takes
    the same steps."""
    import threading

    from engines.llm.forced import ForcedAnswer, ForcedAnswers
    from engines.llm.local import FIRST_SLICE_TOKENS

    long_a = ("Octopuses have three hearts, blue blood and nine brains, one in the middle and "
              "one in each of their eight arms, which can taste what they touch.")
    long_b = ("Honey never spoils: archaeologists have found pots of it in ancient Egyptian "
              "tombs that were still perfectly good to eat after thousands of years.")
    assert len(llm.tokenizer.encode(long_a)) > 2 * FIRST_SLICE_TOKENS
    llm._forced = ForcedAnswers([ForcedAnswer("Tell me about octopuses.", long_a),
                                 ForcedAnswer("Tell me about honey.", long_b)])
    order: list[str] = []

    assert not llm._take_turns  # eager: one answer at a time unless asked
    llm._take_turns = True
    gate = threading.Event()
    hold = await hold_thread(llm._thread, gate)
    try:
        tasks = [asyncio.ensure_future(labelled(llm, "a", "tell me about octopuses", order)),
                 asyncio.ensure_future(labelled(llm, "b", "tell me about honey", order))]
        await asyncio.sleep(0)  # both streams queued behind the held thread, a first
        gate.set()
        await hold
        said_a, said_b = await asyncio.gather(*tasks)
    finally:
        gate.set()
        llm._forced, llm._take_turns = None, False
    assert said_a == long_a and said_b == long_b
    last_a = len(order) - 1 - order[::-1].index("a")
    assert order.index("b") < last_a, order  # b began before a was whole
    assert order[0] == "a"


async def test_hidden_states_are_the_models_own_and_other_weights_get_no_probe(
    llm: TransformersLLM,
) -> None:
    """The text-end probe's reading (engines/llm/text_end.py): the last hidden state at a
    prompt's last token, the model's hidden size, the same for the same words and not for
    others; the shipped probe was trained on the 1.5B's weights, so this 0.5B gets none."""
    import numpy as np

    from engines.llm.text_end import load_text_end
    from engines.turn.text_end import HEAD

    def state(words: str) -> np.ndarray:
        return llm.last_hidden_state(HEAD + words).result(timeout=60)

    a, b, c = state("What time is it"), state("What time is it"), state("What time is")
    assert a.shape == (llm.model.config.hidden_size,)
    assert np.array_equal(a, b) and not np.allclose(a, c)
    llm.prepare_hidden_states(HEAD + "What time is it").result(timeout=60)
    assert llm._hidden_graphs is None  # the CPU: the plain forward, no padding
    assert load_text_end(llm) is None


def test_a_gguf_tokenizer_keeps_every_added_token_of_the_gguf(llm: TransformersLLM) -> None:
    """`<tool_call>` must reach the model as the one token it was trained on. transformers
    5.17 built a GGUF's tokenizer with only three added tokens (`<tool_call>` became four
    pieces of text); keep_added_tokens restores the rest, each with its GGUF id."""
    import json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from engines.llm.model_files import keep_added_tokens, resolve_gguf

    tools = "<tool_call>\n{}\n</tool_call>"
    assert llm.tokenizer.encode(tools, add_special_tokens=False) == [151657, 198, 16094, 151658]
    # The tokenizer as transformers 5.17 wrote it: the same vocabulary, three added tokens.
    spec = json.loads(llm.tokenizer.backend_tokenizer.to_str())
    spec["added_tokens"] = spec["added_tokens"][:3]
    crippled = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(spec)))
    assert crippled.encode(tools, add_special_tokens=False)[0] != 151657
    keep_added_tokens(crippled, resolve_gguf("qwen2.5-coder-0.5b"))
    assert crippled.encode(tools, add_special_tokens=False) == [151657, 198, 16094, 151658]
    assert len(crippled.get_added_vocab()) == len(llm.tokenizer.get_added_vocab()) == 22
