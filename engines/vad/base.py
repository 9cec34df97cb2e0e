"""Voice activity detection and endpointing contracts.

Audio in is 16 kHz mono int16 (NumPy), the format `media` hands to listeners.
An `Endpointer` is one per stream (it holds state); a detector may be shared only if stateless.
The endpointer is the one place that decides where speech starts, pauses, resumes and ends;
its events are these four frozen dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

EndReason = Literal["complete", "silence", "max_length"]


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
class SpeechPaused:
    """`pause_ms` of silence inside an utterance: decode ahead now, and (with a turn model)
    ask it about `audio`, then pass the answer to `Endpointer.verdict(pause_id, ...)`."""

    t: float  # stream time (s) of the last voiced frame's end
    pause_id: int  # names this pause in `verdict`; increases through the stream
    audio: np.ndarray  # the utterance up to now (pre-roll included), at most the last 8 s


@dataclass(frozen=True)
class SpeechResumed:
    """Speech again after a reported pause: the pause's verdict, if it comes, is dropped.
    `audio` runs from the resumed speech's onset (the frames that confirmed it) through the
    end of the push, so a listener that fed nothing during the pause loses no syllable."""

    t: float  # stream time (s) at the end of the frame that resumed
    audio: np.ndarray
    silence_ms: float = 0.0  # the silence it ended (the speaker's pause inside the turn)


@dataclass(frozen=True)
class SpeechEnded:
    """End of the utterance: the turn model said complete, the silence limit passed, or the
    utterance reached its maximum length."""

    t: float  # stream time (s) of the last voiced frame's end (of now for "max_length")
    reason: EndReason = "silence"

    @property
    def forced(self) -> bool:
        """Cut at the maximum length while the user may still be talking."""
        return self.reason == "max_length"


VadEvent = SpeechStarted | SpeechPaused | SpeechResumed | SpeechEnded
