"""Typed errors of the face engines: model loading, bad features, a failing backend."""

from engines.errors import EngineError, InvalidInputError, ModelLoadError


class FaceError(EngineError):
    """A face model failed while running (runtime error inside the backend)."""


class RuntimeUnavailableError(ModelLoadError):
    """The chosen runtime (torch CUDA, TensorRT) is not installed or has no device here."""


__all__ = [
    "FaceError",
    "InvalidInputError",
    "ModelLoadError",
    "RuntimeUnavailableError",
]
