"""The face model in PyTorch, rebuilt from the shipped ONNX file; CPU or CUDA with CUDA graphs.

Contract: as `runtime.FaceRuntime`. On CUDA with `cuda_graphs`, each (batch, length) bucket is
captured once (batch rounded up to a power of two, length up to a multiple of BUCKET_ROWS
feature rows, both padded with silence, which leaves the real frames unchanged) and replayed:
one graph launch instead of ~30 kernel launches, which is what makes batch-1 calls cheap.
Calls are serialised by a lock (the captured graphs share static buffers).
"""

from __future__ import annotations

import logging
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np

from engines.face.artifact import load_torch, model_path
from engines.face.errors import ModelLoadError, RuntimeUnavailableError
from engines.face.features import FEATS_PER_FRAME, SILENCE_VALUE
from engines.face.runtime import FaceRuntime
from engines.progress import load_step

logger = logging.getLogger(__name__)

BUCKET_ROWS = 128  # 1.28 s of audio per length bucket


class _Captured:
    def __init__(self, graph: Any, inp: Any, out: Any) -> None:
        self.graph, self.inp, self.out = graph, inp, out


class TorchFace(FaceRuntime):
    """`AudioToLandmarks` on torch; `device="cuda"` enables CUDA graphs and optional fp16."""

    name = "torch"

    def __init__(
        self,
        path: str | Path | None = None,
        device: str = "cpu",
        cuda_graphs: bool = True,
        half: bool = False,
        max_seconds: float = 60.0,
    ) -> None:
        super().__init__(max_seconds)
        try:
            import torch
        except ImportError as exc:  # pragma: no cover - depends on installed extras
            raise ModelLoadError("torch is not installed (extra `face`)") from exc
        self._torch = torch
        self.path = model_path(path)
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeUnavailableError("torch face runtime: CUDA requested but not available")
        self.half = half and self.device.type == "cuda"
        self.dtype = torch.float16 if self.half else torch.float32
        self.use_graphs = cuda_graphs and self.device.type == "cuda"
        with load_step(logger, f"face model {self.path.name} (torch, {self.device})"):
            self.model = load_torch(self.path).to(self.device, self.dtype)
        self._graphs: dict[tuple[int, int], _Captured] = {}
        self._lock = threading.Lock()

    def _run(self, x: np.ndarray) -> np.ndarray:
        torch = self._torch
        with self._lock, torch.no_grad():
            if not self.use_graphs:
                inp = torch.from_numpy(x).to(self.device, self.dtype)
                return np.asarray(self.model(inp).float().cpu().numpy())
            batch, rows = x.shape[0], x.shape[1]
            key = (1 << (batch - 1).bit_length(), math.ceil(rows / BUCKET_ROWS) * BUCKET_ROWS)
            captured = self._graphs.get(key) or self._capture(*key)
            captured.inp.fill_(SILENCE_VALUE)
            captured.inp[:batch, :rows].copy_(torch.from_numpy(x), non_blocking=False)
            captured.graph.replay()
            out = captured.out[:batch, : rows // FEATS_PER_FRAME].float().cpu()
            return np.asarray(out.numpy())

    def run_device(self, x: Any) -> Any:
        """Model on a device tensor [B, T, 80] already in place (no copies, no graph): for
        callers that keep features on the GPU (and for the benchmark's transfer-free row)."""
        with self._torch.no_grad():
            return self.model(x.to(self.dtype))

    def _capture(self, batch: int, rows: int) -> _Captured:
        torch = self._torch
        inp = torch.full((batch, rows, self.model.config.n_mels), SILENCE_VALUE,
                         device=self.device, dtype=self.dtype)
        # Warm-up on a side stream before capture, as torch.cuda.graphs requires.
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(3):
                self.model(inp)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = self.model(inp)
        captured = _Captured(graph, inp, out)
        self._graphs[(batch, rows)] = captured
        logger.debug("captured face CUDA graph batch=%d rows=%d", batch, rows)
        return captured
