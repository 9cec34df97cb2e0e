"""Typed errors of the turn models."""

from __future__ import annotations

from engines.errors import InvalidInputError, ModelLoadError


class InvalidTurnConfigError(InvalidInputError):
    """A `TurnConfig` value is out of range."""


class TurnModelLoadError(ModelLoadError):
    """The turn model's ONNX file or its feature extractor could not be loaded."""


__all__ = ["InvalidInputError", "InvalidTurnConfigError", "TurnModelLoadError"]
