"""The batched decoder (engines/llm/batch_graphs.py) on a tiny random Qwen2, on the CPU: every
row's greedy tokens equal a plain DynamicCache loop's for its own prompt, whatever the other
rows do (joining late, stopping early, idle), and a row keeps its conversation for the next
turn's prefix. With a CUDA GPU the captured graphs give the eager step's tokens."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2ForCausalLM

from engines.llm.batch_graphs import BatchDecoder
from engines.llm.errors import InvalidInputError
from tests.engines.test_llm_cuda_graphs import NO_CUDA, reference, tiny_model

PROMPTS = [[5, 9, 17, 33, 2], [7, 7, 100, 3], [50, 60, 70, 80, 90, 100, 110], [1, 2]]


@pytest.fixture(scope="module")
def model() -> Qwen2ForCausalLM:
    return tiny_model()


def new(model: Qwen2ForCausalLM, rows: int = 3, graphs: bool = True) -> BatchDecoder:
    decoder = BatchDecoder(model, (64, 128, 256), rows, graphs=graphs)
    decoder.prepare()
    return decoder


def run(decoder: BatchDecoder, plan: dict[int, tuple[list[int], int, int]],
        penalty: float = 1.0) -> dict[int, list[int]]:
    """Each stream `k`: (prompt, tokens wanted, the step it joins at); greedy; streams leave
    when they have their tokens. Returns each stream's tokens."""
    out: dict[int, list[int]] = {k: [] for k in plan}
    row_of: dict[int, int] = {}
    step = 0
    while any(len(out[k]) < plan[k][1] for k in plan):
        for k, (ids, want, at) in plan.items():
            if at == step and k not in row_of:
                row = decoder.free_row(ids)
                assert row is not None
                row_of[k] = row
                logits = decoder.admit(row, ids, want, penalty)
                out[k].append(int(logits.argmax()))
                if want > 1:
                    decoder.feed(row, out[k][-1])
                else:
                    decoder.release(row)
        if any(decoder._fed[r] is not None for r in range(decoder.rows)):  # noqa: SLF001
            tokens = decoder.step()
            for k, row in row_of.items():
                if decoder.busy[row] and len(out[k]) < plan[k][1]:
                    out[k].append(tokens[row])
                    if len(out[k]) < plan[k][1]:
                        decoder.feed(row, tokens[row])
                    else:
                        decoder.release(row)
        step += 1
    return out


def test_rows_decode_their_own_prompts_whenever_they_join(model: Qwen2ForCausalLM) -> None:
    decoder = new(model)
    plan = {0: (PROMPTS[0], 20, 0), 1: (PROMPTS[1], 8, 3), 2: (PROMPTS[2], 30, 5)}
    got = run(decoder, plan)
    for k, (ids, want, _) in plan.items():
        assert got[k] == reference(model, ids, want)


def test_the_repetition_penalty_is_per_row(model: Qwen2ForCausalLM) -> None:
    decoder = new(model, rows=2)
    plan = {0: (PROMPTS[0], 25, 0), 1: (PROMPTS[2], 25, 2)}
    got = run(decoder, plan, penalty=1.3)
    for k, (ids, want, _) in plan.items():
        assert got[k] == reference(model, ids, want, penalty=1.3)


def test_a_row_keeps_its_conversation_for_the_next_turn(model: Qwen2ForCausalLM) -> None:
    decoder = new(model, rows=2)
    first = run(decoder, {0: (PROMPTS[0], 10, 0), 1: (PROMPTS[1], 10, 0)})
    row = decoder.free_row(PROMPTS[0])
    assert row is not None
    assert decoder.held[row][: len(PROMPTS[0])] == PROMPTS[0]
    # the next turn: the conversation so far (the last answer token was never fed) and more
    turn = PROMPTS[0] + first[0][:-1] + [44, 45]
    got = run(decoder, {0: (turn, 12, 0)})
    assert decoder.last_prefill_tokens == 2
    assert got[0] == reference(model, turn, 12)


def test_when_every_row_is_busy_there_is_no_free_row(model: Qwen2ForCausalLM) -> None:
    decoder = new(model, rows=2)
    for ids in PROMPTS[:2]:
        row = decoder.free_row(ids)
        assert row is not None
        decoder.admit(row, ids, 4, 1.0)
    assert decoder.free_row(PROMPTS[2]) is None
    with pytest.raises(InvalidInputError, match="no row"):
        decoder.step()
    with pytest.raises(InvalidInputError, match="exceeds"):
        decoder.admit(0, PROMPTS[0], 1000, 1.0)
    decoder.release(0)
    assert decoder.free_row(PROMPTS[2]) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_captured_graphs_give_the_eager_tokens() -> None:
    gpu = tiny_model("cuda")
    plan = {0: (PROMPTS[0], 20, 0), 1: (PROMPTS[1], 8, 3), 2: (PROMPTS[2], 30, 5)}
    captured = run(new(gpu), plan)
    eager = run(new(gpu, graphs=False), plan)
    assert captured == eager


class Words:
    """A tokenizer stand-in: token ids as words."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return " ".join(f"w{i}" for i in ids)


async def test_a_failed_step_ends_the_streams_decoding_and_the_next_ones_start_clean(
        model: Qwen2ForCausalLM) -> None:
    import asyncio

    from engines.llm.answer_text import AnswerText
    from engines.llm.batch_streams import BatchStreams
    from engines.llm.cuda_graphs import Sampling
    from engines.llm.decode_thread import DecodeThread
    from engines.llm.errors import LLMError

    thread = DecodeThread("test-batch")
    decoder = new(model, rows=2)
    streams = BatchStreams(thread, decoder, Sampling())
    real_step, calls = decoder.step, [0]

    def failing_step() -> list[int]:
        calls[0] += 1
        if calls[0] == 3:
            raise RuntimeError("device lost")
        return real_step()

    decoder.step = failing_step  # type: ignore[method-assign]

    async def ask(ids: list[int], n: int) -> str:
        text = AnswerText(Words(), set(), ())
        return "".join([d async for d in streams.stream(ids, n, None, text, [])])

    try:
        got = await asyncio.gather(ask(PROMPTS[0], 10), ask(PROMPTS[1], 10),
                                   return_exceptions=True)
        assert all(isinstance(g, LLMError) and "device lost" in str(g) for g in got), got
        assert decoder.held == [[], []] and decoder.busy == [False, False]
        again = await ask(PROMPTS[2], 6)  # the rows start clean: the reference's tokens
        assert again == " ".join(f"w{t}" for t in reference(model, PROMPTS[2], 6))
    finally:
        thread.close()


async def test_sampling_draws_per_row_and_a_seed_repeats_a_lone_answer(
        model: Qwen2ForCausalLM) -> None:
    from engines.llm.answer_text import AnswerText
    from engines.llm.batch_streams import BatchStreams
    from engines.llm.cuda_graphs import Sampling
    from engines.llm.decode_thread import DecodeThread

    async def lone(sampling: Sampling) -> str:
        thread = DecodeThread("test-batch")
        try:
            streams = BatchStreams(thread, new(model, rows=2), sampling)
            text = AnswerText(Words(), set(), ())
            return "".join([d async for d in streams.stream(PROMPTS[0], 12, None, text, [])])
        finally:
            thread.close()

    drawn = Sampling(temperature=1.5, seed=7)
    first, again = await lone(drawn), await lone(drawn)
    assert first == again and len(first.split()) == 12
    assert first != await lone(Sampling())  # greedy: another answer (fixed by the seed)
