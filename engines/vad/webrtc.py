"""webrtcvad detector: `is_speech(frame)` on 10/20/30 ms frames of 16 kHz mono int16.

A `webrtcvad.Vad` adapts to the noise it hears, so each stream gets its own instance (creating
one costs microseconds); deciding one 20 ms frame costs a few microseconds.
"""

from __future__ import annotations

import numpy as np

from engines.pcm import check_pcm16 as pcm16
from engines.vad.config import SAMPLE_RATE
from engines.vad.errors import InvalidInputError, VadModelLoadError

_VALID_SAMPLES = frozenset(SAMPLE_RATE * ms // 1000 for ms in (10, 20, 30))


def check_pcm16(frame: np.ndarray) -> np.ndarray:
    """Return `frame` as a 1-D contiguous int16 array or raise InvalidInputError."""
    return pcm16(frame, InvalidInputError)


class WebRtcVad:
    """The WebRTC GMM voice detector (package `webrtcvad-wheels`), one per stream."""

    def __init__(self, aggressiveness: int = 2) -> None:
        try:
            import webrtcvad
        except ImportError as exc:  # pragma: no cover - dependency of the base install
            raise VadModelLoadError("webrtcvad is missing: pip install webrtcvad-wheels") from exc
        self._vad = webrtcvad.Vad(aggressiveness)

    def is_speech(self, frame: np.ndarray) -> bool:
        frame = check_pcm16(frame)
        if frame.shape[0] not in _VALID_SAMPLES:
            raise InvalidInputError(
                f"webrtcvad takes 10, 20 or 30 ms frames at 16 kHz, got {frame.shape[0]} samples"
            )
        return bool(self._vad.is_speech(frame.tobytes(), SAMPLE_RATE))
