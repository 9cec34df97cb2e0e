"""Text-to-speech contract: text chunk -> PCM with phoneme timings.

Timings drive the face model's training targets and the viseme checks; PCM is int16 mono at the
voice's own rate (the media edge resamples to 48 kHz). `synthesize` raises InvalidInputError
for a text that is not a `str` and yields nothing for one without speech (`has_speech`, the
check every voice runs first). `join_speech` joins a TTS's sentences into one `Speech`;
`resample_speech` brings one to another rate with its timings; `trim_silence` cuts the quiet a
voice puts before and after an utterance down to what the next one should hear.
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


QUIET_FLOOR = 20  # frame RMS (int16) under which a voice's output is silence (~ -64 dBFS)


def trim_silence(speech: Speech, *, lead_ms: float, trail_ms: float | None) -> Speech:
    """`speech` with the quiet before its first sound cut to `lead_ms` and the quiet after its
    last sound to `trail_ms` (None: kept), judged on 10 ms frames; phoneme times follow.

    Why: a voice treats every chunk it is given as a whole utterance, so it opens with up to ~60
    ms of silence (pure delay before an answer's first word) and closes with 130-260 ms (a
    sentence's final pause, also where the agent's chunker cut in mid-clause). All-quiet
    speech is returned unchanged.
    """
    pcm, rate = speech.pcm, speech.sample_rate
    frame = max(rate // 100, 1)
    n = len(pcm) // frame
    if n == 0:
        return speech
    frames = pcm[: n * frame].astype(np.float32).reshape(n, frame)
    loud = np.flatnonzero(np.sqrt(np.mean(frames * frames, axis=1)) > QUIET_FLOOR)
    if not len(loud):
        return speech
    start = max(0, int(loud[0]) * frame - round(lead_ms * rate / 1000))
    end = len(pcm)
    if trail_ms is not None:
        end = min(end, (int(loud[-1]) + 1) * frame + round(trail_ms * rate / 1000))
    if start == 0 and end == len(pcm):
        return speech
    shift, total = 1000.0 * start / rate, 1000.0 * (end - start) / rate
    phonemes: list[PhonemeTiming] = []
    for p in speech.phonemes:
        begin, stop = max(p.start_ms - shift, 0.0), min(p.end_ms - shift, total)
        if stop > begin:
            phonemes.append(PhonemeTiming(p.phoneme, begin, stop - begin))
    if phonemes:  # contiguous to the new ends, as every voice reports them
        first = phonemes[0]
        phonemes[0] = PhonemeTiming(first.phoneme, 0.0, first.end_ms)
        last = phonemes[-1]
        phonemes[-1] = PhonemeTiming(last.phoneme, last.start_ms, total - last.start_ms)
    return Speech(pcm=pcm[start:end], sample_rate=rate, phonemes=tuple(phonemes), text=speech.text)


class TTS(Protocol):
    sample_rate: int

    def synthesize(self, text: str) -> Iterator[Speech]: ...
