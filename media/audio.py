"""The wire's audio formats: inbound frames -> 16 kHz mono int16 20 ms frames; any PCM -> 48 kHz.

Everything that crosses the wire is converted here, with libraries (PyAV's libswresample
inbound, soxr outbound); the rest of the house sees only these two formats. The other edge of
the resampling contract is a model's own input rate, which engines reach through
`engines.pcm.resample` (see there); the two sides never import each other.
"""

from __future__ import annotations

import av
import numpy as np
import soxr

from media.errors import InvalidMediaError

LISTEN_RATE = 16000
LISTEN_FRAME_SAMPLES = 320  # 20 ms at 16 kHz
OUT_RATE = 48000
OUT_FRAME_SAMPLES = 960  # 20 ms at 48 kHz


class InboundAudio:
    """Turns decoded inbound `av.AudioFrame`s (any rate/layout) into 20 ms 16 kHz mono int16.

    A peer may change rate or channel layout mid-stream (a renegotiated codec, a switched
    microphone); libswresample's resampler is fixed to the first frame's format, so a change
    flushes the old resampler and starts a new one.
    """

    def __init__(self) -> None:
        self._resampler = self._new_resampler()
        self._input: tuple[int, str, str] | None = None  # rate, layout, format of the input

    @staticmethod
    def _new_resampler() -> av.AudioResampler:
        return av.AudioResampler(
            format="s16", layout="mono", rate=LISTEN_RATE, frame_size=LISTEN_FRAME_SAMPLES
        )

    def convert(self, frame: av.AudioFrame) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        key = (frame.sample_rate, frame.layout.name, frame.format.name)
        if self._input is not None and key != self._input:
            out.extend(self._run(None))
            self._resampler = self._new_resampler()
        self._input = key
        out.extend(self._run(frame))
        return out

    def _run(self, frame: av.AudioFrame | None) -> list[np.ndarray]:
        return [
            resampled.to_ndarray().reshape(-1).astype(np.int16, copy=False)
            for resampled in self._resampler.resample(frame)
        ]


def as_mono_int16(pcm: np.ndarray) -> np.ndarray:
    """Accept int16 or float ([-1, 1]) PCM, 1-D or (samples, channels); return 1-D int16."""
    arr = np.asarray(pcm)
    if arr.ndim == 2:
        arr = arr.mean(axis=1) if arr.dtype.kind == "f" else arr.astype(np.int32).mean(axis=1)
    elif arr.ndim != 1:
        raise InvalidMediaError(f"PCM must be 1-D or (samples, channels), got shape {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise InvalidMediaError("PCM contains NaN or infinity")
        return (np.clip(arr, -1.0, 1.0) * 32767.0).astype(np.int16)
    if arr.dtype.kind in "iu":
        return np.clip(arr, -32768, 32767).astype(np.int16)
    raise InvalidMediaError(f"PCM dtype {arr.dtype} is neither integer nor float")


def to_out_rate(pcm: np.ndarray, sample_rate: int) -> np.ndarray:
    """Resample any mono/stereo PCM to 48 kHz mono int16 (soxr, high quality)."""
    if not isinstance(sample_rate, int) or not 8000 <= sample_rate <= 192000:
        raise InvalidMediaError(f"unsupported sample rate {sample_rate!r}")
    mono = as_mono_int16(pcm)
    if sample_rate == OUT_RATE or len(mono) == 0:
        return mono
    return np.asarray(soxr.resample(mono, sample_rate, OUT_RATE), dtype=np.int16)
