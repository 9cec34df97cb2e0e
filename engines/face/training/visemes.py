"""Phoneme timings -> articulation trajectories (the synthetic training targets).

Contract: `trajectory(phonemes, n_frames, fps)` -> float32 [n_frames, 5] articulation parameters
(see `common.face_geometry.PARAMS`) sampled at t = k / fps; `brow_from_audio(pcm, rate,
n_frames)` adds the emphasis channel from loudness. `common.face_geometry.params_to_offsets`
turns them into landmark offsets.

Viseme table: each IPA letter (as `engines.tts.phonemes` normalises them: one letter plus
modifiers, "_" for silence) maps to target values (open, width, round, jaw) and a dominance per
parameter. Groups follow the usual visual-phoneme classes (Fisher 1968; the MPEG-4 FAP visemes):
bilabials close the lips, labiodentals tuck the lower lip, rounded vowels and /w/ purse, spread
vowels widen, open vowels drop the jaw.

Coarticulation: the Cohen & Massaro (1993) dominance model. Each segment s has a dominance
D_s,p(t) = alpha_s,p * exp(-gap(t) / tau), flat inside the segment and decaying outside it
(tau = 35 ms anticipation, bounded by what the model can hear ahead, 50 ms carry-over,
halved for the short, strong closures of bilabials), and each parameter is the
dominance-weighted mean of the targets, sum_s D_s,p(t) T_s,p / sum_s D_s,p(t). High
dominance (bilabial closure) wins over neighbours; low dominance (/h/, /k/ width and rounding,
schwa) takes the neighbours' shape, which is how "who" is rounded through its /h/.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engines.tts.base import PhonemeTiming

logger = logging.getLogger(__name__)

SILENCE = "_"
# Lips start moving toward a segment this early. Cohen & Massaro fit ~70 ms and more for
# rounding; 35 ms keeps the targets predictable from audio with the model's 72.5 ms look-ahead
# (with 70 ms the held-out correlation stalled at 0.74: the future it asked for was unheard).
TAU_ANTICIPATION_MS = 35.0
TAU_CARRYOVER_MS = 50.0


@dataclass(frozen=True)
class Viseme:
    target: tuple[float, float, float, float]  # open, width, round, jaw (0..1)
    dominance: tuple[float, float, float, float]  # per parameter; 1 = ordinary vowel
    reach: float = 1.0  # scales the decay time constants: < 1 = strong but short influence


_V = Viseme
_VOWEL_D = (1.0, 1.0, 1.0, 1.0)
_CONS_D = (1.0, 0.4, 0.4, 0.8)  # consonants borrow lip shape from the neighbouring vowels
_WEAK_D = (0.25, 0.2, 0.2, 0.25)
_CLOSE_D = (10.0, 0.5, 0.5, 1.5)  # bilabial closure must be reached

# The documented phoneme-to-viseme table (targets: open, width, round, jaw).
VISEMES: dict[str, Viseme] = {
    SILENCE: _V((0.0, 0.0, 0.0, 0.0), (0.8, 0.6, 0.6, 0.8)),
    # bilabials: lips closed
    "p": _V((0.0, 0.0, 0.0, 0.12), _CLOSE_D, 0.5), "b": _V((0.0, 0.0, 0.0, 0.12), _CLOSE_D, 0.5),
    "m": _V((0.0, 0.0, 0.0, 0.10), _CLOSE_D, 0.5),
    # labiodentals: lower lip tucked under the upper teeth
    "f": _V((0.06, 0.15, 0.0, 0.12), (3.0, 0.5, 0.5, 1.0), 0.6),
    "v": _V((0.06, 0.15, 0.0, 0.12), (3.0, 0.5, 0.5, 1.0), 0.6),
    # dentals, alveolars
    "θ": _V((0.2, 0.2, 0.0, 0.18), _CONS_D), "ð": _V((0.2, 0.2, 0.0, 0.18), _CONS_D),
    "t": _V((0.18, 0.2, 0.0, 0.18), _CONS_D), "d": _V((0.18, 0.2, 0.0, 0.18), _CONS_D),
    "n": _V((0.18, 0.2, 0.0, 0.18), _CONS_D), "ɾ": _V((0.22, 0.2, 0.0, 0.2), _CONS_D),
    "s": _V((0.08, 0.4, 0.0, 0.08), (1.5, 0.6, 0.4, 1.5)),
    "z": _V((0.08, 0.4, 0.0, 0.08), (1.5, 0.6, 0.4, 1.5)),
    "l": _V((0.3, 0.2, 0.0, 0.28), _CONS_D),
    "ɹ": _V((0.18, 0.0, 0.5, 0.15), (1.0, 0.6, 0.8, 0.8)),
    "r": _V((0.18, 0.0, 0.5, 0.15), (1.0, 0.6, 0.8, 0.8)),
    # postalveolars: slightly rounded, protruded
    "ʃ": _V((0.14, 0.0, 0.65, 0.12), (1.2, 0.8, 1.5, 1.0)),
    "ʒ": _V((0.14, 0.0, 0.65, 0.12), (1.2, 0.8, 1.5, 1.0)),
    # palatal, velars, glottal: the tongue works, the lips follow the vowels
    "j": _V((0.15, 0.5, 0.0, 0.15), (0.8, 0.8, 0.4, 0.8)),
    "k": _V((0.28, 0.1, 0.0, 0.28), _CONS_D), "g": _V((0.28, 0.1, 0.0, 0.28), _CONS_D),
    "ɡ": _V((0.28, 0.1, 0.0, 0.28), _CONS_D), "ŋ": _V((0.25, 0.1, 0.0, 0.25), _CONS_D),
    "h": _V((0.35, 0.1, 0.0, 0.3), _WEAK_D), "ʔ": _V((0.1, 0.0, 0.0, 0.1), _WEAK_D),
    "x": _V((0.28, 0.1, 0.0, 0.28), _CONS_D),
    # labial-velar approximant: strongly rounded
    "w": _V((0.1, 0.0, 0.95, 0.1), (1.2, 1.0, 2.0, 1.0)),
    # vowels, front (spread) to back (rounded)
    "i": _V((0.28, 0.75, 0.0, 0.2), _VOWEL_D), "ɪ": _V((0.35, 0.55, 0.0, 0.25), _VOWEL_D),
    "ᵻ": _V((0.35, 0.45, 0.0, 0.25), _VOWEL_D), "ɨ": _V((0.35, 0.45, 0.0, 0.25), _VOWEL_D),
    "y": _V((0.25, 0.0, 0.85, 0.2), _VOWEL_D),
    "e": _V((0.5, 0.55, 0.0, 0.4), _VOWEL_D), "ɛ": _V((0.55, 0.45, 0.0, 0.45), _VOWEL_D),
    "æ": _V((0.75, 0.45, 0.0, 0.65), _VOWEL_D),
    "a": _V((0.85, 0.2, 0.0, 0.75), _VOWEL_D), "ɑ": _V((0.9, 0.1, 0.0, 0.8), _VOWEL_D),
    "ɐ": _V((0.55, 0.1, 0.0, 0.45), _VOWEL_D), "ʌ": _V((0.6, 0.1, 0.0, 0.5), _VOWEL_D),
    "ə": _V((0.4, 0.1, 0.0, 0.3), (0.6, 0.4, 0.4, 0.6)),
    "ɚ": _V((0.35, 0.0, 0.4, 0.3), (0.8, 0.6, 0.8, 0.8)),
    "ɜ": _V((0.4, 0.0, 0.3, 0.35), _VOWEL_D), "ɝ": _V((0.35, 0.0, 0.4, 0.3), _VOWEL_D),
    "ɒ": _V((0.8, 0.0, 0.4, 0.7), _VOWEL_D), "ɔ": _V((0.7, 0.0, 0.6, 0.6), _VOWEL_D),
    "o": _V((0.5, 0.0, 0.75, 0.4), _VOWEL_D), "ɵ": _V((0.45, 0.0, 0.6, 0.35), _VOWEL_D),
    "ʊ": _V((0.3, 0.0, 0.6, 0.25), _VOWEL_D), "u": _V((0.2, 0.0, 0.95, 0.15), _VOWEL_D),
    "ɯ": _V((0.25, 0.2, 0.0, 0.2), _VOWEL_D),
}
_UNKNOWN = _V((0.3, 0.1, 0.1, 0.25), _WEAK_D)
_ALIASES = {"ɫ": "l", "ɹ̩": "ɹ", "ɻ": "ɹ", "tʃ": "ʃ", "dʒ": "ʒ", "ç": "h", "ʍ": "w", "ɬ": "l"}
_warned: set[str] = set()


def viseme_for(phoneme: str) -> Viseme:
    """The table entry for one phoneme label (modifiers such as "ː" are ignored)."""
    if phoneme in VISEMES:
        return VISEMES[phoneme]
    if phoneme in _ALIASES:
        return VISEMES[_ALIASES[phoneme]]
    base = phoneme[:1]
    if base in VISEMES:
        return VISEMES[base]
    if base in _ALIASES:
        return VISEMES[_ALIASES[base]]
    if phoneme not in _warned:
        _warned.add(phoneme)
        logger.debug("no viseme for phoneme %r; using a neutral weak target", phoneme)
    return _UNKNOWN


def _merge_silences(phonemes: Sequence[PhonemeTiming]) -> list[PhonemeTiming]:
    """Adjacent silences are one pause (a sentence's trailing "_" and the next one's leading
    "_" meet where TTS chunks are joined); its length decides how firmly the lips close."""
    merged: list[PhonemeTiming] = []
    for p in phonemes:
        if merged and p.phoneme == SILENCE and merged[-1].phoneme == SILENCE:
            last = merged[-1]
            merged[-1] = PhonemeTiming(SILENCE, last.start_ms,
                                       p.start_ms + p.dur_ms - last.start_ms)
        else:
            merged.append(p)
    return merged


def trajectory(phonemes: Sequence[PhonemeTiming], n_frames: int, fps: int = 25) -> np.ndarray:
    """Articulation parameters [n_frames, 5] (brow = 0) at t = k / fps from phoneme timings."""
    out = np.zeros((n_frames, 5), dtype=np.float32)
    if n_frames == 0 or not phonemes:
        return out
    phonemes = _merge_silences(phonemes)
    t = np.arange(n_frames, dtype=np.float64) * (1000.0 / fps)
    starts = np.array([p.start_ms for p in phonemes], dtype=np.float64)
    ends = starts + np.array([max(p.dur_ms, 1.0) for p in phonemes], dtype=np.float64)
    entries = [viseme_for(p.phoneme) for p in phonemes]
    targets = np.array([e.target for e in entries], dtype=np.float64)  # [S, 4]
    alphas = np.array([e.dominance for e in entries], dtype=np.float64)  # [S, 4]
    # Word gaps (piper marks every space as a short "_") do not close the mouth; real pauses
    # do: silence dominance grows from ~0 at 50 ms to full at 200 ms.
    for i, p in enumerate(phonemes):
        if p.phoneme == SILENCE:
            alphas[i] *= float(np.clip((p.dur_ms - 50.0) / 150.0, 0.08, 1.0))
    reach = np.array([e.reach for e in entries], dtype=np.float64)[None, :]
    before = np.maximum(0.0, starts[None, :] - t[:, None])  # [T, S] time until segment starts
    after = np.maximum(0.0, t[:, None] - ends[None, :])  # time since it ended
    decay = np.exp(-(before / TAU_ANTICIPATION_MS + after / TAU_CARRYOVER_MS) / reach)  # [T, S]
    weights = decay[:, :, None] * alphas[None, :, :]  # [T, S, 4]
    num = (weights * targets[None, :, :]).sum(axis=1)
    den = weights.sum(axis=1) + 1e-12
    out[:, :4] = num / den
    return out


def brow_from_audio(pcm: np.ndarray, sample_rate: int, n_frames: int, fps: int = 25) -> np.ndarray:
    """Emphasis [n_frames] in 0..1: loudness peaks above the running level raise the brows.

    Frame loudness (40 ms RMS, dB) minus its 1.2 s moving average, 3 dB dead zone, 6 dB to full
    scale, capped at 0.6 and smoothed over ~120 ms; zero in silence.
    """
    raw = np.asarray(pcm)
    audio = raw.astype(np.float64) / (32768.0 if raw.dtype == np.int16 else 1.0)
    hop = sample_rate / fps
    db = np.full(n_frames, -100.0)
    for k in range(n_frames):
        seg = audio[int(k * hop) : int((k + 1) * hop)]
        if len(seg):
            db[k] = 10.0 * np.log10(np.mean(seg**2) + 1e-10)
    width = max(1, round(1.2 * fps))
    kernel = np.ones(width) / width
    slow = np.convolve(np.pad(db, width // 2, mode="edge"), kernel, mode="same")[
        width // 2 : width // 2 + n_frames
    ]
    brow = np.clip((db - slow - 3.0) / 6.0, 0.0, 0.6)
    brow[db < -45.0] = 0.0
    smooth = np.array([0.25, 0.5, 0.25])
    brow = np.convolve(np.convolve(brow, smooth, mode="same"), smooth, mode="same")
    return brow.astype(np.float32)
