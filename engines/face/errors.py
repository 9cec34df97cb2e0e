"""Typed errors of the face engines: model loading, bad features, bad portraits."""

from engines.errors import EngineError, InvalidInputError, ModelLoadError


class FaceError(EngineError):
    """A face model failed while running (runtime error inside the backend)."""


class RuntimeUnavailableError(ModelLoadError):
    """The chosen runtime (torch CUDA, TensorRT) is not installed or has no device here."""


class PortraitError(InvalidInputError):
    """The portrait cannot be animated; subclasses say why (message is user-facing)."""


class NotAnImageError(PortraitError):
    """The data is not a decodable JPEG/PNG/WebP/BMP image."""


class PortraitSizeError(PortraitError):
    """The image (bytes or pixels) or the face in it is too small or too large."""


class NoFaceError(PortraitError):
    """No face was found in the portrait."""


class SeveralFacesError(PortraitError):
    """More than one face was found; the avatar needs exactly one."""


__all__ = [
    "FaceError",
    "InvalidInputError",
    "ModelLoadError",
    "NoFaceError",
    "NotAnImageError",
    "PortraitError",
    "PortraitSizeError",
    "RuntimeUnavailableError",
    "SeveralFacesError",
]
