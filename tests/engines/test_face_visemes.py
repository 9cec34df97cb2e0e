"""Features, the viseme table with coarticulation, and the articulation basis."""

from __future__ import annotations

import numpy as np
import pytest

from common.face_geometry import (
    BASIS,
    PARAMS,
    face_frame,
    mouth_opening,
    mouth_width,
    offsets_to_pixels,
    params_to_offsets,
)
from engines.face.errors import InvalidInputError
from engines.face.features import N_MELS, SILENCE_VALUE, log_mel, num_frames, resample_frames
from engines.face.training.visemes import brow_from_audio, trajectory, viseme_for
from engines.tts.base import PhonemeTiming


def _timings(spec: list[tuple[str, float]]) -> list[PhonemeTiming]:
    out, t = [], 0.0
    for ph, dur in spec:
        out.append(PhonemeTiming(ph, t, dur))
        t += dur
    return out


def _at(params: np.ndarray, ms: float, col: int) -> float:
    return float(params[int(round(ms / 40.0)), col])


def test_feature_rows_cover_every_video_frame() -> None:
    for seconds, rate in ((1.0, 16000), (2.37, 22050), (0.05, 48000)):
        pcm = np.zeros(int(seconds * rate), np.int16)
        feats = log_mel(pcm, rate)
        assert feats.shape == (4 * num_frames(len(pcm), rate), N_MELS)
        assert feats.dtype == np.float32
        np.testing.assert_allclose(feats, SILENCE_VALUE, atol=1e-3)  # digital silence = floor


def test_features_see_a_tone_in_the_right_band_and_time() -> None:
    rate = 16000
    t = np.arange(rate) / rate
    pcm = np.zeros(2 * rate, np.float32)
    pcm[rate:] = 0.3 * np.sin(2 * np.pi * 1000 * t)  # 1 kHz tone in the second half
    feats = log_mel(pcm, rate)
    assert feats[:90].max() < SILENCE_VALUE + 1  # first 0.9 s silent
    loud = feats[120:180].mean(axis=0)
    assert 15 < int(np.argmax(loud)) < 40  # 1 kHz sits in the lower-middle mel bands


def test_bad_pcm_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        log_mel(np.zeros((10, 2), np.int16), 16000)
    with pytest.raises(InvalidInputError):
        log_mel(np.zeros(100, np.int32), 16000)


def test_bilabial_closes_and_open_vowel_opens() -> None:
    ph = _timings([("_", 300), ("m", 120), ("ɑ", 240), ("p", 100), ("ɑ", 240), ("_", 400)])
    params = trajectory(ph, num_frames(int(1.4 * 16000), 16000))
    opening = PARAMS.index("open")
    assert _at(params, 360, opening) < 0.05  # middle of /m/: lips together
    assert _at(params, 520, opening) > 0.6  # middle of /ɑ/: wide open
    assert _at(params, 710, opening) < 0.1  # /p/ closes between the vowels
    assert _at(params, 1360, opening) < 0.05  # silence at the end: closed


def test_rounding_spreads_to_neighbouring_consonants() -> None:
    # "who": /h/ has weak dominance, so it takes the rounding of /u/ (anticipation).
    rnd = PARAMS.index("round")
    who = trajectory(_timings([("_", 300), ("h", 80), ("u", 250), ("_", 300)]), 24)
    he = trajectory(_timings([("_", 300), ("h", 80), ("i", 250), ("_", 300)]), 24)
    assert _at(who, 360, rnd) > 0.4  # late in the /h/, already rounding
    assert _at(he, 360, rnd) < 0.05


def test_word_gaps_do_not_close_the_mouth_but_pauses_do() -> None:
    ph = _timings([("_", 200), ("ɑ", 200), ("_", 40), ("ɑ", 200), ("_", 400), ("ɑ", 200)])
    params = trajectory(ph, 30)
    assert _at(params, 420, 0) > 0.5  # 40 ms word gap
    assert _at(params, 840, 0) < 0.15  # 400 ms pause


def test_unknown_phonemes_and_modifiers_map_somewhere_sensible() -> None:
    assert viseme_for("ɑː") == viseme_for("ɑ")
    assert viseme_for("tʃ").target[2] > 0.3  # rounded like /ʃ/
    assert 0.0 < viseme_for("☃").target[0] < 0.5


def test_basis_moves_the_right_points() -> None:
    one = np.eye(len(PARAMS), dtype=np.float32)
    offs = params_to_offsets(one)
    assert offs.shape == (5, 68, 2)
    assert mouth_opening(offs)[0] > 0.15  # open parts the inner lips
    assert mouth_width(offs)[1] > 0.1  # width spreads the corners
    assert mouth_width(offs)[2] < -0.1  # rounding narrows them
    assert offs[3, 8, 1] > 0.1  # jaw drops the chin
    assert offs[4, 17:27, 1].max() < 0  # brows go up
    assert not BASIS[:, 36:48].any()  # eyes are the renderer's business (blinks)


def test_face_frame_maps_offsets_into_rotated_portraits() -> None:
    lm = np.zeros((68, 2), np.float32)
    lm[36], lm[45] = (100, 100), (160, 100)  # upright, 60 px between outer eye corners
    offs = np.zeros((68, 2), np.float32)
    offs[8] = (0.0, 0.1)
    np.testing.assert_allclose(offsets_to_pixels(offs, lm)[8], (0.0, 6.0), atol=1e-5)
    lm[45] = (100, 160)  # rolled 90 degrees clockwise: "down" is now image -x
    np.testing.assert_allclose(offsets_to_pixels(offs, lm)[8], (-6.0, 0.0), atol=1e-5)
    origin, _, scale = face_frame(lm)
    assert scale == pytest.approx(60.0)
    np.testing.assert_allclose(origin, (100, 130))


def test_brows_follow_loud_syllables_only() -> None:
    rate = 16000
    rng = np.random.default_rng(0)
    pcm = 0.05 * rng.standard_normal(3 * rate)
    pcm[rate + 8000 : rate + 12000] *= 8  # one emphasised 250 ms stretch
    brow = brow_from_audio(pcm.astype(np.float32), rate, 75)
    assert brow[36:44].max() > 0.3  # 1.5 .. 1.75 s
    assert brow[:20].max() < 0.05
    assert not brow_from_audio(np.zeros(rate, np.int16), rate, 25).any()


def test_resample_frames_between_rates() -> None:
    seq = np.arange(25, dtype=np.float32)[:, None, None] * np.ones((1, 68, 2), np.float32)
    out = resample_frames(seq, 25, 30)
    assert out.shape == (30, 68, 2)
    np.testing.assert_allclose(out[6, 0, 0], 5.0, atol=1e-5)  # t = 0.2 s


def test_joined_sentence_pauses_close_the_mouth() -> None:
    # Two TTS chunks joined: trailing "_" of one + leading "_" of the next = one 240 ms pause.
    ph = _timings([("_", 100), ("ɑ", 300), ("_", 120), ("_", 120), ("ɑ", 300), ("_", 100)])
    params = trajectory(ph, 26)
    assert _at(params, 520, 0) < 0.15
