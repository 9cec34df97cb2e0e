"""Noise-floor gate: a frame is speech only if it is also `margin_db` above the noise floor.

webrtcvad calls steady broadband noise louder than about -25 dBFS speech in every frame (measured
on white and pink noise, all four modes), which would hold an utterance open until its forced
end. The gate tracks the noise floor as the quietest frame energy of the last few seconds
(minimum statistics: speech always has quieter frames between syllables, steady noise never
drops below itself) and vetoes frames that do not rise above it. Costs one dot product a frame.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from engines.vad.base import VoiceActivityDetector
from engines.vad.webrtc import check_pcm16

_FLOOR_WINDOW_S = 3.0  # longer than a spoken phrase without any low-energy frame
_SILENT_DB = -100.0  # energy assigned to digital silence


def frame_dbfs(frame: np.ndarray) -> float:
    x = frame.astype(np.float32) / 32768.0
    power = float(np.dot(x, x)) / max(x.shape[0], 1)
    return 10.0 * np.log10(power) if power > 1e-10 else _SILENT_DB


class NoiseFloorGate:
    """Wraps a detector; vetoes its speech decisions on frames near the noise floor."""

    def __init__(self, primary: VoiceActivityDetector, margin_db: float = 6.0) -> None:
        self._primary = primary
        self._margin_db = margin_db
        # Monotonic deque of (frame index, energy): running minimum over the window in O(1).
        self._mins: deque[tuple[int, float]] = deque()
        self._index = 0
        self._window_ms = _FLOOR_WINDOW_S * 1000.0
        self.floor_db = _SILENT_DB

    def is_speech(self, frame: np.ndarray) -> bool:
        frame = check_pcm16(frame)
        energy = frame_dbfs(frame)
        frames_in_window = max(1, int(self._window_ms / (frame.shape[0] / 16.0)))
        self._index += 1
        while self._mins and self._mins[-1][1] >= energy:
            self._mins.pop()
        self._mins.append((self._index, energy))
        while self._mins[0][0] <= self._index - frames_in_window:
            self._mins.popleft()
        self.floor_db = self._mins[0][1]
        # Always ask the primary detector: webrtcvad adapts to what it hears.
        voiced = self._primary.is_speech(frame)
        return voiced and energy >= self.floor_db + self._margin_db
