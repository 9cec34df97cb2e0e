"""Write rendered frames and speech to an mp4 file (H.264 video + AAC audio) with PyAV.

Contract: `write_mp4(path, frames, fps, audio, sample_rate)` encodes RGB uint8 frames
[H, W, 3] (H, W even) at `fps` with libx264 (yuv420p, CRF 20) and, when given, mono int16 audio
with FFmpeg's native AAC encoder; both streams start at time 0, so sample n and frame k line up
at n / sample_rate = k / fps. Returns the number of video frames written.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from media.errors import InvalidMediaError

AUDIO_CHUNK = 1024  # samples per audio frame handed to the encoder (AAC's frame size)


def write_mp4(path: str | Path, frames: Iterable[np.ndarray], fps: int,
              audio: np.ndarray | None = None, sample_rate: int = 48000) -> int:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with av.open(str(out), mode="w") as container:
        video = container.add_stream("libx264", rate=Fraction(fps))
        video.pix_fmt = "yuv420p"
        video.options = {"crf": "20", "preset": "veryfast"}
        sound = None
        if audio is not None:
            sound = container.add_stream("aac", rate=sample_rate)
            sound.layout = "mono"
        for frame in frames:
            if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
                raise InvalidMediaError(f"frames must be uint8 [H, W, 3], got {frame.shape}")
            if count == 0:
                video.width, video.height = frame.shape[1], frame.shape[0]
            vf = av.VideoFrame.from_ndarray(frame, format="rgb24")
            vf.pts = count
            vf.time_base = Fraction(1, fps)
            container.mux(video.encode(vf))
            count += 1
        container.mux(video.encode(None))
        if sound is not None and audio is not None:
            pcm = np.asarray(audio, dtype=np.int16).reshape(-1)
            for start in range(0, len(pcm), AUDIO_CHUNK):
                chunk = pcm[start : start + AUDIO_CHUNK]
                af = av.AudioFrame.from_ndarray(chunk[None, :], format="s16", layout="mono")
                af.sample_rate = sample_rate
                af.pts = start
                af.time_base = Fraction(1, sample_rate)
                container.mux(sound.encode(af))
            container.mux(sound.encode(None))
    return count
