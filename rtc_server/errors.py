"""Typed errors of the server process.

Domain errors, not HTTP ones: the session and the portrait store raise them, and the app
hands signaling the table that turns each into its HTTP status and code (`HTTP_ERRORS` in
`rtc_server/app.py`, applied by `signaling.http`'s error middleware).
"""


class ServerError(Exception):
    """Base class of server errors."""


class ConfigError(ServerError, ValueError):
    """The configuration file or a command-line option is invalid."""


class OfferRejected(ServerError):
    """The peer connection cannot use the offer (malformed SDP, no usable codec or
    direction)."""


class PortraitRejected(ServerError):
    """An uploaded portrait is unusable (not an image, wrong size, no or several faces), or
    this server takes no uploads (echo mode)."""


class UnknownPortrait(ServerError):
    """An offer names a portrait this server does not hold (never uploaded, or evicted)."""


class CandidateRejected(ServerError):
    """A trickled ICE candidate is malformed or names no media section of the connection."""


class NotSupported(ServerError):
    """The session cannot do what its client asked (a typed question in echo mode)."""
