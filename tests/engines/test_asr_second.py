"""The second opinion: an unsure final is decoded by the other Whisper too and the surer text
kept; partials and sure finals cost nothing more; the profile picks the other bundled model
for English only."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engines.asr import AsrConfig
from engines.asr.errors import AsrModelLoadError, InvalidAsrConfigError
from engines.asr.streaming import WhisperStream, WhisperStreamingASR
from engines.asr.whisper_runner import Decoded
from rtc_server.config import Config
from rtc_server.profile import FIXED_PACE, Fit, second_asr
from testkit.speech import synth, voiced_bounds

SR = 16000


class _Runner:
    """A Whisper stand-in that hears `text` with `confidence` (its mean token probability)."""

    max_audio_s = 27.0

    def __init__(self, text: str, confidence: float) -> None:
        self.text, self.confidence, self.calls = text, confidence, 0
        self.languages: list[str | None] = []

    def decode(self, pcm: np.ndarray, language: str | None = None,
               prompt: str | None = None) -> Decoded:
        self.calls += 1
        self.languages.append(language)
        return Decoded(self.text, "en", 0.0, math.log(self.confidence), 0.9, 0.01)

    def accept(self, decoded: Decoded, prompt: str | None = None) -> str:
        return decoded.text


def stream(first: _Runner, second: _Runner, below: float = 0.65) -> WhisperStream:
    config = AsrConfig(speech_gate=False, second_below=below)
    return WhisperStream(first, config, second)  # type: ignore[arg-type]


def test_an_unsure_pause_is_decoded_again_and_the_surer_text_kept() -> None:
    first, second = _Runner("Which planet is no faster?", 0.4), _Runner(
        "Which planet is the largest?", 0.8)
    s = stream(first, second)
    s.feed(np.ones(2 * SR, np.int16), partial=False)
    paused = s.pause()
    assert paused.text == "Which planet is the largest?"
    assert paused.confidence == pytest.approx(0.8)
    assert (s.second_opinions, s.second_kept, second.languages) == (1, 1, ["en"])
    assert s.finish() == "Which planet is the largest?"  # nothing fed since: no decode
    assert (first.calls, second.calls) == (1, 1)


def test_a_less_sure_second_opinion_is_not_kept() -> None:
    first, second = _Runner("What time do you open?", 0.5), _Runner("What time do you", 0.3)
    s = stream(first, second)
    s.feed(np.ones(2 * SR, np.int16), partial=False)
    assert s.pause().text == "What time do you open?"
    assert (s.second_opinions, s.second_kept) == (1, 0)


def test_a_sure_final_and_partials_cost_no_second_decode() -> None:
    first, second = _Runner("Hello there.", 0.9), _Runner("Yellow hair.", 0.99)
    s = stream(first, second)
    s.feed(np.ones(2 * SR, np.int16))  # a partial: the first model only
    assert first.calls == 1 and second.calls == 0
    s.feed(np.ones(SR, np.int16), partial=False)
    assert s.pause().text == "Hello there." and second.calls == 0
    unsure = stream(_Runner("mumble", 0.2), second)
    unsure.feed(np.ones(2 * SR, np.int16))  # an unsure partial is not worth a second decode
    assert second.calls == 0


def test_the_early_decode_takes_the_second_opinion_and_the_pause_reuses_it() -> None:
    first, second = _Runner("I cache machine?", 0.3), _Runner("A cash machine?", 0.7)
    s = stream(first, second)
    s.feed(np.ones(2 * SR, np.int16), partial=False)
    early = s.decode_ahead(np.zeros(1920, np.int16))
    assert early is not None and early.text == "A cash machine?"
    s.feed(np.zeros(1920, np.int16), partial=False)
    assert s.pause().text == "A cash machine?"
    assert (first.calls, second.calls) == (1, 1)


def test_nothing_heard_is_not_asked_again() -> None:
    first, second = _Runner("", 0.1), _Runner("Invented words.", 0.9)
    s = stream(first, second)
    s.feed(np.ones(2 * SR, np.int16), partial=False)
    assert s.pause().text == "" and second.calls == 0


def test_the_profile_gives_english_the_other_bundled_model() -> None:
    assert second_asr("tiny.en", "en") == "base"
    assert second_asr("base", "en") == "tiny.en"
    assert second_asr("base", "zh") == "none"  # tiny.en hears English only
    assert second_asr("/models/whisper-small", "en") == "none"
    fit = Fit("auto", None, "tiny.en", None, FIXED_PACE, (), asr_second="base")
    assert fit.apply(Config()).asr.second_model == "base"
    kept = replace(Config(), asr=AsrConfig(second_model="none"))
    assert fit.apply(kept).asr.second_model == "none"  # an explicit choice stays
    fixed = Fit("fixed", None, None, None, FIXED_PACE, ())
    assert fixed.apply(Config()).asr.second_model == "auto"  # nothing chosen: none loaded
    assert AsrConfig(second_model="auto").second is None


def test_bad_second_model_settings_are_refused() -> None:
    with pytest.raises(InvalidAsrConfigError, match="second_below"):
        AsrConfig(second_below=1.5)
    with pytest.raises(InvalidAsrConfigError, match="English only"):
        AsrConfig(language="zh", second_model="tiny.en")
    second = AsrConfig(model="tiny.en", second_model="base", prompt="Ava.").second
    assert second is not None and (second.model, second.prompt, second.second_model) == (
        "base", "Ava.", "none")


def test_a_missing_second_model_stops_start_up_naming_its_key(tmp_path: Path) -> None:
    with pytest.raises(AsrModelLoadError, match=r"\[asr\] second_model: unknown"):
        WhisperStreamingASR(AsrConfig(model="tiny.en", second_model=str(tmp_path / "nowhere"),
                                      speech_gate=False))


@pytest.mark.slow
def test_the_real_models_agree_on_a_clear_question_and_the_surer_is_kept() -> None:
    """Both bundled models loaded; `second_below` 1 makes every final ask both."""
    asr = WhisperStreamingASR(AsrConfig(model="tiny.en", second_model="base",
                                        second_below=1.0, speech_gate=False))
    assert asr.second is not None
    speech = synth("What time does the bank open on Saturday?", engine="piper")
    first, last = voiced_bounds(speech)
    s = asr.open()
    s.feed(speech[first:last], partial=False)
    paused = s.pause()
    assert s.second_opinions == 1
    assert "bank" in paused.text.lower() and "saturday" in paused.text.lower()
    assert paused.confidence is not None and paused.confidence > 0.5
