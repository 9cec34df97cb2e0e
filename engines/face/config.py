"""Face engine options: which runtime runs the audio-to-landmark model, and the smoothing.

Defaults are the embedded offline default: the shipped ONNX file on ONNX Runtime (CPU).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FaceConfig:
    engine: str = "onnxruntime"  # runtime: "onnxruntime" (CPU), "torch" (CPU/CUDA), "tensorrt"
    model_path: str | None = None  # ONNX file; None = engines/face/face_landmarks.onnx
    device: str = "cpu"  # torch runtime: "cpu", "cuda" or "cuda:N"; tensorrt always uses CUDA
    threads: int = 1  # onnxruntime intra-op threads per call (calls are small; sessions many)
    cuda_graphs: bool = True  # torch on CUDA: replay captured graphs per (batch, length) bucket
    half: bool = False  # torch on CUDA: run in float16
    max_batch: int = 64  # tensorrt optimization profile: largest batch (sessions per call)
    max_seconds: float = 60.0  # longest utterance per call (tensorrt profile; input check)
    smoothing: bool = True  # Kalman-smooth landmark sequences (`engines.face.smoothing`)
    # Kalman noise (face units): light, as the model's output is already smooth; q = 0.004 halves
    # white-noise jitter but costs ~0.04 of lip-sync correlation (engines/face/smoothing.py).
    process_noise: float = 0.01  # acceleration noise std per frame^2
    measurement_noise: float = 0.01  # observation noise std
