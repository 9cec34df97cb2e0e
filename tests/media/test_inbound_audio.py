"""Inbound audio conversion when the peer changes its sample rate or layout mid-stream.

Regression: libswresample's resampler is fixed to the first frame's format, so a frame at
another rate raised "Frame does not match AudioResampler setup" in the session's inbound loop,
which then stopped listening for the rest of the session.
"""

from __future__ import annotations

import av
import numpy as np

from media.audio import LISTEN_FRAME_SAMPLES, LISTEN_RATE, InboundAudio


def tone_frames(rate: int, layout: str, seconds: float, hz: float = 440.0) -> list[av.AudioFrame]:
    channels = 2 if layout == "stereo" else 1
    per_frame = rate // 50  # 20 ms
    t = np.arange(int(rate * seconds)) / rate
    pcm = (np.sin(2 * np.pi * hz * t) * 8000).astype(np.int16)
    frames = []
    for i in range(0, pcm.shape[0] - per_frame + 1, per_frame):
        chunk = np.repeat(pcm[i : i + per_frame], channels)[None, :]
        frame = av.AudioFrame.from_ndarray(chunk, format="s16", layout=layout)
        frame.sample_rate = rate
        frames.append(frame)
    return frames


def test_rate_and_layout_changes_mid_stream_keep_converting() -> None:
    inbound = InboundAudio()
    out: list[np.ndarray] = []
    for rate, layout in ((48000, "stereo"), (16000, "mono"), (8000, "mono"), (44100, "stereo")):
        for frame in tone_frames(rate, layout, 1.0):
            out.extend(inbound.convert(frame))
    total = sum(o.shape[0] for o in out)
    assert abs(total - 4 * LISTEN_RATE) <= 4 * LISTEN_FRAME_SAMPLES  # no audio lost or made up
    assert all(o.dtype == np.int16 and o.ndim == 1 for o in out)
    # the tone is still there after the last change (not silence, not noise)
    tail = np.concatenate(out)[-LISTEN_RATE // 2 :].astype(np.float64)
    spectrum = np.abs(np.fft.rfft(tail))
    assert abs(np.argmax(spectrum) * LISTEN_RATE / tail.shape[0] - 440.0) < 5.0
