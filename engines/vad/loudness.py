"""How loud this user speaks, learnt over the session: an interruption must sound like them.

A voice activity detector says whether a frame holds speech, not whose: a television or a
conversation across the room is speech too, and talked over every answer it heard. What tells
them apart at the microphone is level. The user speaks at about the same level from turn to
turn (a browser's automatic gain control sees to much of it), while background speech arrives
well below it. So the speech that may interrupt an answer must reach within `margin_db` of
this user's level, learnt from the turns that were answered; until one was, any speech may.

The level of an utterance is its loudest `WINDOW` frames (60 ms, a syllable's nucleus; a click
is diluted) of voiced audio, in dBFS. A peak, not an average, because the decision is taken
on an utterance's first fifth of a second and re-taken as it goes on: the loudest part so far
can only grow toward the whole utterance's, never pass it, so a quiet sound never looks louder
than it is, while a user whose first syllable is soft (measured: up to 11 dB under the peak
of the sentence) interrupts a few syllables later. The user's level is the median of their
last `MEMORY` answered utterances (one shouted turn does not lock out their normal voice).
One `SpeakerLevel` per session (it holds that user's record); `UtteranceLevel` per utterance.
"""

from __future__ import annotations

import math
import statistics
from collections import deque

import numpy as np

WINDOW = 3  # frames: the span of the loudest stretch
MEMORY = 5  # answered utterances whose level counts
FRAME = 320  # 20 ms at 16 kHz: the unit the level is measured in


class UtteranceLevel:
    """The level of one utterance so far, frame by voiced frame."""

    def __init__(self) -> None:
        self._recent: deque[float] = deque(maxlen=WINDOW)  # the last frames' mean power
        self._peak = 0.0

    def add(self, pcm: np.ndarray) -> None:
        """Voiced 16 kHz int16 audio (any length; cut into 20 ms frames, a short rest kept
        as a frame of its own when it is at least half of one)."""
        for start in range(0, len(pcm), FRAME):
            frame = pcm[start : start + FRAME]
            if len(frame) * 2 >= FRAME:
                x = frame.astype(np.float64) / 32768.0
                self._recent.append(float(np.dot(x, x)) / len(x))
                self._peak = max(self._peak, sum(self._recent) / len(self._recent))

    @property
    def db(self) -> float | None:
        """dBFS of the loudest stretch so far (None: nothing voiced yet)."""
        if not self._recent:
            return None
        return 10.0 * math.log10(max(self._peak, 1e-10))


class SpeakerLevel:
    """One user's speech level, and whether a sound reaches it."""

    def __init__(self, margin_db: float) -> None:
        if margin_db <= 0:
            raise ValueError("the level margin must be > 0 dB")
        self.margin_db = margin_db
        self._levels: deque[float] = deque(maxlen=MEMORY)

    def heard(self, level_db: float | None) -> None:
        """An utterance of this user's was answered; its level (None: unknown, ignored)."""
        if level_db is not None:
            self._levels.append(level_db)

    @property
    def db(self) -> float | None:
        """The user's level (None: no answered utterance yet)."""
        return statistics.median(self._levels) if self._levels else None

    def below(self, level_db: float | None) -> float | None:
        """How far `level_db` falls short of the user's level less the margin, in dB; None
        when it does not (or either level is still unknown): then it may be the user."""
        user = self.db
        if user is None or level_db is None:
            return None
        short = user - self.margin_db - level_db
        return short if short > 0 else None
