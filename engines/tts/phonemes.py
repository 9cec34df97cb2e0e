"""Turn a voice's raw phoneme segments into the project's `PhonemeTiming` convention.

Both voices report phonemes differently (piper: one IPA code point per token, stress marks and
length marks as their own tokens; espeak-ng: clusters such as "ˈaɪ" or "uː", "" for pauses).
The face model learns one mapping, so both are brought to one shape here:

- each timing is one IPA letter, optionally followed by modifiers ("ː", "ʰ", combining marks);
- stress marks ("ˈ", "ˌ") are dropped and their time is given to the next phoneme;
- a cluster of several letters ("aɪ") is split into letters sharing its time equally;
- pauses, word gaps, punctuation and begin/end markers are `SILENCE` ("_"), merged when adjacent;
- timings are contiguous: the first starts at 0 and the last ends at the end of the audio.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from engines.tts.base import PhonemeTiming

SILENCE = "_"
_STRESS = frozenset("ˈˌ")


def _is_modifier(ch: str) -> bool:
    return unicodedata.category(ch) in ("Lm", "Mn", "Sk") and ch not in _STRESS


def _is_letter(ch: str) -> bool:
    return unicodedata.category(ch).startswith("L") and not _is_modifier(ch) and ch not in _STRESS


def _units(label: str) -> list[str]:
    """Split a raw label into letters with their modifiers; [] for a pure pause."""
    units: list[str] = []
    for ch in label:
        if _is_letter(ch):
            units.append(ch)
        elif _is_modifier(ch):
            if units:
                units[-1] += ch
            else:
                units.append(ch)  # a bare length mark: attached to the previous token later
    return units


def segments_to_timings(
    segments: Sequence[tuple[str, int]], total_samples: int, sample_rate: int
) -> tuple[PhonemeTiming, ...]:
    """Convert contiguous `(raw_label, start_sample)` segments into timings covering the audio.

    Segment i lasts until segment i+1 starts (the last until `total_samples`); a gap before the
    first segment becomes silence.
    """
    spans: list[tuple[str, int, int]] = []  # (label, start, end) in samples
    points = [(label, max(0, min(start, total_samples))) for label, start in segments]
    if not points or points[0][1] > 0:
        points.insert(0, (SILENCE, 0))
    carry_start: int | None = None  # start of a stress mark whose time goes to the next phoneme
    for i, (label, start) in enumerate(points):
        end = points[i + 1][1] if i + 1 < len(points) else total_samples
        if end <= start:
            continue
        if carry_start is not None:
            start, carry_start = carry_start, None
        if label and all(ch in _STRESS for ch in label):
            carry_start = start
            continue
        units = _units(label)
        if not units:
            spans.append((SILENCE, start, end))
            continue
        if not _is_letter(units[0][0]) and spans and spans[-1][0] != SILENCE:
            # A bare "ː" token (piper): lengthen the previous phoneme.
            prev, p_start, _ = spans.pop()
            spans.append((prev + units[0], p_start, end))
            continue
        step = (end - start) / len(units)
        for k, unit in enumerate(units):
            spans.append((unit, round(start + k * step), round(start + (k + 1) * step)))
    if carry_start is not None:
        spans.append((SILENCE, carry_start, total_samples))
    merged: list[tuple[str, int, int]] = []
    for label, start, end in spans:
        if end <= start:
            continue
        if merged and merged[-1][0] == SILENCE and label == SILENCE:
            merged[-1] = (SILENCE, merged[-1][1], end)
        else:
            merged.append((label, start, end))
    if merged and merged[-1][2] < total_samples:
        merged.append((SILENCE, merged[-1][2], total_samples))
    scale = 1000.0 / sample_rate
    return tuple(
        PhonemeTiming(label, start * scale, (end - start) * scale) for label, start, end in merged
    )
