"""Typed errors of portrait intake; messages are meant for end users."""

from engines.errors import InvalidInputError


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
    "NoFaceError",
    "NotAnImageError",
    "PortraitError",
    "PortraitSizeError",
    "SeveralFacesError",
]
