"""The text-end probe's padded forward (engines/llm/hidden_graphs.py) on a tiny random Qwen2.

On the CPU the padded forward runs eagerly (everything but the capture): its hidden state at
the last real token must be the plain forward's, whatever the padding. A capture that fails,
or whose replay disagrees with the eager forward, must leave no graphs. With a CUDA GPU the
captured graphs must give the eager forward's state.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
import torch
from transformers import Qwen2ForCausalLM

from engines.llm import hidden_graphs
from engines.llm.hidden_graphs import HiddenStateGraphs
from tests.engines.test_llm_cuda_graphs import NO_CUDA, tiny_model


def plain(model: Qwen2ForCausalLM, ids: list[int]) -> np.ndarray:
    device = next(model.parameters()).device
    with torch.inference_mode():
        out = model.model(input_ids=torch.tensor([ids], device=device), use_cache=False)
    return np.asarray(out.last_hidden_state[0, -1].float().cpu().numpy())


@pytest.fixture(scope="module")
def model() -> Qwen2ForCausalLM:
    return tiny_model()


@pytest.mark.parametrize("length", [1, 5, 16, 17, 40, 128])
def test_the_padded_forward_is_the_plain_one_at_the_last_token(
    model: Qwen2ForCausalLM, length: int,
) -> None:
    graphs = HiddenStateGraphs(model)
    ids = [(7 * k + 3) % 256 for k in range(length)]
    got = graphs.padded(ids)
    assert got is not None
    np.testing.assert_allclose(got, plain(model, ids), rtol=1e-4, atol=1e-5)
    # the same words after a longer prompt in the same bucket: nothing of it is left over
    graphs.padded(list(range(100, 100 + min(length + 9, 128))))
    again = graphs.padded(ids)
    assert again is not None
    np.testing.assert_allclose(again, got, rtol=1e-5, atol=1e-6)


def test_no_bucket_holds_a_longer_prompt_or_no_prompt(model: Qwen2ForCausalLM) -> None:
    graphs = HiddenStateGraphs(model, buckets=(8, 16))
    assert graphs.padded(list(range(17))) is None
    assert graphs.padded([]) is None


def test_no_capture_on_the_cpu(model: Qwen2ForCausalLM) -> None:
    graphs = HiddenStateGraphs(model)
    graphs.capture([1, 2, 3], lambda: plain(model, [1, 2, 3]))
    assert graphs.captured == ()


class _CudaLike:
    type = "cuda"


def test_a_failed_or_disagreeing_capture_leaves_the_eager_forward(
    model: Qwen2ForCausalLM, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """Pretend to be on CUDA: a capture that raises, and one whose replay computes nothing
    (the state stays zero), both end with no graphs and a warning; padded() still answers."""
    caplog.set_level(logging.WARNING)
    graphs = HiddenStateGraphs(model)
    graphs.device = _CudaLike()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("capture failed")

    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: None)
    monkeypatch.setattr(hidden_graphs, "capture_graph", broken)
    graphs.capture([1, 2, 3], lambda: plain(model, [1, 2, 3]))
    assert graphs.captured == ()
    assert "not captured (capture failed)" in caplog.text

    class Idle:
        def replay(self) -> None:  # a graph that does nothing: the state stays as it was
            graphs._out.zero_()

    monkeypatch.setattr(hidden_graphs, "capture_graph", lambda *a, **k: Idle())
    graphs.capture([1, 2, 3], lambda: plain(model, [1, 2, 3]))
    assert graphs.captured == ()
    assert "disagree with the eager forward" in caplog.text
    got = graphs.padded([1, 2, 3])
    assert got is not None
    np.testing.assert_allclose(got, plain(model, [1, 2, 3]), rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_captured_graphs_give_the_eager_state_on_cuda() -> None:
    gpu = tiny_model("cuda")
    graphs = HiddenStateGraphs(gpu)
    graphs.capture([1, 2, 3], lambda: plain(gpu, [1, 2, 3]))
    assert graphs.captured == hidden_graphs.BUCKETS
    for length in (3, 20, 100):
        ids = list(range(5, 5 + length))
        got = graphs.padded(ids)
        assert got is not None
        np.testing.assert_allclose(got, plain(gpu, ids), rtol=1e-3, atol=1e-4)
