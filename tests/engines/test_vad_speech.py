"""Endpointer on generated speech (piper, espeak-ng): clean, in white and babble noise.

Truth is where the TTS audio is voiced (10 ms frames within 40 dB of the loudest). The
endpointer must start near the first voiced sample (with pre-roll covering it), end near the
last, produce exactly one utterance per sentence, and nothing on the noise alone.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from engines.vad import (
    SpeechEnded,
    SpeechStarted,
    VadConfig,
    VadEvent,
    create_endpointer,
)
from testkit.speech import Engine, Noise, add_noise, synth
from testkit.speech import voiced_bounds as voiced_samples

SR = 16000
TEXT = "Please remind me to call my mother tomorrow morning."


def voiced_bounds(pcm: np.ndarray) -> tuple[float, float]:
    first, last = voiced_samples(pcm)
    return first / SR, last / SR


def clip(engine: Engine, noise: Noise | None, snr_db: float = 10.0,
         ) -> tuple[np.ndarray, float, float]:
    speech = synth(TEXT, engine)
    start, end = voiced_bounds(speech)
    lead = np.zeros(SR, np.int16)
    audio = np.concatenate([lead, speech, np.zeros(SR, np.int16)])
    if noise is not None:
        snr = snr_db + 10 * math.log10(speech.shape[0] / audio.shape[0])  # relative to speech
        audio = add_noise(audio, snr, seed=5, kind=noise)
    return audio, 1.0 + start, 1.0 + end


def events(audio: np.ndarray, config: VadConfig) -> list[tuple[float, VadEvent]]:
    """(stream time at the end of the push that returned it, event): starts and ends only."""
    ep = create_endpointer(config)
    out: list[tuple[float, VadEvent]] = []
    for i in range(0, audio.shape[0], 320):
        event = ep.push(audio[i : i + 320])
        if isinstance(event, SpeechStarted | SpeechEnded):
            out.append(((i + 320) / SR, event))
    return out


@pytest.mark.parametrize("engine", ["piper", "espeak"])
@pytest.mark.parametrize("noise", [None, "white"])
@pytest.mark.parametrize("silero", [False, True])
def test_one_utterance_with_accurate_bounds(
    engine: Engine, noise: Noise | None, silero: bool
) -> None:
    audio, start, end = clip(engine, noise)
    evs = events(audio, VadConfig(silero_confirm=silero))
    assert [type(e).__name__ for _, e in evs] == ["SpeechStarted", "SpeechEnded"], evs
    (pushed, began), (reported, ended) = evs
    assert isinstance(began, SpeechStarted) and isinstance(ended, SpeechEnded)
    # onset found within 250 ms of the first voiced sample; the start's audio reaches back
    # (pre-roll) before that sample, so the first syllable is not lost
    assert start - 0.05 <= began.t <= start + 0.25
    assert pushed - began.audio.shape[0] / SR <= start - 0.1
    # end within 300 ms of the last voiced sample (webrtcvad keeps fading tails a bit longer)
    # and reported once the 400 ms hangover has passed
    assert end - 0.3 <= ended.t <= end + 0.25
    assert reported == pytest.approx(ended.t + 0.4, abs=0.021)
    assert not ended.forced


@pytest.mark.parametrize("silero", [False, True])
def test_noise_alone_gives_no_utterance(silero: bool) -> None:
    audio, _, _ = clip("piper", "white")
    speech_free = np.concatenate([audio[: SR - 1600], audio[-SR + 1600 :]] * 3)
    assert events(speech_free, VadConfig(silero_confirm=silero)) == []


def test_clipped_speech_is_endpointed() -> None:
    audio, start, end = clip("piper", None)
    loud = np.clip(audio.astype(np.int32) * 10, -32768, 32767).astype(np.int16)
    evs = [e for _, e in events(loud, VadConfig())]
    assert [type(e).__name__ for e in evs] == ["SpeechStarted", "SpeechEnded"]
    assert evs[1].t == pytest.approx(end, abs=0.3)


def test_babble_at_10_db_is_heard_as_speech() -> None:
    """Known limit: babble (other voices) is speech to every detector here; only steady noise
    is rejected. The ASR's own speech gate cannot tell a distant talker from the user either."""
    audio, _, _ = clip("piper", "babble")
    evs = events(audio, VadConfig(silero_confirm=True))
    assert any(isinstance(e, SpeechStarted) and e.t < 0.9 for _, e in evs)
