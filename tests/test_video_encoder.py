"""The sessions' VP8 senders encode with the avatar's settings (rtc_server/video_encoder)."""

from __future__ import annotations

import asyncio
import fractions

import av
import numpy as np
from aiortc import RTCPeerConnection, RTCRtpSender
from aiortc.codecs.vpx import Vp8Decoder, Vp8Encoder, vp8_depayload
from aiortc.jitterbuffer import JitterFrame
from aiortc.mediastreams import AudioStreamTrack, VideoStreamTrack

from engines.portrait import detect_portrait_landmarks
from media.avatar import AvatarRenderer
from media.idle import default_portrait
from media.tracks import i420
from rtc_server.negotiation import answer
from rtc_server.video_encoder import CPU_USED, AvatarVp8Encoder, use_avatar_encoder

SLOT = "_RTCRtpSender__encoder"


async def _answered(video_codec: str | None) -> tuple[RTCPeerConnection, RTCPeerConnection]:
    client, server = RTCPeerConnection(), RTCPeerConnection()
    client.addTransceiver("audio", direction="sendrecv")
    video = client.addTransceiver("video", direction="recvonly")
    if video_codec is not None:
        capabilities = RTCRtpSender.getCapabilities("video").codecs
        video.setCodecPreferences([c for c in capabilities if c.mimeType == video_codec])
    offer = await client.createOffer()
    await answer(server, offer.sdp, AudioStreamTrack(), VideoStreamTrack())
    return client, server


def _video_encoder(server: RTCPeerConnection) -> object:
    sender = next(t.sender for t in server.getTransceivers() if t.kind == "video")
    # If aiortc renames the slot, this raises: re-check the module's assumption.
    return getattr(sender, SLOT)


def test_a_vp8_answer_gets_the_avatar_encoder_and_h264_keeps_aiortcs() -> None:
    async def run() -> tuple[object, object, int]:
        client, server = await _answered(None)  # aiortc offers VP8 first
        h264_client, h264_server = await _answered("video/H264")
        try:
            again = use_avatar_encoder(server)  # a renegotiation leaves it alone
            return _video_encoder(server), _video_encoder(h264_server), again
        finally:
            for pc in (client, server, h264_client, h264_server):
                await pc.close()

    vp8, h264, again = asyncio.run(run())
    assert isinstance(vp8, AvatarVp8Encoder)
    assert h264 is None  # aiortc creates its H.264 encoder at the first frame
    assert again == 0


def _frames(count: int) -> list[av.VideoFrame]:
    image = default_portrait()
    avatar = AvatarRenderer(image, detect_portrait_landmarks(image), 256, 256).session(25)
    frames = []
    for i in range(count):
        offsets = np.zeros((68, 2))
        offsets[48:68, 1] = 0.04 * np.sin(i / 2.0)
        frame = av.VideoFrame.from_ndarray(i420(avatar.frame(i, offsets)), format="yuv420p")
        frame.pts, frame.time_base = i * 3600, fractions.Fraction(1, 90000)
        frames.append(frame)
    return frames


def _round_trip(encoder: Vp8Encoder, frames: list[av.VideoFrame],
                sent: list[bytes] | None = None) -> list[np.ndarray]:
    decoder = Vp8Decoder()
    out = []
    for i, frame in enumerate(frames):
        payloads, timestamp = encoder.encode(frame, force_keyframe=i == 0)
        data = b"".join(vp8_depayload(p) for p in payloads)
        if sent is not None:
            sent.append(data)
        for decoded in decoder.decode(JitterFrame(data=data, timestamp=timestamp)):
            assert isinstance(decoded, av.VideoFrame)
            out.append(decoded.to_ndarray(format="gray").astype(np.int16))
    return out


def test_the_avatar_encoder_decodes_like_aiortcs_and_keeps_its_settings_on_reopen() -> None:
    frames = _frames(12)
    ours = AvatarVp8Encoder()
    ours_sent: list[bytes] = []
    aiortcs_sent: list[bytes] = []
    decoded = _round_trip(ours, frames, ours_sent)
    reference = _round_trip(Vp8Encoder(), frames, aiortcs_sent)
    assert len(decoded) == len(reference) == len(frames)
    assert ours_sent != aiortcs_sent  # the settings took effect: another bitstream
    sources = [f.to_ndarray(format="gray").astype(np.int16) for f in frames]
    for got, ref, src in zip(decoded, reference, sources, strict=True):
        # the same picture as aiortc's settings give, within the codec's loss
        assert np.mean(np.abs(got - src)) < 1.5 * np.mean(np.abs(ref - src)) + 1.0
    assert ours.codec is not None
    assert ours.options["noise-sensitivity"] == "0"
    assert ours.options["cpu-used"] == str(CPU_USED)
    # a REMB-driven bitrate change of over 10% reopens the codec: still ours
    assert ours.codec.bit_rate is not None
    ours.target_bitrate = 2 * ours.codec.bit_rate
    first = ours.codec
    _round_trip(ours, frames[:2])
    assert ours.codec is not first
    assert ours.codec.bit_rate == ours.target_bitrate
    assert ours.options["maxrate"] == str(ours.target_bitrate)
