"""testkit/speech.py: cached synthetic speech, resampling, timings and noise."""

from __future__ import annotations

import numpy as np
import pytest

from engines.cache import cache_dir
from testkit.speech import Noise, add_noise, synth, synth_with_timings


def test_synth_is_cached_and_resampled() -> None:
    text = "Caching test sentence number seven."
    a = synth(text, engine="espeak", sample_rate=16000)
    files = set(cache_dir("test-speech").iterdir())
    b = synth(text, engine="espeak", sample_rate=16000)
    assert set(cache_dir("test-speech").iterdir()) == files
    # espeak-ng is not bit-exact between runs, so equality proves the cache was used.
    assert a.dtype == np.int16 and np.array_equal(a, b)
    c = synth(text, engine="espeak", sample_rate=48000)
    assert abs(len(c) - 3 * len(a)) <= 3  # one cached utterance, resampled to each rate


def test_synth_with_timings_match_resampled_audio() -> None:
    s = synth_with_timings("Timings at eight kilohertz.", "espeak", 8000, "en-gb+f3", 1.1, 70)
    assert s.sample_rate == 8000
    end = s.phonemes[-1].start_ms + s.phonemes[-1].dur_ms
    assert end == pytest.approx(1000 * len(s.pcm) / 8000, abs=0.01)
    again = synth_with_timings("Timings at eight kilohertz.", "espeak", 8000, "en-gb+f3", 1.1, 70)
    assert again.phonemes == s.phonemes


def test_voice_arguments_change_the_audio() -> None:
    text = "Different speakers say this."
    a = synth(text, engine="espeak", voice="en-us")
    b = synth(text, engine="espeak", voice="en-us+f3")
    c = synth(text, engine="espeak", voice="en-us", pitch=85)
    assert not np.array_equal(a[: len(b)], b[: len(a)])
    assert not np.array_equal(a[: len(c)], c[: len(a)])
    with pytest.raises(ValueError):
        synth(text, engine="piper", pitch=60)


@pytest.mark.parametrize("kind", ["white", "babble"])
@pytest.mark.parametrize("snr_db", [0.0, 10.0, 20.0])
def test_add_noise_hits_the_snr(kind: Noise, snr_db: float) -> None:
    clean = synth("Noise makes this harder to hear.", engine="espeak")
    noisy = add_noise(clean, snr_db, seed=3, kind=kind)
    assert noisy.dtype == np.int16 and len(noisy) == len(clean)
    noise = noisy.astype(np.float64) - clean
    measured = 10 * np.log10(np.mean(clean.astype(np.float64) ** 2) / np.mean(noise**2))
    assert measured == pytest.approx(snr_db, abs=0.3)
    assert np.array_equal(noisy, add_noise(clean, snr_db, seed=3, kind=kind))
    assert not np.array_equal(noisy, add_noise(clean, snr_db, seed=4, kind=kind))
