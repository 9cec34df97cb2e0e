"""Offer/answer on one aiortc peer connection: our tracks placed, directions decided, remote
candidates trickled in.

What we send and receive, whatever the offer holds: our voice on the first audio section and
the face on the first video section; we receive only the microphone. The Pipecat JS
transport offers audio sendrecv, video sendrecv (the user's camera) and, with screen sharing
on, a video sendonly; an app's camera and screen are not used by the agent, so the first video
section is answered `sendonly` and any further section `inactive`: the browser then sends no
video at all, and the server decodes none (a camera decoded and dropped costs a core's share
on a 2-core server, and aiortc queues decoded frames nobody reads without bound).

Errors: aiortc reports a malformed SDP or candidate with builtin errors and an unusable codec
or direction with its own; both come out as `OfferRejected` / `CandidateRejected`.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiortc import RTCIceCandidate, RTCPeerConnection, RTCSessionDescription
from aiortc.exceptions import InternalError, InvalidAccessError, InvalidStateError, OperationError
from aiortc.mediastreams import MediaStreamTrack
from aiortc.sdp import candidate_from_sdp

from rtc_server.errors import CandidateRejected, OfferRejected
from rtc_server.inbound_hold import shorten_audio_hold
from rtc_server.video_encoder import use_avatar_encoder
from signaling.smallwebrtc import IceCandidate

AIORTC_ERRORS = (InternalError, InvalidAccessError, InvalidStateError, OperationError)
# What aiortc raises for an offer or a candidate it cannot use.
REJECTED = (ValueError, LookupError, TypeError, AssertionError, *AIORTC_ERRORS)


async def answer(
    pc: RTCPeerConnection, sdp: str, audio: MediaStreamTrack, video: MediaStreamTrack
) -> str:
    """Apply the remote offer `sdp` to `pc` and return our answer (ICE candidates included).

    On a new peer connection our tracks are added; on a live one (a renegotiation) they are
    already there and new sections are answered `inactive`. Raises OfferRejected.
    """
    try:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
        shorten_audio_hold(pc)  # before any packet: the server does not play it
        senders = {id(s.track) for s in pc.getSenders() if s.track is not None}
        for track in (audio, video):
            if id(track) not in senders:
                pc.addTrack(track)
        for transceiver in pc.getTransceivers():
            ours = transceiver.sender.track in (audio, video)
            if not ours:
                transceiver.direction = "inactive"
            elif transceiver.kind == "video":
                transceiver.direction = "sendonly"
        await pc.setLocalDescription(await pc.createAnswer())
        use_avatar_encoder(pc)  # the codec is chosen; no frame has been encoded yet
    except REJECTED as exc:
        detail = str(exc) or type(exc).__name__
        raise OfferRejected(f"offer rejected: {detail}") from exc
    return str(pc.localDescription.sdp)


def _parse(candidate: IceCandidate) -> RTCIceCandidate | None:
    if candidate.end_of_candidates:
        return None  # RFC 8840: aiortc takes None (Pipecat crashed on "" before 1.7)
    try:
        parsed = candidate_from_sdp(candidate.candidate.split(":", 1)[1])
    except (AssertionError, ValueError, IndexError) as exc:
        raise CandidateRejected(f"not an ICE candidate: {candidate.candidate[:80]!r}") from exc
    parsed.sdpMid = candidate.sdp_mid
    parsed.sdpMLineIndex = candidate.sdp_mline_index
    return parsed


async def add_candidates(pc: RTCPeerConnection, candidates: Sequence[IceCandidate]) -> None:
    """Hand trickled candidates to `pc` (all are parsed first: one bad one adds none).
    Raises CandidateRejected."""
    parsed = [_parse(c) for c in candidates]
    try:
        for candidate in parsed:
            await pc.addIceCandidate(candidate)
    except REJECTED as exc:
        raise CandidateRejected(f"candidate rejected: {exc or type(exc).__name__}") from exc
