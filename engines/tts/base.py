"""Text-to-speech contract: text chunk -> PCM with phoneme timings.

Timings drive the face model's training targets and the viseme checks; PCM is int16 mono at the
voice's own rate (the media edge resamples to 48 kHz). `synthesize` raises InvalidInputError
for a text that is not a `str` and yields nothing for one without speech (`has_speech`, the
check every voice runs first). `join_speech` joins a TTS's sentences into one `Speech`;
`resample_speech` brings one to another rate with its timings.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from engines.pcm import resample
from engines.tts.errors import InvalidInputError


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


def has_speech(text: str) -> bool:
    """Whether a voice has anything to say for `text`; InvalidInputError if it is no `str`."""
    if not isinstance(text, str):
        raise InvalidInputError(f"text must be str, got {type(text).__name__}")
    return bool(text.strip())


def join_speech(parts: Sequence[Speech], text: str | None = None) -> Speech:
    """One Speech from consecutive parts (a TTS yields one per sentence): PCM joined, each
    part's phoneme times shifted by the audio before it."""
    if not parts:
        raise ValueError("no speech to join")
    rate = parts[0].sample_rate
    if any(p.sample_rate != rate for p in parts):
        raise ValueError("speech parts at different sample rates")
    phonemes: list[PhonemeTiming] = []
    offset = 0
    for part in parts:
        shift = 1000.0 * offset / rate
        phonemes.extend(
            PhonemeTiming(p.phoneme, p.start_ms + shift, p.dur_ms) for p in part.phonemes
        )
        offset += len(part.pcm)
    pcm = np.concatenate([p.pcm for p in parts]).astype(np.int16, copy=False)
    joined = text if text is not None else " ".join(p.text for p in parts)
    return Speech(pcm=pcm, sample_rate=rate, phonemes=tuple(phonemes), text=joined)


def resample_speech(speech: Speech, sample_rate: int) -> Speech:
    """`speech` at `sample_rate` (`engines.pcm.resample`), its phoneme times scaled by the
    change in length, so they still end with the audio (soxr's length is off by a sample or
    so)."""
    if speech.sample_rate == sample_rate:
        return speech
    pcm = resample(speech.pcm, speech.sample_rate, sample_rate).astype(np.int16, copy=False)
    before = len(speech.pcm) / speech.sample_rate
    k = (len(pcm) / sample_rate) / before if before else 1.0
    phonemes = tuple(
        PhonemeTiming(p.phoneme, p.start_ms * k, p.dur_ms * k) for p in speech.phonemes
    )
    return Speech(pcm=pcm, sample_rate=sample_rate, phonemes=phonemes, text=speech.text)


class TTS(Protocol):
    sample_rate: int

    def synthesize(self, text: str) -> Iterator[Speech]: ...
