"""Validation of the offer JSON body `{"sdp": "...", "type": "offer"}`.

Only structural checks live here (JSON shape, SDP skeleton, an audio and a video section);
whether the codecs are acceptable is decided by the peer connection, which raises
`InvalidOffer` too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from signaling.errors import InvalidOffer

MAX_SDP_CHARS = 60 * 1024


@dataclass(frozen=True)
class Offer:
    sdp: str
    type: str = "offer"
    portrait_id: str | None = None  # from POST /api/portrait

    def media_kinds(self) -> list[str]:
        lines = self.sdp.splitlines()
        return [line[2:].split(" ", 1)[0] for line in lines if line.startswith("m=")]


def parse_offer(body: bytes) -> Offer:
    """Parse and validate an offer body; raises InvalidOffer with a human-readable reason."""
    if not body.strip():
        raise InvalidOffer('empty body: expected JSON {"sdp": ..., "type": "offer"}')
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidOffer(f"body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidOffer("body must be a JSON object")
    if data.get("type") != "offer":
        raise InvalidOffer('"type" must be "offer"')
    sdp = data.get("sdp")
    if not isinstance(sdp, str) or not sdp.strip():
        raise InvalidOffer('"sdp" must be a non-empty string')
    if len(sdp) > MAX_SDP_CHARS:
        raise InvalidOffer("sdp is too long")
    if not sdp.lstrip().startswith("v=0"):
        raise InvalidOffer('sdp must start with "v=0"')
    portrait_id = data.get("portrait_id")
    if portrait_id is not None and (not isinstance(portrait_id, str) or len(portrait_id) > 128):
        raise InvalidOffer('"portrait_id" must be a string from POST /api/portrait')
    offer = Offer(sdp=sdp, portrait_id=portrait_id)
    kinds = offer.media_kinds()
    if "audio" not in kinds or "video" not in kinds:
        raise InvalidOffer(
            f"sdp must offer an audio and a video section (found: {', '.join(kinds) or 'none'})"
        )
    return offer
