"""Face engine options: which runtime runs the audio-to-landmark model, and the smoothing.

Defaults are the embedded offline default: the shipped ONNX file on ONNX Runtime (CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.face.errors import InvalidInputError


@dataclass(frozen=True)
class FaceConfig:
    engine: str = "onnxruntime"  # runtime: "onnxruntime" (CPU), "torch" (CPU/CUDA), "tensorrt"
    model_path: str | None = None  # ONNX file; None = engines/face/face_landmarks.onnx
    device: str = "cpu"  # torch runtime: "cpu", "cuda" or "cuda:N"; tensorrt always uses CUDA
    threads: int = 1  # onnxruntime intra-op threads per call (calls are small; sessions many)
    cuda_graphs: bool = True  # torch on CUDA: replay captured graphs per (batch, length) bucket
    half: bool = False  # torch on CUDA: run in float16
    max_batch: int = 64  # most sessions' chunks per model call (batcher; tensorrt profile)
    max_seconds: float = 60.0  # longest utterance per call (tensorrt profile; input check)
    # Batch the sessions' chunks across sessions (rtc_server/face_batch.py); None = on for
    # torch on CUDA and for tensorrt, off on the CPU (where a batch costs the sum of its parts)
    batch: bool | None = None
    batch_window_ms: float = 2.0  # how long the first chunk waits for others to join its call
    batch_queue: int = 256  # chunks that may wait for a call; more callers wait for room
    smoothing: bool = True  # Kalman-smooth landmark sequences (`engines.face.smoothing`)
    # Kalman noise (face units): light, as the model's output is already smooth; q = 0.004 halves
    # white-noise jitter but costs ~0.04 of lip-sync correlation (engines/face/smoothing.py).
    process_noise: float = 0.01  # acceleration noise std per frame^2
    measurement_noise: float = 0.01  # observation noise std

    def __post_init__(self) -> None:
        if self.max_batch < 1 or self.batch_queue < self.max_batch or self.batch_window_ms < 0:
            raise InvalidInputError(
                "face: max_batch >= 1, batch_queue >= max_batch, batch_window_ms >= 0"
            )
