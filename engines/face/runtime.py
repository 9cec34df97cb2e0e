"""The common face-runtime surface and the default ONNX Runtime (CPU) implementation.

Contract (every runtime): `predict(features [T, 80]) -> offsets [ceil(T / 4), 68, 2]` float32;
`predict_batch([f1, f2, ...])` runs several sessions' utterances in one call (padded with
silence, which is exactly what the model itself sees past the end of an utterance, so results
equal separate calls up to float rounding); `animate(pcm, sample_rate)` = features + predict.
All of them are thread-safe; one instance serves every session.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from common.face_geometry import NUM_LANDMARKS
from engines.face.artifact import INPUT_NAME, model_path
from engines.face.errors import FaceError, InvalidInputError, ModelLoadError
from engines.face.features import FEATS_PER_FRAME, FPS, HOP_MS, N_MELS, SILENCE_VALUE, log_mel
from engines.progress import load_step

logger = logging.getLogger(__name__)


class FaceRuntime(ABC):
    """Base of the runtimes: input checks, batching by padding, PCM convenience."""

    fps: int = FPS
    name: str = "?"

    def __init__(self, max_seconds: float = 60.0) -> None:
        self.max_rows = int(max_seconds * 1000 / HOP_MS)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """features [T, 80] float32 -> landmark offsets [ceil(T / 4), 68, 2] float32."""
        return self.predict_batch([features])[0]

    def predict_batch(self, batch: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Several utterances (any lengths) in one model call; outputs in input order."""
        checked = [self.check(f) for f in batch]
        if not checked:
            return []
        frames = [math.ceil(len(f) / FEATS_PER_FRAME) for f in checked]
        rows = max(frames) * FEATS_PER_FRAME
        if rows == 0:
            return [np.zeros((0, NUM_LANDMARKS, 2), np.float32) for _ in checked]
        try:
            return self._infer(checked, frames, rows)
        except (FaceError, InvalidInputError):
            raise
        except Exception as exc:  # backend errors come in many types; keep them typed here
            raise FaceError(f"{self.name} face runtime failed: {exc}") from exc

    def _infer(self, feats: list[np.ndarray], frames: list[int], rows: int) -> list[np.ndarray]:
        """Checked utterances -> their offsets: pad into one [B, rows, 80] array, run it."""
        x = np.full((len(feats), rows, N_MELS), SILENCE_VALUE, dtype=np.float32)
        for i, f in enumerate(feats):
            x[i, : len(f)] = f
        y = self._run(x)
        return [np.ascontiguousarray(y[i, :n], dtype=np.float32) for i, n in enumerate(frames)]

    def animate(self, pcm: np.ndarray, sample_rate: int) -> np.ndarray:
        """Speech PCM -> offsets [ceil(duration * 25), 68, 2] (frame k at t = k / 25 s)."""
        return self.predict(log_mel(pcm, sample_rate))

    def check(self, features: np.ndarray) -> np.ndarray:
        """Validated float32 features [T, 80] (`InvalidInputError` otherwise); callers that
        batch several sessions check each request first, so one bad input fails only its own
        caller."""
        f = np.asarray(features)
        if f.ndim != 2 or f.shape[1] != N_MELS:
            raise InvalidInputError(f"features must be [T, {N_MELS}], got {f.shape}")
        if not np.issubdtype(f.dtype, np.floating):
            raise InvalidInputError(f"features must be float, got {f.dtype}")
        if len(f) > self.max_rows:
            raise InvalidInputError(
                f"utterance too long: {len(f)} feature rows > {self.max_rows}; split it"
            )
        f = f.astype(np.float32, copy=False)
        if not np.isfinite(f).all():
            raise InvalidInputError("features contain NaN or infinity")
        return f

    @abstractmethod
    def _run(self, x: np.ndarray) -> np.ndarray:
        """x [B, T, 80] (T a multiple of 4) -> [B, T / 4, 68, 2]."""


class OnnxRuntimeFace(FaceRuntime):
    """The shipped ONNX file on ONNX Runtime's CPU provider (the default runtime)."""

    name = "onnxruntime"

    def __init__(
        self, path: str | Path | None = None, threads: int = 1, max_seconds: float = 60.0
    ) -> None:
        super().__init__(max_seconds)
        try:
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - depends on installed extras
            raise ModelLoadError("onnxruntime is not installed (extra `face`)") from exc
        self.path = model_path(path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        with load_step(logger, f"face model {self.path.name} (onnxruntime)"):
            try:
                self._session = ort.InferenceSession(
                    str(self.path), options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:
                raise ModelLoadError(f"cannot load face model {self.path}: {exc}") from exc

    def _run(self, x: np.ndarray) -> np.ndarray:
        out = self._session.run(None, {INPUT_NAME: x})[0]
        return np.asarray(out)
