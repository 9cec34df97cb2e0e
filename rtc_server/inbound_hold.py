"""The microphone's hold in aiortc's receiver: 80 ms cut to one frame.

aiortc gives every audio receiver `JitterBuffer(capacity=16, prefetch=4)`: a 20 ms Opus frame
leaves the buffer only once four later frames have arrived, a playout cushion for a listener
who plays the audio. The server does not play it: it feeds a VAD, the turn model and the ASR,
which count samples, not arrival times, so the cushion is only 60 ms of delay on every turn
(measured with `bench/voice_to_voice.py`: the server saw the end of the voice ~105 ms after
the client sent it, ~45 ms with one frame of hold). A frame still waits for the next packet
(that is when the buffer knows it is whole), and reordered or late packets are put back in
order exactly as before: the buffer releases frames by sequence number whatever its prefetch.

aiortc has no option for it, so `shorten_audio_hold(pc)` swaps the buffer of each audio
receiver after `setRemoteDescription` and before any packet arrives. The buffer is a private
attribute: when an aiortc release renames it, this logs a warning and the session keeps
aiortc's default (tests/test_inbound_hold.py fails on such a release).
"""

from __future__ import annotations

import logging

from aiortc import RTCPeerConnection, RTCRtpReceiver
from aiortc.jitterbuffer import JitterBuffer

logger = logging.getLogger(__name__)

AUDIO_CAPACITY = 16  # packets, as aiortc's own (a power of two)
AUDIO_PREFETCH = 1  # whole frames held before the oldest is released
_ATTRIBUTE = "_RTCRtpReceiver__jitter_buffer"


def audio_hold_frames(receiver: RTCRtpReceiver) -> int | None:
    """The prefetch of an audio receiver's jitter buffer (None: not found)."""
    buffer = getattr(receiver, _ATTRIBUTE, None)
    return getattr(buffer, "_prefetch", None) if isinstance(buffer, JitterBuffer) else None


def shorten_audio_hold(pc: RTCPeerConnection) -> int:
    """Give each audio receiver of `pc` a one-frame hold; returns how many it changed
    (receivers that have it already are left alone, with the packets they hold)."""
    changed = 0
    for transceiver in pc.getTransceivers():
        if transceiver.kind != "audio":
            continue
        receiver = transceiver.receiver
        hold = audio_hold_frames(receiver)
        if hold is None:
            logger.warning("aiortc's audio jitter buffer not found; keeping its 80 ms hold")
            continue
        if hold == AUDIO_PREFETCH:
            continue  # done at an earlier offer (a renegotiation): keep what it holds
        setattr(receiver, _ATTRIBUTE, JitterBuffer(capacity=AUDIO_CAPACITY,
                                                   prefetch=AUDIO_PREFETCH))
        changed += 1
    return changed
