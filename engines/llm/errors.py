"""Typed errors of the LLM engines."""

from engines.errors import EngineError, InvalidInputError, ModelLoadError


class LLMError(EngineError):
    """Generation failed (the model raised, or the server broke off)."""


class LLMTimeoutError(LLMError):
    """The server did not answer (or stalled) within the configured timeout."""


__all__ = ["InvalidInputError", "LLMError", "LLMTimeoutError", "ModelLoadError"]
