"""Bad GPU conditions for the transformers engine, on a machine without a GPU: a device asked
for by name fails start-up with a clear `ModelLoadError`; "auto" falls back to the CPU with a
logged warning; never a hang. The GPU is faked where the condition needs one (busy, too
small, out of memory); the CPU load after a fall-back is real (a tiny random model with the
bundled Qwen tokenizer)."""

from __future__ import annotations

import json
import logging
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from common.cpu_priority import THINKING
from engines.llm import ChatMessage
from engines.llm.errors import InvalidInputError, ModelLoadError
from engines.llm.local import TransformersLLM, resolve_precision
from engines.llm.model_files import resolve_hf_dir
from engines.llm.placement import (
    Placement,
    choose_device,
    fall_back,
    kv_cache_bytes,
    memory_problem,
    weights_bytes,
)
from engines.llm.prompt import PromptBuilder

GIB = 1 << 30


def test_device_choice() -> None:
    assert choose_device("auto", lambda: False) == Placement("cpu", explicit=False)
    assert choose_device("auto", lambda: True) == Placement("cuda:0", explicit=False)
    assert choose_device("cuda", lambda: True) == Placement("cuda:0", explicit=True)
    assert choose_device("cuda:1", lambda: True) == Placement("cuda:1", explicit=True)
    assert choose_device("cpu", lambda: True) == Placement("cpu", explicit=True)
    with pytest.raises(ModelLoadError, match=r"torch.cuda.is_available\(\) is False"):
        choose_device("cuda", lambda: False)
    with pytest.raises(InvalidInputError):
        choose_device("tpu", lambda: True)


def test_fall_back_is_an_error_when_the_gpu_was_named(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ModelLoadError, match="cuda:0: out of memory"):
        fall_back(Placement("cuda:0", explicit=True), "out of memory")
    with caplog.at_level(logging.WARNING):
        assert fall_back(Placement("cuda:0", explicit=False), "busy") == Placement("cpu", False)
    assert "falling back to the CPU" in caplog.text


def test_memory_estimate_from_safetensors_headers(tmp_path: Path) -> None:
    header = {"a": {"dtype": "F32", "shape": [1000, 10], "data_offsets": [0, 40000]},
              "b": {"dtype": "I64", "shape": [5], "data_offsets": [40000, 40040]},
              "__metadata__": {"format": "pt"}}
    raw = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    assert weights_bytes(tmp_path, 2) == 10000 * 2 + 5 * 8  # floats converted, ints as stored
    config = Qwen2Config(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2)
    assert kv_cache_bytes(config, 4096, 2) == 2 * 28 * 2 * 128 * 4096 * 2  # Qwen2.5-1.5B: 117 MiB
    assert memory_problem(10 * GIB, 40 * GIB, 80 * GIB, "cuda:0") is None
    problem = memory_problem(30 * GIB, 20 * GIB, 80 * GIB, "cuda:0")
    assert problem is not None and "20.0 GiB free of 80.0 GiB" in problem


def test_precision_per_device() -> None:
    assert resolve_precision("auto", "cpu") == "int8"
    assert resolve_precision("auto", "cuda:0") == "bf16"
    assert resolve_precision("auto", "cuda:0", bf16_ok=False) == "fp16"
    with pytest.raises(InvalidInputError):
        resolve_precision("int8", "cuda:0")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_fails_before_loading_anything() -> None:
    with pytest.raises(ModelLoadError, match="no CUDA GPU"):
        TransformersLLM("/nonexistent/model", device="cuda", prompt=PromptBuilder("Be brief."))


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer Qwen2 with the bundled 0.5B model's tokenizer and chat template."""
    source = resolve_hf_dir("qwen2.5-coder-0.5b")  # converted once, shared with test_llm_local
    out = tmp_path_factory.mktemp("tiny-qwen")
    for path in source.iterdir():
        if path.name.startswith(("tokenizer", "chat_template", "generation_config")):
            shutil.copy(path, out / path.name)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=151936, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         tie_word_embeddings=True)
    Qwen2ForCausalLM(config).save_pretrained(out)
    return out


class FakeGpu:
    """torch.cuda as seen by the engine: a GPU is there; `mem_get_info` says the rest."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, mem: Any) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
        monkeypatch.setattr(torch.cuda, "mem_get_info", mem)


def busy(device: Any = None) -> tuple[int, int]:
    raise RuntimeError("CUDA error: all CUDA-capable devices are busy or unavailable")


def tiny_gpu(device: Any = None) -> tuple[int, int]:
    return 1 << 20, 8 << 20  # 1 MiB free of 8 MiB


def load(path: Path, device: str) -> TransformersLLM:
    return TransformersLLM(str(path), device=device, prompt=PromptBuilder("Be brief."),
                           temperature=0.0, context_tokens=512)


@pytest.fixture
def warnings_seen(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="engines.llm.placement"):
        yield caplog


@pytest.mark.parametrize(("mem", "why"), [(busy, "busy or unavailable"),
                                          (tiny_gpu, "0.0 GiB free of 0.0 GiB")])
def test_a_gpu_that_cannot_take_the_model(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch, warnings_seen: pytest.LogCaptureFixture,
    mem: Any, why: str,
) -> None:
    FakeGpu(monkeypatch, mem)
    with pytest.raises(ModelLoadError, match=why):
        load(tiny_dir, "cuda")
    llm = load(tiny_dir, "auto")
    try:
        assert llm.device == "cpu" and llm.precision == "int8"
        assert "falling back to the CPU" in warnings_seen.text and why in warnings_seen.text
        # placed on the GPU at the speaking threads' priority, decoding on the CPU below them
        assert llm._thread.lower == THINKING
    finally:
        llm.close()


async def test_out_of_memory_while_loading_falls_back_and_still_answers(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch, warnings_seen: pytest.LogCaptureFixture,
) -> None:
    FakeGpu(monkeypatch, lambda device=None: (64 * GIB, 80 * GIB))
    real = TransformersLLM._load_net

    def oom_on_cuda(self: TransformersLLM, model_dir: Path, device: str, precision: str) -> Any:
        if device.startswith("cuda"):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, model_dir, device, precision)

    monkeypatch.setattr(TransformersLLM, "_load_net", oom_on_cuda)
    with pytest.raises(ModelLoadError, match="ran out of memory"):
        load(tiny_dir, "cuda")
    llm = load(tiny_dir, "auto")
    try:
        assert llm.device == "cpu" and "ran out of memory" in warnings_seen.text
        deltas = [d async for d in llm.stream([ChatMessage("user", "Hi")], max_new_tokens=3)]
        assert all(isinstance(d, str) for d in deltas)
    finally:
        llm.close()
