"""Noise suppression before Whisper: it lowers the noise, keeps the speech where it was, and
touches only the audio a decode sees (the stream keeps what was fed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engines.asr import AsrConfig
from engines.asr.denoise import suppress_noise
from engines.asr.errors import InvalidAsrConfigError
from engines.asr.streaming import WhisperStream
from engines.asr.whisper_runner import Decoded
from testkit.speech import add_noise, synth, voiced_bounds

SR = 16000


def _speech_in_noise(snr_db: float = 10.0) -> tuple[np.ndarray, np.ndarray, int]:
    """(noisy, clean) PCM: 0.5 s of noise alone, then a question; and where it starts."""
    speech = synth("How do airplanes stay in the air?", "piper")
    first, last = voiced_bounds(speech)
    lead = SR // 2
    clean = np.concatenate([np.zeros(lead, np.int16), speech[first:last]])
    return add_noise(clean, snr_db, seed=7), clean, lead


def _power(x: np.ndarray) -> float:
    return float(np.mean(x.astype(np.float64) ** 2))


def test_the_noise_is_lowered_and_the_speech_kept_in_place() -> None:
    noisy, clean, lead = _speech_in_noise()
    out = suppress_noise(noisy, 2)
    assert out.dtype == np.int16 and out.shape == noisy.shape
    # the noise alone, once the suppressor has learnt it (its second half): at least 6 dB less
    half = slice(lead // 2, lead)
    assert _power(out[half]) < _power(noisy[half]) / 4
    # the speech is still there, and where it was: it correlates best with no lag
    speech_in, speech_out = clean[lead:].astype(np.float64), out[lead:].astype(np.float64)
    lags = range(-40, 41)
    middle = slice(200, len(speech_in) - 200)
    scores = [float(np.dot(speech_in[middle], np.roll(speech_out, -lag)[middle])) for lag in lags]
    assert abs(list(lags)[int(np.argmax(scores))]) <= 2
    assert np.corrcoef(speech_in, speech_out)[0, 1] > 0.8


def test_level_zero_and_empty_audio_pass_through() -> None:
    noisy, _, _ = _speech_in_noise()
    assert suppress_noise(noisy, 0) is noisy
    assert suppress_noise(np.zeros(0, np.int16), 2).size == 0
    odd = noisy[:1234]  # not a whole number of 10 ms chunks
    assert suppress_noise(odd, 3).shape == odd.shape


@pytest.mark.parametrize("level", [-1, 5])
def test_an_unknown_level_is_refused(level: int) -> None:
    with pytest.raises(InvalidAsrConfigError, match="noise_suppression"):
        AsrConfig(noise_suppression=level)


class _Runner:
    """A Whisper stand-in that records the audio it was asked to decode."""

    max_audio_s = 27.0

    def __init__(self) -> None:
        self.heard: list[np.ndarray] = []

    def decode(self, pcm: np.ndarray, language: str | None = None,
               prompt: str | None = None) -> Decoded:
        self.heard.append(pcm)
        return Decoded("How do airplanes stay in the air?", "en", 0.0, math.log(0.9), 0.9, 0.01)

    def accept(self, decoded: Decoded, prompt: str | None = None) -> str:
        return decoded.text


@pytest.mark.parametrize("level", [0, 2])
def test_the_stream_decodes_the_suppressed_audio(level: int) -> None:
    noisy, _, _ = _speech_in_noise()
    runner = _Runner()
    stream = WhisperStream(runner, AsrConfig(speech_gate=False,  # type: ignore[arg-type]
                                             noise_suppression=level))
    stream.feed(noisy, partial=False)
    stream.pause()
    assert len(runner.heard) == 1
    np.testing.assert_array_equal(runner.heard[0], suppress_noise(noisy, level))
    assert (level == 0) == np.array_equal(runner.heard[0], noisy)


def test_a_missing_package_stops_start_up_with_a_clear_message(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from engines.asr.denoise import check_suppressor
    from engines.asr.errors import AsrModelLoadError

    monkeypatch.setitem(sys.modules, "webrtc_noise_gain", None)  # import fails
    with pytest.raises(AsrModelLoadError, match="noise_suppression"):
        check_suppressor()
