"""The speaker's learnt pause limit (engines/turn/speaker.py): the ceiling until they were
heard, then their own longest pause inside a turn, scaled, within the floor and the ceiling."""

from __future__ import annotations

import pytest

from engines.turn import TurnConfig
from engines.turn.errors import InvalidTurnConfigError
from engines.turn.speaker import MARGIN_MS, SCALE, SpeakerPauses


def test_a_new_speaker_gets_the_ceiling() -> None:
    assert SpeakerPauses(700, 1500).limit_ms() == 1500


def test_a_fluent_speaker_gets_the_floor() -> None:
    speaker = SpeakerPauses(700, 1500)
    speaker.heard(0.0)
    assert speaker.limit_ms() == 700


def test_the_longest_pause_sets_the_limit_within_floor_and_ceiling() -> None:
    speaker = SpeakerPauses(700, 1500)
    speaker.heard(0.0)
    speaker.heard(500.0)
    speaker.heard(300.0)
    assert speaker.limit_ms() == pytest.approx(SCALE * 500 + MARGIN_MS)
    speaker.heard(900.0)  # a long hesitation: the ceiling, not beyond
    assert speaker.limit_ms() == 1500


def test_a_cut_off_raises_the_limit_at_once() -> None:
    speaker = SpeakerPauses(700, 1500)
    speaker.heard(0.0)
    assert speaker.limit_ms() == 700
    assert not speaker.cut_off(1600.0)  # past the ceiling: a new turn, not a pause
    assert speaker.limit_ms() == 700
    assert speaker.cut_off(850.0)  # they spoke on 850 ms after the turn this limit ended
    assert speaker.limit_ms() == 1500


def test_old_utterances_are_forgotten() -> None:
    speaker = SpeakerPauses(700, 1500)
    speaker.heard(900.0)
    for _ in range(8):
        speaker.heard(100.0)
    assert speaker.limit_ms() == 700


def test_floor_outside_the_range_is_a_clear_error() -> None:
    with pytest.raises(ValueError):
        SpeakerPauses(0, 1500)
    with pytest.raises(InvalidTurnConfigError, match="speaker_floor_ms"):
        TurnConfig(speaker_floor_ms=2000, max_silence_ms=1500)
    assert TurnConfig(speaker_floor_ms=0).speaker_floor_ms == 0  # off
