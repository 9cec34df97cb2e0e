"""The default LLM engine, llama.cpp on the bundled Qwen2.5-Coder 1.5B GGUF: streaming,
prompt-prefix reuse, cancellation within a token, serialized concurrent streams, the history
budget, and bad input (empty, huge or binary prompts; a corrupt or truncated GGUF).

Greedy decoding; checks accept any right answer (a word, not a wording), and each check that
needs a specific answer runs on a prompt no earlier test left in the KV cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.llm import ChatMessage
from engines.llm.errors import InvalidInputError, ModelLoadError
from engines.llm.llama import LlamaCppLLM
from engines.llm.model_files import resolve_gguf
from engines.llm.prompt import PromptBuilder
from tests.support.llm import answer, cancel_parked

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llm() -> Iterator[LlamaCppLLM]:
    engine = LlamaCppLLM(
        prompt=PromptBuilder.for_persona("companion", "Ava"), temperature=0.0, history_tokens=512,
        threads=1, batch_threads=2,
    )
    yield engine
    engine.close()


async def test_streams_an_answer_with_only_its_own_words_prefilled(llm: LlamaCppLLM) -> None:
    deltas = [d async for d in llm.stream(
        [ChatMessage("user", "What is the capital of France?")], max_new_tokens=24)]
    assert len(deltas) >= 3 and all(isinstance(d, str) for d in deltas)
    assert "paris" in "".join(deltas).lower()
    # The load-time warm-up left the persona prompt in the KV cache: only this turn prefills.
    system_tokens = llm.count_tokens(llm.prompt.system)
    assert llm.last_prefill_tokens < 30 < system_tokens


async def test_the_next_turn_reuses_the_cached_prefix_and_sees_the_history(
    llm: LlamaCppLLM,
) -> None:
    first = [ChatMessage("user", "My sister Margaret lives in Lisbon.")]
    reply = await answer(llm, first, 20)
    second = [*first, ChatMessage("assistant", reply),
              ChatMessage("user", "In which city does my sister live?")]
    full = len(llm.prompt_tokens(second)[0])
    said = await answer(llm, second, 20)
    assert llm.last_prefill_tokens < full // 3  # persona and first turn came from the cache
    assert "lisbon" in said.lower(), said


async def test_warming_on_a_partial_leaves_the_final_little_to_prefill(
    llm: LlamaCppLLM,
) -> None:
    before = llm.warmed_tokens
    llm.warm([ChatMessage("user", "Can you tell me something about the history of")])
    await asyncio.to_thread(llm.drain)
    assert llm.warmed_tokens - before >= 8  # the partial's words went into the KV cache
    final = [ChatMessage("user", "Can you tell me something about the history of Rome?")]
    full = len(llm.prompt_tokens(final)[0]) - llm.count_tokens(llm.prompt.system)
    assert await answer(llm, final, 8)
    assert llm.last_prefill_tokens < full // 2


async def test_a_partial_that_proves_right_leaves_only_the_end_of_the_turn(
    llm: LlamaCppLLM,
) -> None:
    """All the partial's words are warmed, the last one too: when the final keeps them, only
    its punctuation and the template's end of turn are left to prefill."""
    llm.warm([ChatMessage("user", "What is the capital of Portugal")])
    await asyncio.to_thread(llm.drain)
    assert await answer(llm, [ChatMessage("user", "What is the capital of Portugal?")], 4)
    assert llm.last_prefill_tokens <= 6  # "?", <|im_end|>, "\n", <|im_start|>, "assistant", "\n"


async def test_a_partial_that_ends_a_sentence_is_read_with_the_end_of_the_turn(
    llm: LlamaCppLLM,
) -> None:
    """A partial that ends a sentence is often the final: the template's end of the turn is
    warmed with it, so a final that keeps it prefills one token (the last, re-fed)."""
    llm.warm([ChatMessage("user", "What is the capital of Portugal?")])
    await asyncio.to_thread(llm.drain)
    said = await answer(llm, [ChatMessage("user", "What is the capital of Portugal?")], 8)
    assert llm.last_prefill_tokens <= 1
    assert "lisbon" in said.lower(), said


async def test_warming_at_speech_start_reads_a_history_the_model_did_not_write(
    llm: LlamaCppLLM,
) -> None:
    """The agent keeps the answer as heard (markup gone, cut where the user came in), not
    the tokens generated: the KV cache diverges there, and a short next question ("Why?")
    has no partial transcript to warm it."""
    history = [ChatMessage("user", "Name a colour."),
               ChatMessage("assistant", "Blue, like a kite over the sea on a windy day.")]
    question = ChatMessage("user", "Why?")
    own = len(llm.prompt_tokens([*history, question])[0]) - len(
        llm.prompt_tokens([*history, ChatMessage("user", "\ue000")])[0]) + 8
    assert await answer(llm, [ChatMessage("user", "Say hello.")], 4)  # cache: another turn
    llm.warm([*history, ChatMessage("user", "")])
    await asyncio.to_thread(llm.drain)
    assert await answer(llm, [*history, question], 4)
    assert llm.last_prefill_tokens <= own  # only the question and the template's tail


def _threads(llm: LlamaCppLLM) -> tuple[int, int]:
    import llama_cpp

    ctx = llm._llm._ctx.ctx  # noqa: SLF001 - what llama.cpp was told
    return llama_cpp.llama_n_threads(ctx), llama_cpp.llama_n_threads_batch(ctx)


async def test_the_first_tokens_burst_on_the_prompt_threads_and_say_the_same(
    llm: LlamaCppLLM,
) -> None:
    question = [ChatMessage("user", "Name three colours of the rainbow.")]
    await answer(llm, question, 16)  # both runs below then start from the same KV cache
    plain = await answer(llm, question, 16)
    llm.burst_tokens = 4
    try:
        burst = await answer(llm, question, 16)
        assert _threads(llm) == (1, 2)  # back to one decode thread after the burst
        # stopped inside the burst (the consumer leaves after one delta): restored as well
        stream = llm.stream([ChatMessage("user", "Count from one to twenty.")], max_new_tokens=30)
        async for _ in stream:
            break
        await stream.aclose()  # type: ignore[attr-defined]
        llm.drain()
        assert _threads(llm) == (1, 2)
    finally:
        llm.burst_tokens = 0
    assert burst == plain  # greedy: the threads change the speed, not the tokens


async def test_warming_yields_to_a_generation(llm: LlamaCppLLM) -> None:
    stream = llm.stream([ChatMessage("user", "Count from one to twenty.")], max_new_tokens=40)
    assert await anext(stream)  # a generation is running
    before = llm.warmed_tokens
    llm.warm([ChatMessage("user", "Please tell me a story about the sea and the wind")])
    await stream.aclose()  # type: ignore[attr-defined]
    await asyncio.to_thread(llm.drain)
    assert llm.warmed_tokens == before  # skipped: the model was busy


async def test_cancelling_stops_within_a_token(llm: LlamaCppLLM) -> None:
    before = llm.generated_tokens
    await cancel_parked(llm, "Tell me a long story about a lighthouse keeper.", 3, 150)
    await asyncio.to_thread(llm.drain)  # the decode thread finished whatever it was doing
    # Three handed over, a few more decoded while the consumer sat parked; far from 150.
    assert llm.generated_tokens - before < 20


async def test_concurrent_streams_each_get_their_own_answer(llm: LlamaCppLLM) -> None:
    questions = ["What is the capital of Japan?", "What is the capital of Italy?"]
    answers = await asyncio.gather(*(
        answer(llm, [ChatMessage("user", q)], 16) for q in questions))
    assert "tokyo" in answers[0].lower(), answers
    assert "rome" in answers[1].lower(), answers


async def test_history_stays_within_budget(llm: LlamaCppLLM) -> None:
    msgs: list[ChatMessage] = []
    for i in range(40):
        msgs += [ChatMessage("user", f"Remember the number {i} please, it matters a lot."),
                 ChatMessage("assistant", f"I will remember {i}.")]
    msgs.append(ChatMessage("user", "Say OK."))
    ids, _ = llm.prompt_tokens(msgs)
    assert len(ids) <= llm.count_tokens(llm.prompt.system) + llm.history_tokens + 16
    assert await answer(llm, msgs, 8)


async def test_bad_prompts_are_clear_errors_or_plain_answers(llm: LlamaCppLLM) -> None:
    with pytest.raises(InvalidInputError):
        llm.stream([], max_new_tokens=8)
    with pytest.raises(InvalidInputError):
        llm.stream([ChatMessage("user", "   ")], max_new_tokens=8)
    with pytest.raises(InvalidInputError):
        llm.stream([ChatMessage("user", "hi")], max_new_tokens=0)
    huge = "blah " * 20_000 + "What is two plus two?"
    assert await answer(llm, [ChatMessage("user", huge)], 8)  # trimmed from the start
    binary = bytes(range(256)).decode("latin-1") * 4
    assert isinstance(await answer(llm, [ChatMessage("user", binary)], 8), str)


def test_a_corrupt_or_truncated_gguf_is_a_load_error_naming_the_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all" * 10)
    with pytest.raises(ModelLoadError, match="junk.gguf") as err:
        LlamaCppLLM(str(junk), prompt=PromptBuilder.for_persona("companion"))
    assert "not a GGUF file" in str(err.value)
    truncated = tmp_path / "truncated.gguf"
    with resolve_gguf(None).open("rb") as src:
        truncated.write_bytes(src.read(8 << 20))
    with pytest.raises(ModelLoadError, match="truncated.gguf") as err:
        LlamaCppLLM(str(truncated), prompt=PromptBuilder.for_persona("companion"))
    assert "rebuild" in str(err.value)
    with pytest.raises(ModelLoadError, match="neither a GGUF file"):
        LlamaCppLLM(str(tmp_path / "missing.gguf"), prompt=PromptBuilder.for_persona("companion"))
