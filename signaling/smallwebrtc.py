"""Pipecat's SmallWebRTC signaling: the request bodies, validated, and the `/start` tickets.

The contract (read from `pipecat/transports/smallwebrtc/request_handler.py` and the JS
transport `@pipecat-ai/small-webrtc-transport` 1.10.8):

- offer, `POST`: `{"sdp", "type": "offer", "pc_id": str | null, "restart_pc": bool | null,
  "requestData" | "request_data": any}`. `pc_id` null asks for a new connection; a `pc_id`
  names a live one, renegotiated on its own peer connection, or on a new one with
  `restart_pc`. The answer is `{"sdp", "type": "answer", "pc_id"}`. The JS transport sends
  its offer before ICE gathering ends and trickles the rest of its candidates.
- candidates, `PATCH` on the same URL: `{"pc_id", "candidates": [{"candidate", "sdp_mid",
  "sdp_mline_index"}]}`. An empty `candidate` is the end-of-candidates marker of RFC 8840
  (Firefox sends one per media section).
- `POST /start` (the prebuilt client's first call) mints a session id for
  `/sessions/{id}/api/offer`; its `body` is the session's request data unless the offer
  brings its own.

What an app asks for rides in `requestData`: `portrait_id` (from `POST /api/portrait`) and
`persona`. Everything here is shape and limits; the peer connection judges the SDP and the
candidates themselves.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from signaling.errors import BadRequest, InvalidOffer
from signaling.offer import Offer, load_object, offer_from

MAX_PC_ID_CHARS = 128
MAX_CANDIDATES = 64  # per PATCH; a browser gathers a handful per network interface
MAX_CANDIDATE_CHARS = 1024  # an SDP candidate line is ~100 characters


class InvalidCandidate(BadRequest):
    code = "invalid_candidate"


@dataclass(frozen=True)
class PeerOffer:
    """A SmallWebRTC offer: a new connection (`pc_id` None) or one for a live connection."""

    offer: Offer
    pc_id: str | None = None
    restart: bool = False
    request_data: dict[str, Any] | None = None


@dataclass(frozen=True)
class IceCandidate:
    """A trickled remote candidate; `candidate` "" is the end-of-candidates marker."""

    candidate: str
    sdp_mid: str | None = None
    sdp_mline_index: int | None = None

    @property
    def end_of_candidates(self) -> bool:
        return not self.candidate


@dataclass(frozen=True)
class CandidatePatch:
    pc_id: str
    candidates: tuple[IceCandidate, ...]


def _pc_id(value: object, error: type[BadRequest]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_PC_ID_CHARS:
        raise error(f'"pc_id" must be null or a string of at most {MAX_PC_ID_CHARS} characters')
    return value


def parse_peer_offer(body: bytes, default_request_data: dict[str, Any] | None = None) -> PeerOffer:
    """Parse an offer body of ours or of SmallWebRTC (a superset); raises InvalidOffer."""
    data = load_object(body, '{"sdp": ..., "type": "offer", "pc_id": ...}')
    raw = data.get("request_data", data.get("requestData"))
    if raw is None:
        raw = default_request_data
    if raw is not None and not isinstance(raw, dict):
        raise InvalidOffer('"requestData" must be a JSON object')
    request_data = raw or {}
    restart = data.get("restart_pc")
    if restart is not None and not isinstance(restart, bool):
        raise InvalidOffer('"restart_pc" must be true, false or null')
    offer = offer_from(
        data,
        portrait_id=data.get("portrait_id", request_data.get("portrait_id")),
        persona=request_data.get("persona"),
    )
    return PeerOffer(offer, _pc_id(data.get("pc_id"), InvalidOffer), bool(restart), raw)


def _candidate(item: object) -> IceCandidate:
    if not isinstance(item, dict):
        raise InvalidCandidate("each candidate must be a JSON object")
    line = item.get("candidate")
    mid = item.get("sdp_mid", item.get("sdpMid"))
    index = item.get("sdp_mline_index", item.get("sdpMLineIndex"))
    if line is None:
        line = ""
    if not isinstance(line, str) or len(line) > MAX_CANDIDATE_CHARS:
        raise InvalidCandidate(f'"candidate" must be a string of at most {MAX_CANDIDATE_CHARS}')
    if line and not line.removeprefix("a=").startswith("candidate:"):
        raise InvalidCandidate('"candidate" must be an SDP candidate ("candidate:...") or ""')
    if mid is not None and (not isinstance(mid, str) or len(mid) > 32):
        raise InvalidCandidate('"sdp_mid" must be null or a short string')
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)
                              or not 0 <= index < 64):
        raise InvalidCandidate('"sdp_mline_index" must be null or an integer 0..63')
    if line and mid is None and index is None:
        raise InvalidCandidate('a candidate needs "sdp_mid" or "sdp_mline_index"')
    return IceCandidate(line.removeprefix("a="), mid, index)


def parse_patch(body: bytes) -> CandidatePatch:
    """Parse a trickle-ICE PATCH body; raises InvalidCandidate with the reason."""
    try:
        data = load_object(body, '{"pc_id": ..., "candidates": [...]}')
    except InvalidOffer as exc:
        raise InvalidCandidate(exc.message) from exc
    pc_id = _pc_id(data.get("pc_id"), InvalidCandidate)
    if pc_id is None:
        raise InvalidCandidate('"pc_id" is required: the answer to the offer names it')
    items = data.get("candidates")
    if not isinstance(items, list):
        raise InvalidCandidate('"candidates" must be a list')
    if len(items) > MAX_CANDIDATES:
        raise InvalidCandidate(f"at most {MAX_CANDIDATES} candidates per request")
    return CandidatePatch(pc_id, tuple(_candidate(item) for item in items))


def parse_start(body: bytes) -> dict[str, Any] | None:
    """The request data a `POST /start` body carries for its session (`body`), if any."""
    if not body.strip():
        return None
    try:
        data = load_object(body, '{"body": {...}}')
    except InvalidOffer as exc:
        raise BadRequest(exc.message) from exc
    inner = data.get("body")
    if inner is not None and not isinstance(inner, dict):
        raise BadRequest('"body" must be a JSON object')
    return inner


class StartTickets:
    """Session ids minted by `POST /start`, each waiting `ttl_s` for its first offer.

    Bounded: the oldest ticket is dropped when `limit` are outstanding, so a client calling
    `/start` in a loop holds no memory. A ticket is used once.
    """

    def __init__(self, ttl_s: float, limit: int, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._ttl_s = ttl_s
        self._limit = limit
        self._clock = clock
        self._tickets: OrderedDict[str, tuple[float, dict[str, Any] | None]] = OrderedDict()

    def __len__(self) -> int:
        self._expire()
        return len(self._tickets)

    def _expire(self) -> None:
        now = self._clock()
        while self._tickets and next(iter(self._tickets.values()))[0] <= now:
            self._tickets.popitem(last=False)

    def issue(self, request_data: dict[str, Any] | None) -> str:
        self._expire()
        while len(self._tickets) >= self._limit:
            self._tickets.popitem(last=False)
        ticket = secrets.token_urlsafe(12)
        self._tickets[ticket] = (self._clock() + self._ttl_s, request_data)
        return ticket

    def holds(self, ticket: str) -> bool:
        self._expire()
        return ticket in self._tickets

    def take(self, ticket: str) -> dict[str, Any] | None:
        """Use a ticket: its request data. KeyError when it is unknown or expired."""
        self._expire()
        return self._tickets.pop(ticket)[1]
