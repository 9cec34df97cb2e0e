"""Typed engine errors. Each engine subpackage subclasses these in its own `errors.py`."""


class EngineError(Exception):
    """Base class of every error an engine raises on purpose."""


class ModelLoadError(EngineError):
    """A model's files are missing, corrupt or of the wrong kind."""


class InvalidInputError(EngineError, ValueError):
    """The caller passed data the engine cannot use (wrong rate, dtype, shape, empty text)."""
