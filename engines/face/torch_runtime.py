"""The face model in PyTorch, rebuilt from the shipped ONNX file; CPU or CUDA with CUDA graphs.

Contract: as `runtime.FaceRuntime`. On CUDA with `cuda_graphs`, each (batch, length) bucket is
captured once (batch rounded up to a power of two, length up to a multiple of BUCKET_ROWS
feature rows, both padded with silence, which leaves the real frames unchanged) and replayed:
one graph launch instead of ~30 kernel launches, which is what makes batch-1 calls cheap.
The graph takes float32 features and casts to float16 inside when `half`, and the utterances
are written straight into a pinned host buffer, copied over in one transfer and the result
copied back into another: for a batch of 64 sessions the copies, not the model, are the cost.
`warm_up()` captures the buckets a live server meets (one executor thread calls it at
start-up). Calls are serialised by a lock (the captured graphs share static buffers).
"""

from __future__ import annotations

import logging
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np

from common.face_geometry import NUM_LANDMARKS
from engines.device_wait import wait_for_device
from engines.face.artifact import load_torch, model_path
from engines.face.errors import ModelLoadError, RuntimeUnavailableError
from engines.face.features import FEATS_PER_FRAME, N_MELS, SILENCE_VALUE
from engines.face.runtime import FaceRuntime
from engines.progress import load_step

logger = logging.getLogger(__name__)

BUCKET_ROWS = 128  # 1.28 s of audio per length bucket
WARM_SECONDS = 6.4  # warm_up() captures lengths up to this (a TTS chunk is a clause or sentence)


class _Captured:
    def __init__(self, graph: Any, inp: Any, out: Any) -> None:
        self.graph, self.inp, self.out = graph, inp, out


def bucket(batch: int, rows: int) -> tuple[int, int]:
    """The captured shape that holds `batch` utterances of `rows` feature rows."""
    return 1 << (batch - 1).bit_length(), math.ceil(rows / BUCKET_ROWS) * BUCKET_ROWS


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
            raise RuntimeUnavailableError(
                f"torch face runtime: device {device!r} requested but torch sees no CUDA GPU "
                '(torch.cuda.is_available() is False); use [face] engine = "onnxruntime"'
            )
        self.half = half and self.device.type == "cuda"
        self.dtype = torch.float16 if self.half else torch.float32
        self.use_graphs = cuda_graphs and self.device.type == "cuda"
        with load_step(logger, f"face model {self.path.name} (torch, {self.device})"):
            self.model = load_torch(self.path).to(self.device, self.dtype)
        self._graphs: dict[tuple[int, int], _Captured] = {}
        # One memory pool for every graph: calls are serialised and each result is copied
        # out before the next replay, so the graphs may reuse each other's scratch memory.
        self._pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
        self._host_in: Any = None  # pinned staging buffers, grown on demand
        self._host_out: Any = None
        self._lock = threading.Lock()

    def warm_up(self, max_batch: int = 64, seconds: float = WARM_SECONDS) -> int:
        """Capture every (batch, length) bucket up to these bounds now rather than in the
        first sessions' calls; returns how many graphs exist. No-op without graphs."""
        if not self.use_graphs:
            return 0
        rows = min(math.ceil(seconds * 100 / BUCKET_ROWS) * BUCKET_ROWS, self.max_rows)
        batches = [1 << i for i in range((max(max_batch, 1) - 1).bit_length() + 1)]
        with self._lock, self._torch.no_grad(), load_step(
            logger, f"face CUDA graphs (batch 1..{batches[-1]}, up to {rows} feature rows)"
        ):
            for b in batches:
                for r in range(BUCKET_ROWS, rows + 1, BUCKET_ROWS):
                    if (b, r) not in self._graphs:
                        self._capture(b, r)
        return len(self._graphs)

    def _infer(self, feats: list[np.ndarray], frames: list[int], rows: int) -> list[np.ndarray]:
        if not self.use_graphs:
            return super()._infer(feats, frames, rows)
        torch = self._torch
        with self._lock, torch.no_grad():
            key = bucket(len(feats), rows)
            captured = self._graphs.get(key) or self._capture(*key)
            batch, width = len(feats), key[1]
            host_in = self._staging("in", batch * width * N_MELS).view(batch, width, N_MELS)
            staged = host_in.numpy()
            for i, f in enumerate(feats):
                staged[i, : len(f)] = f
                staged[i, len(f) :] = SILENCE_VALUE  # the model reads ahead into silence
            # Graph slots past `batch` keep whatever they held: batch entries never mix.
            captured.inp[:batch].copy_(host_in, non_blocking=True)
            captured.graph.replay()
            n_out = width // FEATS_PER_FRAME
            host_out = self._staging("out", batch * n_out * NUM_LANDMARKS * 2)
            host_out = host_out.view(batch, n_out, NUM_LANDMARKS, 2)
            host_out.copy_(captured.out[:batch], non_blocking=True)
            wait_for_device(torch, self.device)  # asleep, not spinning (engines/device_wait.py)
            out = host_out.numpy()
            return [out[i, :n].copy() for i, n in enumerate(frames)]

    def _run(self, x: np.ndarray) -> np.ndarray:
        """Eager path (CPU, or CUDA without graphs)."""
        torch = self._torch
        with self._lock, torch.no_grad():
            inp = torch.from_numpy(x).to(self.device, self.dtype)
            return np.asarray(self.model(inp).float().cpu().numpy())

    def run_device(self, x: Any) -> Any:
        """Model on a device tensor [B, T, 80] already in place (no copies, no graph): for
        callers that keep features on the GPU (and for the benchmark's transfer-free row)."""
        with self._torch.no_grad():
            return self.model(x.to(self.dtype))

    def _staging(self, which: str, elements: int) -> Any:
        """A pinned float32 host buffer of at least `elements` (the first `elements` of it)."""
        torch = self._torch
        current = self._host_in if which == "in" else self._host_out
        if current is None or current.numel() < elements:
            current = torch.empty(max(elements, 1 << 16), dtype=torch.float32, pin_memory=True)
            if which == "in":
                self._host_in = current
            else:
                self._host_out = current
        return current[:elements]

    def _capture(self, batch: int, rows: int) -> _Captured:
        torch = self._torch
        inp = torch.full((batch, rows, self.model.config.n_mels), SILENCE_VALUE,
                         device=self.device, dtype=torch.float32)

        def forward() -> Any:
            return self.model(inp.to(self.dtype)).float()

        # Warm-up on a side stream before capture, as torch.cuda.graphs requires.
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(3):
                forward()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # thread_local: the LLM's decode thread may use CUDA while this thread captures.
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            out = forward()
        captured = _Captured(graph, inp, out)
        self._graphs[(batch, rows)] = captured
        logger.debug("captured face CUDA graph batch=%d rows=%d", batch, rows)
        return captured

