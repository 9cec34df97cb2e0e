"""The static-cache graph decoder (engines/llm/cuda_graphs.py) on a tiny random Qwen2.

On the CPU the decode step runs eagerly (everything but the capture): its tokens must equal
a plain DynamicCache greedy loop with the same repetition-penalty rule, across prefix reuse,
diverging prompts, bucket switches and early stops. With a CUDA GPU the captured graphs must
give the same tokens as the same step run eagerly on the GPU.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator

import pytest
import torch
from transformers import DynamicCache, Qwen2Config, Qwen2ForCausalLM

from engines.llm.cuda_graphs import GraphDecoder, Sampling, buckets_for, common_prefix
from engines.llm.errors import InvalidInputError, ModelLoadError

NO_CUDA = "needs a CUDA GPU (torch.cuda.is_available() is False): graph capture and replay"


def tiny_model(device: str = "cpu", dtype: torch.dtype = torch.float32) -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        initializer_range=0.3,  # wide enough that greedy decoding does not repeat one token
    )
    return Qwen2ForCausalLM(config).eval().to(device, dtype)


def reference(model: Qwen2ForCausalLM, ids: list[int], n: int, penalty: float = 1.0) -> list[int]:
    """Greedy decoding with a DynamicCache; the penalty covers this answer's own tokens."""
    cache = DynamicCache(config=model.config)
    # transformers 5.24 calls the argument `cache`, 5.17 `past_key_values`
    name = "cache" if "cache" in inspect.signature(type(model).forward).parameters else (
        "past_key_values")
    out: list[int] = []
    feed = ids
    with torch.inference_mode():
        for _ in range(n):
            device = next(model.parameters()).device
            logits = model(input_ids=torch.tensor([feed], device=device), use_cache=True,
                           **{name: cache}).logits[0, -1].float()
            if out and penalty != 1.0:
                prev = torch.tensor(sorted(set(out)), device=device)
                scores = logits[prev]
                logits[prev] = torch.where(scores > 0, scores / penalty, scores * penalty)
            out.append(int(logits.argmax()))
            feed = [out[-1]]
    return out


@pytest.fixture(scope="module")
def model() -> Qwen2ForCausalLM:
    return tiny_model()


@pytest.fixture
def decoder(model: Qwen2ForCausalLM) -> Iterator[GraphDecoder]:
    d = GraphDecoder(model, (64, 128, 256))
    d.prepare()
    yield d


GREEDY = Sampling()


def test_greedy_tokens_equal_a_dynamic_cache_loop(model: Qwen2ForCausalLM,
                                                  decoder: GraphDecoder) -> None:
    ids = list(range(1, 30))
    assert list(decoder.decode(ids, 30, GREEDY)) == reference(model, ids, 30)
    penalized = list(decoder.decode(ids, 30, Sampling(repetition_penalty=1.3)))
    assert penalized == reference(model, ids, 30, 1.3)
    assert penalized != reference(model, ids, 30)  # the penalty really changed something


def test_the_next_turn_prefills_only_its_new_tokens(model: Qwen2ForCausalLM,
                                                    decoder: GraphDecoder) -> None:
    first = list(range(1, 30))
    answer = list(decoder.decode(first, 12, GREEDY))
    assert decoder.last_prefill_tokens == len(first)
    second = first + answer[:8] + [7, 8, 9]
    assert list(decoder.decode(second, 20, GREEDY)) == reference(model, second, 20)
    assert decoder.last_prefill_tokens == 3  # the answer's tokens were fed while decoding
    # A prompt that diverges early reuses only the common prefix; the positions after it
    # are overwritten, so nothing of the old conversation leaks into the answer.
    other = first[:5] + [200, 201, 202]
    assert list(decoder.decode(other, 20, GREEDY)) == reference(model, other, 20)
    assert decoder.last_prefill_tokens == 3


def test_a_larger_bucket_keeps_the_prefix(model: Qwen2ForCausalLM,
                                          decoder: GraphDecoder) -> None:
    short = list(range(1, 40))
    list(decoder.decode(short, 10, GREEDY))  # bucket 64
    longer = short + list(range(50, 150))  # 139 tokens + 40 new: bucket 256
    assert decoder.bucket_for(len(longer) + 40) == 256
    assert list(decoder.decode(longer, 40, GREEDY)) == reference(model, longer, 40)
    assert decoder.last_prefill_tokens == len(longer) - len(short)
    back = short + [3]  # and back to the small bucket, still reusing
    assert list(decoder.decode(back, 10, GREEDY)) == reference(model, back, 10)
    assert decoder.last_prefill_tokens == 1


def test_closing_early_records_exactly_what_the_cache_holds(model: Qwen2ForCausalLM,
                                                            decoder: GraphDecoder) -> None:
    ids = list(range(1, 30))
    tokens = decoder.decode(ids, 40, GREEDY)
    got = [next(tokens) for _ in range(5)]
    tokens.close()
    held, expected = decoder.cached_ids, reference(model, ids, 40)
    # Fed: the tokens yielded (the last one maybe not yet) and the steps in flight after them.
    assert len(ids) + 4 <= len(held) <= len(ids) + 5 + 1
    assert held == ids + expected[: len(held) - len(ids)]
    assert got == expected[:5]
    again = ids + got + [4]
    assert list(decoder.decode(again, 10, GREEDY)) == reference(model, again, 10)


def test_cancel_stops_within_a_token(decoder: GraphDecoder) -> None:
    cancel = threading.Event()
    got = []
    for token in decoder.decode(list(range(1, 20)), 100, GREEDY, cancel):
        got.append(token)
        if len(got) == 3:
            cancel.set()
    assert len(got) == 3


def test_a_failing_forward_fails_that_call_only(model: Qwen2ForCausalLM,
                                                 decoder: GraphDecoder) -> None:
    """Out of memory (or any error) in a prefill: the call raises, the cache keeps only the
    prefix it really holds, and the next call answers as if nothing happened."""
    first = list(range(1, 30))
    list(decoder.decode(first, 5, GREEDY))
    real = decoder._forward  # noqa: SLF001

    def oom(*args: object, **kwargs: object) -> object:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")

    decoder._forward = oom  # type: ignore[method-assign]  # noqa: SLF001
    with pytest.raises(torch.cuda.OutOfMemoryError):
        list(decoder.decode(first[:10] + [99, 98], 5, GREEDY))
    assert decoder.cached_ids == first[:10]
    decoder._forward = real  # type: ignore[method-assign]  # noqa: SLF001
    again = first[:10] + [99, 98]
    assert list(decoder.decode(again, 10, GREEDY)) == reference(model, again, 10)
    assert decoder.last_prefill_tokens == 2


def test_prompt_and_answer_beyond_the_cache_are_refused(decoder: GraphDecoder) -> None:
    with pytest.raises(InvalidInputError, match="largest KV cache"):
        decoder.decode(list(range(1, 200)), 100, GREEDY)


def test_sampling_is_reproducible_with_a_seed(decoder: GraphDecoder) -> None:
    ids = list(range(1, 30))
    s = Sampling(temperature=0.8, top_p=0.9, seed=3)
    first = list(decoder.decode(ids, 20, s))
    assert list(decoder.decode(ids, 20, s)) == first
    assert all(0 <= t < 256 for t in first)


def test_sliding_window_models_are_refused() -> None:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, use_sliding_window=True,
                         sliding_window=16, max_window_layers=0)
    with pytest.raises(ModelLoadError, match="full attention"):
        GraphDecoder(Qwen2ForCausalLM(config).eval(), (64,))


def test_buckets_and_prefixes() -> None:
    assert buckets_for(4096) == (1024, 2048, 4096)
    assert buckets_for(512) == (256, 512)
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_cuda_graphs_give_the_eager_tokens_in_fp32() -> None:
    """Decode and prefill graphs, prefix reuse, bucket switches and sampling, against the same
    decoder run eagerly and against the DynamicCache loop."""
    net = tiny_model("cuda")
    graphs, eager = GraphDecoder(net, (64, 256)), GraphDecoder(net, (64, 256), graphs=False)
    graphs.prepare()
    eager.prepare()
    assert graphs.use_graphs and not eager.use_graphs
    cases = ((list(range(1, 30)), 30, GREEDY),
             (list(range(1, 30)) + [5, 6], 30, Sampling(repetition_penalty=1.3)),
             (list(range(1, 150)), 60, GREEDY),
             (list(range(1, 30)), 20, Sampling(0.8, 0.9, 1.0, seed=5)))
    for ids, n, sampling in cases:
        assert list(graphs.decode(ids, n, sampling)) == list(eager.decode(ids, n, sampling))
        assert graphs.last_prefill_tokens == eager.last_prefill_tokens
    graphs.reset()
    ids = list(range(1, 30))
    assert list(graphs.decode(ids, 25, GREEDY)) == reference(net, ids, 25)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_cuda_graphs_in_bf16() -> None:
    """The decode graph replays exactly the eager step's kernels: equal tokens after the same
    (eager) prefill; a captured prefill's logits equal the eager ones within bf16 rounding."""
    net = tiny_model("cuda", torch.bfloat16)
    graphs, eager = GraphDecoder(net, (64, 512)), GraphDecoder(net, (64, 512), graphs=False)
    graphs.prepare()
    eager.prepare()
    long_prompt = [(7 * i) % 250 + 1 for i in range(300)]  # longer than any prefill graph
    assert list(graphs.decode(long_prompt, 40, GREEDY)) == list(eager.decode(long_prompt, 40,
                                                                             GREEDY))
    graphs.reset()
    eager.reset()
    with torch.inference_mode():
        captured = graphs._prefill(list(range(1, 30)), 0, 64).clone()  # noqa: SLF001
        plain = eager._prefill(list(range(1, 30)), 0, 64)  # noqa: SLF001
    assert (captured - plain).abs().max().item() < 0.1 * plain.abs().max().item()
