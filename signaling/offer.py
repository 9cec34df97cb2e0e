"""Validation of the offer JSON body `{"sdp": "...", "type": "offer"}`.

Only structural checks live here (JSON shape, SDP skeleton, an audio and a video section);
whether the codecs are acceptable is decided by the peer connection, which raises
`InvalidOffer` too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from signaling.errors import InvalidOffer

MAX_SDP_CHARS = 60 * 1024


@dataclass(frozen=True)
class Offer:
    sdp: str
    type: str = "offer"
    portrait_id: str | None = None  # from POST /api/portrait
    persona: str | None = None  # asked for by an app (SmallWebRTC `requestData.persona`)

    def media_kinds(self) -> list[str]:
        lines = self.sdp.splitlines()
        return [line[2:].split(" ", 1)[0] for line in lines if line.startswith("m=")]


def load_object(body: bytes, shape: str) -> dict[str, Any]:
    """The body as a JSON object; raises InvalidOffer naming the expected `shape`."""
    if not body.strip():
        raise InvalidOffer(f"empty body: expected JSON {shape}")
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidOffer(f"body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidOffer("body must be a JSON object")
    return data


def parse_offer(body: bytes) -> Offer:
    """Parse and validate an offer body; raises InvalidOffer with a human-readable reason."""
    return offer_from(load_object(body, '{"sdp": ..., "type": "offer"}'))


def offer_from(
    data: dict[str, Any], *, portrait_id: object = None, persona: object = None
) -> Offer:
    """Validate the offer fields of a parsed body (`portrait_id` defaults to the body's)."""
    if data.get("type") != "offer":
        raise InvalidOffer('"type" must be "offer"')
    sdp = data.get("sdp")
    if not isinstance(sdp, str) or not sdp.strip():
        raise InvalidOffer('"sdp" must be a non-empty string')
    if len(sdp) > MAX_SDP_CHARS:
        raise InvalidOffer("sdp is too long")
    if not sdp.lstrip().startswith("v=0"):
        raise InvalidOffer('sdp must start with "v=0"')
    if portrait_id is None:
        portrait_id = data.get("portrait_id")
    if portrait_id is not None and (not isinstance(portrait_id, str) or len(portrait_id) > 128):
        raise InvalidOffer('"portrait_id" must be a string from POST /api/portrait')
    if persona is not None and (not isinstance(persona, str) or len(persona) > 64):
        raise InvalidOffer('"persona" must be a persona name')
    offer = Offer(sdp=sdp, portrait_id=portrait_id, persona=persona)
    kinds = offer.media_kinds()
    if "audio" not in kinds or "video" not in kinds:
        raise InvalidOffer(
            f"sdp must offer an audio and a video section (found: {', '.join(kinds) or 'none'})"
        )
    return offer
