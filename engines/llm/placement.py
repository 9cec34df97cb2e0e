"""Where the transformers engine runs: the device, whether the model fits, what a failure means.

Contract: `choose_device(requested, cuda_available)` resolves "auto" / "cpu" / "cuda" /
"cuda:N" into a `Placement`. A device asked for by name is `explicit`: any CUDA problem then
stops start-up with a `ModelLoadError` that says what to change. "auto" takes the GPU when
torch sees one, and falls back to the CPU with a logged warning (`fall_back`) when the GPU
cannot take the model: busy or unusable, too little free memory, out of memory while loading
or capturing. `memory_needed(...)` estimates the weights (from the safetensors headers, no
tensor is read) plus the KV cache, so "too large for the card" is caught before any copy.
"""

from __future__ import annotations

import json
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.llm.errors import InvalidInputError, ModelLoadError

logger = logging.getLogger(__name__)

_ELEMENT_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
                  "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
HEADROOM = 1.15  # activations, graph pools, the allocator's slack: on top of weights + cache


@dataclass(frozen=True)
class Placement:
    device: str  # "cpu" or "cuda:N"
    explicit: bool  # the user named it: problems are errors, not fall-backs

    @property
    def on_cuda(self) -> bool:
        return self.device.startswith("cuda")


def choose_device(requested: str, cuda_available: Callable[[], bool]) -> Placement:
    """Resolve the configured device (see the module docstring)."""
    if requested == "auto":
        return Placement("cuda:0" if cuda_available() else "cpu", explicit=False)
    if requested == "cpu":
        return Placement("cpu", explicit=True)
    if requested == "cuda" or (requested.startswith("cuda:") and requested[5:].isdigit()):
        if not cuda_available():
            raise ModelLoadError(
                f"LLM device {requested!r} was requested but torch sees no CUDA GPU "
                "(torch.cuda.is_available() is False: no GPU, no driver, or a CPU-only torch); "
                'set [llm] device = "auto" or "cpu"'
            )
        return Placement("cuda:0" if requested == "cuda" else requested, explicit=True)
    raise InvalidInputError(f"unknown LLM device {requested!r} (auto, cpu, cuda, cuda:N)")


def fall_back(placement: Placement, problem: str) -> Placement:
    """After a CUDA problem: an explicit GPU placement fails start-up, "auto" goes to the CPU."""
    if placement.explicit:
        raise ModelLoadError(f"LLM on {placement.device}: {problem}")
    logger.warning("LLM: %s; falling back to the CPU (slow: see README, GPU)", problem)
    return Placement("cpu", explicit=False)


def weights_bytes(model_dir: Path, element_bytes: int) -> int:
    """Bytes the weights take at `element_bytes` per parameter (floating tensors converted,
    others as stored), from the safetensors headers; 0 when there are none to read."""
    total = 0
    for path in sorted(model_dir.glob("*.safetensors")):
        with path.open("rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header: dict[str, Any] = json.loads(f.read(size))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            count = 1
            for dim in info["shape"]:
                count *= int(dim)
            dtype = str(info["dtype"])
            floating = dtype.startswith(("F", "BF"))
            total += count * (element_bytes if floating else _ELEMENT_BYTES.get(dtype, 4))
    return total


def kv_cache_bytes(config: Any, tokens: int, element_bytes: int) -> int:
    """The static KV cache of `tokens` positions: keys and values, every layer."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return int(2 * config.num_hidden_layers * heads * head_dim * tokens * element_bytes)


def memory_problem(need: int, free: int, total: int, device: str) -> str | None:
    """Why the model does not fit (a sentence for the error or the warning), or None."""
    if need * HEADROOM <= free:
        return None
    gib = 1 << 30
    return (f"the model needs about {need * HEADROOM / gib:.1f} GiB (weights and KV cache, "
            f"with {HEADROOM - 1:.0%} headroom) but {device} has {free / gib:.1f} GiB free of "
            f"{total / gib:.1f} GiB: use a smaller model, fp16/bf16, a smaller context_tokens, "
            "or free the GPU")
