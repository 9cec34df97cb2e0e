"""Typed errors of the asr engines."""

from __future__ import annotations

from engines.errors import EngineError, InvalidInputError, ModelLoadError


class InvalidAsrConfigError(InvalidInputError):
    """An `AsrConfig` value is out of range."""


class InvalidAudioError(InvalidInputError):
    """Audio handed to a stream is not 16 kHz mono int16."""


class AsrModelLoadError(ModelLoadError):
    """The ASR model or its package is missing or unreadable."""


class StreamClosedError(EngineError):
    """`feed`/`finish` called on a stream that already finished."""
