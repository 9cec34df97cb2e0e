"""The user's speech level (engines/vad/loudness.py): what may interrupt an answer."""

from __future__ import annotations

import numpy as np
import pytest

from engines.vad.gate import frame_dbfs
from engines.vad.loudness import SpeakerLevel, UtteranceLevel


def tone(seconds: float, amplitude: float) -> np.ndarray:
    t = np.arange(int(seconds * 16000)) / 16000
    return (np.sin(2 * np.pi * 220 * t) * amplitude).astype(np.int16)


def test_an_utterance_s_level_is_its_loudest_stretch_and_only_grows() -> None:
    level = UtteranceLevel()
    assert level.db is None
    soft, loud = frame_dbfs(tone(0.02, 1000)), frame_dbfs(tone(0.02, 8000))
    level.add(tone(0.2, 1000))  # a soft first syllable
    assert level.db == pytest.approx(soft, abs=0.5)
    level.add(np.zeros(3200, np.int16))  # a gap between words
    level.add(tone(0.4, 8000))
    assert level.db == pytest.approx(loud, abs=0.5)
    level.add(tone(0.4, 1000))  # softer again: the loudest so far stays
    assert level.db == pytest.approx(loud, abs=0.5)
    level.add(np.full(50, 30000, np.int16))  # a click shorter than half a frame: not counted
    assert level.db == pytest.approx(loud, abs=0.5)
    clicked = UtteranceLevel()
    clicked.add(tone(0.2, 1000))
    clicked.add(np.concatenate([np.full(320, 30000, np.int16), tone(0.2, 1000)]))
    assert clicked.db is not None and clicked.db < frame_dbfs(np.full(320, 30000, np.int16)) - 4


def test_the_user_s_level_is_the_median_of_their_answered_turns() -> None:
    user = SpeakerLevel(margin_db=10.0)
    assert user.db is None and user.below(-60.0) is None  # unknown: anything may be them
    for db in (-20.0, -22.0, -5.0):  # one shouted turn
        user.heard(db)
    user.heard(None)  # a turn of unknown level changes nothing
    assert user.db == -20.0
    assert user.below(-29.0) is None  # within the margin: the user
    assert user.below(-35.0) == pytest.approx(5.0)  # 15 dB down: 5 dB short of the margin
    assert user.below(None) is None


def test_the_margin_must_be_positive() -> None:
    with pytest.raises(ValueError, match="margin"):
        SpeakerLevel(margin_db=0.0)
