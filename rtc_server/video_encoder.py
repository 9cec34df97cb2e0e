"""VP8 settings for a rendered face: aiortc's encoder without the camera's denoiser.

aiortc encodes VP8 for a camera: a temporal denoiser (`noise-sensitivity` 4) and `cpu-used`
-6. The avatar's frames are rendered from one still portrait and have no sensor noise to
remove, and the server encodes one stream per session on the same cores that render, speak
and listen (encoding was a worker's largest single cost in a 32-session profile on the H200).
Without the denoiser and at `cpu-used` -12 a 512x512 avatar frame encodes in ~1.7-1.9 ms
instead of ~2.6-3.3 at the same rate control (2026-12-02, bench/video_encode.py, in git
history at bcae859; bench/face.py times this encoder, bench/RESULTS.md section face).
Everything else (rate control, key frames on request, bitrate from REMB, packetization) stays
aiortc's.

aiortc has no option for it, so `use_avatar_encoder(pc)` puts this encoder in the video
sender's slot after the answer (the sender creates its own only for the first frame, and
only when the slot is empty). The slot is a private attribute: when an aiortc release renames
it, this logs a warning and the session keeps aiortc's encoder (tests/test_video_encoder.py
fails on such a release).
"""

from __future__ import annotations

import logging
import os

import av
from aiortc import RTCPeerConnection, RTCRtpSender
from aiortc.codecs.vpx import Vp8Encoder, number_of_threads
from av.frame import Frame

logger = logging.getLogger(__name__)

_SLOT = "_RTCRtpSender__encoder"
CPU_USED = -12  # libvpx realtime speed (-16 fastest); -6 is aiortc's camera setting
NOISE_SENSITIVITY = 0  # no temporal denoiser: a rendered frame has no sensor noise


class AvatarVp8Encoder(Vp8Encoder):
    """aiortc's Vp8Encoder, opening its codec with the avatar's speed settings."""

    def __init__(self) -> None:
        super().__init__()
        self.options: dict[str, str] = {}  # what the codec was last opened with

    def encode(self, frame: Frame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        assert isinstance(frame, av.VideoFrame)
        codec = self.codec
        bitrate = self.target_bitrate
        # aiortc's own test: the codec is reopened on a new size or a bitrate change of
        # over 10%. Opening it here first means aiortc's encode finds it current.
        if (codec is None or not codec.bit_rate or frame.width != codec.width
                or frame.height != codec.height
                or abs(bitrate - codec.bit_rate) / codec.bit_rate > 0.1):
            self.codec = self._open(frame.width, frame.height, bitrate)
        return super().encode(frame, force_keyframe)

    def _open(self, width: int, height: int, bitrate: int) -> av.VideoCodecContext:
        codec = av.CodecContext.create("libvpx", "w")
        assert isinstance(codec, av.VideoCodecContext)
        codec.width, codec.height = width, height
        codec.bit_rate = bitrate
        codec.pix_fmt = "yuv420p"
        codec.gop_size = 3000  # key frames when the receiver asks (PLI), as aiortc's
        codec.qmin, codec.qmax = 2, 56
        self.options = {
            "bufsize": str(bitrate),  # rc_buf_sz 1000 ms, as aiortc's
            "cpu-used": str(CPU_USED),
            "deadline": "realtime",
            "lag-in-frames": "0",
            "minrate": str(bitrate),
            "maxrate": str(bitrate),
            "noise-sensitivity": str(NOISE_SENSITIVITY),
            "overshoot-pct": "15",
            "partitions": "0",
            "static-thresh": "1",
            "undershoot-pct": "100",
        }
        codec.options = dict(self.options)  # the codec consumes the dict it is given
        codec.thread_count = number_of_threads(width * height, os.cpu_count() or 1)
        return codec


def use_avatar_encoder(pc: RTCPeerConnection) -> int:
    """Give each VP8 video sender of `pc` the avatar's encoder; returns how many it changed.

    Call after the local description is set (the codec is chosen) and before media flows;
    a sender with an encoder already (a renegotiation) is left alone."""
    changed = 0
    for transceiver in pc.getTransceivers():
        if transceiver.kind != "video" or transceiver.sender.track is None:
            continue
        codecs = getattr(transceiver, "_codecs", None)
        if codecs is None:
            logger.warning("aiortc's negotiated codecs not found; keeping its VP8 settings")
            continue
        if not codecs or codecs[0].mimeType.lower() != "video/vp8":
            continue  # H.264 or nothing negotiated: aiortc's own encoder
        sender: RTCRtpSender = transceiver.sender
        if not hasattr(sender, _SLOT):
            logger.warning("aiortc's video encoder slot not found; keeping its VP8 settings")
            continue
        if getattr(sender, _SLOT) is not None:
            continue
        setattr(sender, _SLOT, AvatarVp8Encoder())
        changed += 1
    return changed
