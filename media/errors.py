"""Typed errors of the media package."""


class MediaError(Exception):
    """Base class of media errors."""


class InvalidMediaError(MediaError, ValueError):
    """Audio or video handed to the scheduler has the wrong shape, type or rate."""
