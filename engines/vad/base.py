"""Voice activity detection and endpointing contracts.

Audio in is 16 kHz mono int16 (NumPy), the format `media` hands to listeners.
An `Endpointer` is one per stream (it holds state); a detector may be shared only if stateless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


class VoiceActivityDetector(Protocol):
    """Per-frame speech/non-speech decision on 10, 20 or 30 ms frames of 16 kHz int16."""

    def is_speech(self, frame: np.ndarray) -> bool: ...


@dataclass(frozen=True)
class SpeechStarted:
    """Speech confirmed. `audio` is the pre-roll plus the voiced frames that confirmed it,
    so a listener that appends every later frame holds the utterance from its onset."""

    t: float  # stream time (s) of the onset, counted from the first pushed sample
    audio: np.ndarray


@dataclass(frozen=True)
class SpeechEnded:
    """Speech over: enough trailing silence (`forced=False`) or max length hit (`forced=True`)."""

    t: float  # stream time (s) of the last voiced frame's end
    forced: bool


VadEvent = SpeechStarted | SpeechEnded
