"""Typed errors of the TTS engines."""

from engines.errors import EngineError, InvalidInputError, ModelLoadError


class TTSError(EngineError):
    """Synthesis failed inside the voice engine."""


__all__ = ["InvalidInputError", "ModelLoadError", "TTSError"]
