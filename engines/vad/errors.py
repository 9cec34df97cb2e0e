"""Typed errors of the vad engines."""

from __future__ import annotations

from engines.errors import InvalidInputError, ModelLoadError


class InvalidVadConfigError(InvalidInputError):
    """A `VadConfig` value is out of range."""


class VadModelLoadError(ModelLoadError):
    """The silero-vad ONNX file or webrtcvad module could not be loaded."""


__all__ = ["InvalidInputError", "InvalidVadConfigError", "VadModelLoadError"]
