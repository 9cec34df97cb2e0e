"""HTTP-facing errors: each carries its status and a stable machine-readable code."""


class SignalingError(Exception):
    status = 500
    code = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(SignalingError):
    status = 400
    code = "bad_request"


class InvalidOffer(BadRequest):
    code = "invalid_offer"


class InvalidPortrait(BadRequest):
    """The uploaded portrait is not usable (not an image, wrong size, no or several faces)."""

    status = 422
    code = "invalid_portrait"


class Unauthorized(SignalingError):
    status = 401
    code = "unauthorized"


class PortraitNotFound(SignalingError):
    status = 404
    code = "portrait_not_found"


class SessionNotFound(SignalingError):
    status = 404
    code = "session_not_found"


class SessionExists(SignalingError):
    status = 409
    code = "session_exists"


class PayloadTooLarge(SignalingError):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(SignalingError):
    status = 415
    code = "unsupported_media_type"


class AtCapacity(SignalingError):
    status = 503
    code = "at_capacity"
