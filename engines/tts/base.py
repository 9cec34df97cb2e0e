"""Text-to-speech contract: text chunk -> PCM with phoneme timings.

Timings drive the face model's training targets and the viseme checks; PCM is int16 mono at the
voice's own rate (the media edge resamples to 48 kHz).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class PhonemeTiming:
    phoneme: str  # IPA symbol as the voice reports it
    start_ms: float
    dur_ms: float

    @property
    def end_ms(self) -> float:
        return self.start_ms + self.dur_ms


@dataclass(frozen=True)
class Speech:
    pcm: np.ndarray  # int16 mono
    sample_rate: int
    phonemes: tuple[PhonemeTiming, ...]  # monotonic, relative to the start of `pcm`
    text: str

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / self.sample_rate


class TTS(Protocol):
    sample_rate: int

    def synthesize(self, text: str) -> Iterator[Speech]: ...
