"""The face model as a TensorRT 10 FP16 engine built from the shipped ONNX file.

Contract: as `runtime.FaceRuntime`; CUDA only. The engine is built once with one optimization
profile over batch (1..max_batch) and sequence length (4..max rows), serialised, and cached under
`engines.cache.cache_dir("face-tensorrt")` with a key made of the GPU name and compute
capability, the TensorRT version, the ONNX file's SHA-256 and the profile, so a new GPU, a new
TensorRT or a retrained model rebuilds it. Inference uses the TensorRT 10 name-based API
(`set_input_shape`, `set_tensor_address`, `execute_async_v3`) with device buffers owned by
torch and torch's current CUDA stream, so no pycuda is needed.

This module imports without TensorRT installed; constructing `TensorRTFace` then raises
`RuntimeUnavailableError`. TensorRT 11 dropped the FP16 builder flag (weakly typed networks),
so the `tensorrt` extra pins 10.x and the builder says so if it meets 11.
Supported: TensorRT 10.x. NOTE: written against, and reviewed again (2026-12-01) against,
the TensorRT 10 Python API documentation; no TensorRT was installable on the machines this
project was built on, so this path has not been executed (docs/gpu.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from engines.cache import cache_dir
from engines.face.artifact import INPUT_NAME, OUTPUT_NAME, model_path, onnx_sha256
from engines.face.errors import FaceError, ModelLoadError, RuntimeUnavailableError
from engines.face.features import FEATS_PER_FRAME, HOP_MS, N_MELS
from engines.face.runtime import FaceRuntime
from engines.progress import load_step

logger = logging.getLogger(__name__)

OPT_ROWS = 400  # the profile's "typical" length: a 4 s sentence
WORKSPACE_BYTES = 512 << 20


def import_tensorrt() -> Any:
    """`tensorrt` if importable, else `RuntimeUnavailableError` with the reason."""
    try:
        import tensorrt
    except ImportError as exc:
        raise RuntimeUnavailableError(
            f"TensorRT is not installed ({exc}): the `tensorrt` extra needs NVIDIA's TensorRT "
            "10.x wheels (on PyPI, tensorrt-cu12/cu13-libs are sdists that download from "
            "pypi.nvidia.com while building)"
        ) from exc
    return tensorrt


def engine_cache_key(gpu: str, capability: tuple[int, int], trt_version: str, onnx_hash: str,
                     max_batch: int, max_rows: int) -> str:
    """File name of a cached engine for exactly this GPU, TensorRT, model and profile."""
    raw = json.dumps([gpu, list(capability), trt_version, onnx_hash, max_batch, max_rows, "fp16"])
    slug = "".join(c if c.isalnum() else "-" for c in gpu).strip("-").lower()
    return f"{slug}-sm{capability[0]}{capability[1]}-trt{trt_version}-" \
           f"{hashlib.sha256(raw.encode()).hexdigest()[:16]}.engine"


class TensorRTFace(FaceRuntime):
    """FP16 TensorRT engine of the face model, run on torch-owned CUDA buffers."""

    name = "tensorrt"

    def __init__(
        self,
        path: str | Path | None = None,
        device: str = "cuda",
        max_batch: int = 64,
        max_seconds: float = 60.0,
    ) -> None:
        super().__init__(max_seconds)
        self._trt = trt = import_tensorrt()
        try:
            import torch
        except ImportError as exc:  # pragma: no cover - depends on installed extras
            raise RuntimeUnavailableError("the TensorRT runtime needs torch for buffers") from exc
        if not torch.cuda.is_available():
            raise RuntimeUnavailableError("TensorRT face runtime: no CUDA device")
        self._torch = torch
        self.device = torch.device(device if device.startswith("cuda") else "cuda")
        self.path = model_path(path)
        self.max_batch = max_batch
        # Profile bounds in feature rows, a multiple of 4 (one video frame).
        self.max_rows = math.ceil(max_seconds * 1000 / HOP_MS / FEATS_PER_FRAME) * FEATS_PER_FRAME
        self._logger = trt.Logger(trt.Logger.WARNING)
        with load_step(logger, f"face model {self.path.name} (tensorrt fp16, {self.device})"):
            blob = self._engine_blob()
            # Kept: the runtime must outlive the engines it deserialized.
            self._runtime = trt.Runtime(self._logger)
            self._engine = self._runtime.deserialize_cuda_engine(blob)
            if self._engine is None:
                raise ModelLoadError("TensorRT could not deserialize the face engine")
            self._context = self._engine.create_execution_context()
        self._lock = threading.Lock()

    def _engine_blob(self) -> bytes:
        torch = self._torch
        props = torch.cuda.get_device_properties(self.device)
        key = engine_cache_key(props.name, (props.major, props.minor), self._trt.__version__,
                               onnx_sha256(self.path), self.max_batch, self.max_rows)
        cached = cache_dir("face-tensorrt") / key
        if cached.is_file():
            logger.info("using cached TensorRT engine %s", cached)
            return cached.read_bytes()
        blob = self._build()
        fd, tmp = tempfile.mkstemp(dir=cached.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, cached)  # atomic: concurrent builders never see half an engine
        logger.info("built TensorRT engine %s", cached)
        return blob

    def _build(self) -> bytes:
        trt = self._trt
        builder = trt.Builder(self._logger)
        network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
        parser = trt.OnnxParser(network, self._logger)
        if not parser.parse(self.path.read_bytes()):
            errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise ModelLoadError(f"TensorRT could not parse {self.path}: {errors}")
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
        if not hasattr(trt.BuilderFlag, "FP16"):
            raise RuntimeUnavailableError(
                f"TensorRT {trt.__version__} has no FP16 builder flag (removed in 11); "
                "install TensorRT 10.x"
            )
        config.set_flag(trt.BuilderFlag.FP16)
        profile = builder.create_optimization_profile()
        opt_rows = min(OPT_ROWS, self.max_rows)
        profile.set_shape(
            INPUT_NAME,
            (1, FEATS_PER_FRAME, N_MELS),
            (1, opt_rows, N_MELS),
            (self.max_batch, self.max_rows, N_MELS),
        )
        config.add_optimization_profile(profile)
        blob = builder.build_serialized_network(network, config)
        if blob is None:
            raise ModelLoadError("TensorRT failed to build the face engine (see its log)")
        return bytes(blob)

    def _run(self, x: np.ndarray) -> np.ndarray:
        if x.shape[0] > self.max_batch:
            # Beyond the profile: split rather than fail.
            parts = [self._run(x[i : i + self.max_batch])
                     for i in range(0, x.shape[0], self.max_batch)]
            return np.concatenate(parts)
        torch = self._torch
        with self._lock:
            inp = torch.from_numpy(x).to(self.device)
            out = self.run_device(inp)
            return np.asarray(out.cpu().numpy())

    def run_device(self, inp: Any) -> Any:
        """Run on a contiguous float32 CUDA tensor [B, T, 80]; returns [B, T/4, 68, 2] on CUDA."""
        torch = self._torch
        inp = inp.contiguous()
        ctx = self._context
        if not ctx.set_input_shape(INPUT_NAME, tuple(inp.shape)):
            raise FaceError(f"input shape {tuple(inp.shape)} outside the engine's profile")
        out = torch.empty(tuple(ctx.get_tensor_shape(OUTPUT_NAME)), device=inp.device,
                          dtype=torch.float32)
        ctx.set_tensor_address(INPUT_NAME, inp.data_ptr())
        ctx.set_tensor_address(OUTPUT_NAME, out.data_ptr())
        stream = torch.cuda.current_stream(inp.device)
        if not ctx.execute_async_v3(stream.cuda_stream):
            raise FaceError("TensorRT execute_async_v3 failed")
        stream.synchronize()
        return out
