"""Face engines: speech audio -> 68 facial landmark offsets per 25 fps video frame.

`create_face(config)` loads the shipped ONNX model on the configured runtime ("onnxruntime"
default on CPU, "torch" on CPU/CUDA with CUDA graphs, "tensorrt" FP16 on NVIDIA GPUs); every
runtime has `predict(features)`, `predict_batch([...])` and `animate(pcm, sample_rate)`.
`engines.face.smoothing.KalmanSmoother` smooths a session's landmark stream. Training lives
apart in `engines.face.training` (never imported by a server), portrait intake in
`engines.portrait`. Heavy packages load lazily inside the implementation modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engines.face.base import NUM_LANDMARKS, FaceAnimator
from engines.face.config import FaceConfig
from engines.face.errors import InvalidInputError

if TYPE_CHECKING:
    from engines.face.runtime import FaceRuntime
    from engines.face.smoothing import KalmanSmoother

__all__ = ["NUM_LANDMARKS", "FaceAnimator", "FaceConfig", "create_face", "create_smoother"]


def create_face(config: FaceConfig | None = None) -> FaceRuntime:
    """Load the face model on the configured runtime (one instance serves every session)."""
    config = config or FaceConfig()
    if config.engine == "onnxruntime":
        from engines.face.runtime import OnnxRuntimeFace

        return OnnxRuntimeFace(config.model_path, threads=config.threads,
                               max_seconds=config.max_seconds)
    if config.engine == "torch":
        from engines.face.torch_runtime import TorchFace

        return TorchFace(config.model_path, device=config.device, cuda_graphs=config.cuda_graphs,
                         half=config.half, max_seconds=config.max_seconds)
    if config.engine == "tensorrt":
        from engines.face.tensorrt_runtime import TensorRTFace

        device = config.device if config.device.startswith("cuda") else "cuda"
        return TensorRTFace(config.model_path, device=device, max_batch=config.max_batch,
                            max_seconds=config.max_seconds)
    raise InvalidInputError(
        f"unknown face engine {config.engine!r} (onnxruntime, torch, tensorrt)"
    )


def create_smoother(config: FaceConfig | None = None) -> KalmanSmoother | None:
    """A per-session landmark smoother, or None when `config.smoothing` is off."""
    config = config or FaceConfig()
    if not config.smoothing:
        return None
    from engines.face.smoothing import KalmanSmoother

    return KalmanSmoother(config.process_noise, config.measurement_noise)
