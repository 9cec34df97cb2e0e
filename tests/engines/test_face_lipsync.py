"""Lip sync of the shipped model on speech from the project's own voices.

The predicted mouth opening must follow the viseme target built from the voice's phoneme timings
(the same construction as the training targets) and stay near closed in silence. The threshold
comes from the held-out numbers of `python -m engines.face.training` (README, section face).
"""

from __future__ import annotations

import numpy as np
import pytest

from common.face_geometry import mouth_opening, params_to_offsets
from engines.face import create_face
from engines.face.features import num_frames
from engines.face.runtime import FaceRuntime
from engines.face.training.visemes import trajectory
from engines.tts.base import Speech
from testkit.speech import Engine, synth_with_timings

# Held-out (train CLI): piper per utterance min 0.81, median 0.94; on free-form agent lines,
# fresh piper syntheses (its durations are random) gave 0.78..0.93 per sentence.
MIN_CORRELATION = 0.7  # each sentence
MIN_POOLED_CORRELATION = 0.8  # all three sentences' frames together
CLOSED = 0.02  # face units: ~1.6 px of lip gap at the default framing (~80 px eye distance)

SENTENCES: tuple[tuple[Engine, str | None, str], ...] = (
    ("piper", None, "Good afternoon. I can help you open a savings account today."),
    ("piper", None, "Would you like me to read the summary back to you?"),
    ("espeak", "en-us+f3", "My favourite month is probably June, because the evenings are long."),
)


@pytest.fixture(scope="session")
def face() -> FaceRuntime:
    return create_face()


@pytest.fixture(scope="session")
def speeches() -> list[Speech]:
    return [synth_with_timings(text, engine, voice=voice)
            for engine, voice, text in SENTENCES]


def _target_opening(speech: Speech) -> np.ndarray:
    n = num_frames(len(speech.pcm), speech.sample_rate)
    return mouth_opening(params_to_offsets(trajectory(speech.phonemes, n)))


@pytest.mark.slow
def test_mouth_opening_follows_the_viseme_target(face: FaceRuntime,
                                                 speeches: list[Speech]) -> None:
    pooled: list[tuple[np.ndarray, np.ndarray]] = []
    for speech in speeches:
        predicted = mouth_opening(face.animate(speech.pcm, speech.sample_rate))
        target = _target_opening(speech)
        corr = float(np.corrcoef(predicted, target)[0, 1])
        assert corr >= MIN_CORRELATION, (speech.text, corr)
        assert predicted.max() > 0.08  # it really opens (0.22 = the widest "ah")
        pooled.append((predicted, target))
    p = np.concatenate([a for a, _ in pooled])
    t = np.concatenate([b for _, b in pooled])
    assert float(np.corrcoef(p, t)[0, 1]) >= MIN_POOLED_CORRELATION


@pytest.mark.slow
def test_mouth_is_near_closed_in_silence(face: FaceRuntime, speeches: list[Speech]) -> None:
    speech = speeches[0]
    pause = np.zeros(speech.sample_rate, np.int16)
    pcm = np.concatenate([pause, speech.pcm, pause])
    opening = mouth_opening(face.animate(pcm, speech.sample_rate))
    assert np.abs(opening[:20]).max() < CLOSED  # the lead-in second, before any speech
    assert np.abs(opening[-15:]).max() < CLOSED  # 0.6 s after the end of speech
    assert opening[25:-25].max() > 0.08
    offsets = face.animate(np.zeros(2 * speech.sample_rate, np.int16), speech.sample_rate)
    assert np.abs(offsets).max() < CLOSED  # pure silence: the rest face
