"""Smart Turn v3.2 (the real ONNX model from the pipecat-ai wheel) and the verdict policy.

Model outputs on generated speech vary a little between TTS runs (espeak-ng is not bit-exact),
so speech assertions are counts with margin: measured 18/20 piper complete questions above
0.5 (the limit here is 14/20) and 5/5 espeak-ng Mandarin questions (limit 4/5).
"""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

from engines.asr.base import PauseText
from engines.turn import TurnConfig, load_turn_model
from engines.turn.errors import InvalidInputError, InvalidTurnConfigError
from engines.turn.policy import (
    complete_after_ms,
    is_complete,
    reads_finished,
    recheck_at_ms,
    recheck_window,
    rechecked_after_ms,
    sure_early,
)
from engines.turn.smart_turn import SmartTurnModel
from testkit.pauses import COMPLETE_QUESTIONS
from testkit.speech import Engine, synth, voiced_bounds

SR = 16000
ZH_QUESTIONS = ("今天天气怎么样？", "请问火车站在哪里？", "我想把钱转到我妹妹的账户。",
                "你叫什么名字？", "这个多少钱？")


@pytest.fixture(scope="module")
def model() -> SmartTurnModel:
    loaded = load_turn_model(TurnConfig())
    assert isinstance(loaded, SmartTurnModel)
    return loaded


def question(text: str, engine: Engine = "piper", voice: str | None = None) -> np.ndarray:
    """0.5 s lead, the voiced speech, 200 ms of pause: what the endpointer hands over."""
    pcm = synth(text, engine, voice=voice)
    first, last = voiced_bounds(pcm)
    return np.concatenate([np.zeros(SR // 2, np.int16), pcm[first:last],
                           np.zeros(SR // 5, np.int16)])


def test_loaded_once_per_process_and_off_means_none(model: SmartTurnModel) -> None:
    assert load_turn_model(TurnConfig()) is model
    assert load_turn_model(TurnConfig(model="none")) is None


def test_window_is_the_last_8_s_zero_padded_in_front(model: SmartTurnModel) -> None:
    speech = question(COMPLETE_QUESTIONS[0])
    long = np.concatenate([synth(COMPLETE_QUESTIONS[1]), np.zeros(8 * SR, np.int16), speech])
    assert model.complete_probability(long) == pytest.approx(
        model.complete_probability(long[-8 * SR :]), abs=1e-6
    )
    padded = np.concatenate([np.zeros(3 * SR, np.int16), speech])  # leading silence = padding
    assert model.complete_probability(padded) == pytest.approx(
        model.complete_probability(speech), abs=1e-6
    )
    for empty in (np.zeros(0, np.int16), np.zeros(SR, np.int16)):
        assert 0.0 <= model.complete_probability(empty) <= 1.0


def test_bad_input_raises_a_typed_error(model: SmartTurnModel) -> None:
    with pytest.raises(InvalidInputError):
        model.complete_probability(np.zeros(SR, np.float32))


def test_shared_model_is_thread_safe(model: SmartTurnModel) -> None:
    clips = [question(q) for q in COMPLETE_QUESTIONS[:4]]
    alone = [model.complete_probability(c) for c in clips]
    together: dict[int, float] = {}

    def run(k: int) -> None:
        together[k] = model.complete_probability(clips[k])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(clips))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [together[k] for k in range(len(clips))] == pytest.approx(alone, abs=1e-5)


@pytest.mark.slow
def test_complete_questions_are_mostly_called_complete(model: SmartTurnModel) -> None:
    probabilities = [model.complete_probability(question(q)) for q in COMPLETE_QUESTIONS]
    assert sum(p > 0.5 for p in probabilities) >= 14, probabilities


@pytest.mark.slow
def test_mandarin_questions_are_called_complete(model: SmartTurnModel) -> None:
    """espeak-ng `cmn` is robotic (Whisper reads it badly) but its prosody ends questions."""
    probabilities = [model.complete_probability(question(q, "espeak", "cmn"))
                     for q in ZH_QUESTIONS]
    assert sum(p > 0.5 for p in probabilities) >= 4, probabilities


def test_model_files_are_used_without_importing_pipecat() -> None:
    """Importing `pipecat` replaces asyncio.wait_for process-wide (Python < 3.12) and logs a
    banner; the model and its feature extractor are loaded from their files instead."""
    code = (
        "import asyncio, sys, numpy as np\n"
        "before = asyncio.wait_for\n"
        "from engines.turn import load_turn_model\n"
        "load_turn_model().complete_probability(np.zeros(16000, np.int16))\n"
        "assert 'pipecat' not in sys.modules and asyncio.wait_for is before\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# --- the verdict policy ------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "finished"),
    [
        ("What is the capital of France?", True),
        ("Turn on the lights, please.", True),
        ("What is this for?", True),  # a stranded preposition ends many questions
        ("", False),  # words dropped (or noise): wait, the long limit costs nothing here
        ("I'd like to", False),
        ("My card was...", False),
        ("How long does it take to?", False),
        ("Tell me about the.", False),
        ("I was wondering if", False),
        ("Could you look at the report, and", False),
        ("这个多少钱？", True),
        ("这个多少钱?", True),
        ("我想把钱", False),
        ("我想去看我的。", False),
    ],
)
def test_reads_finished(text: str, finished: bool) -> None:
    assert reads_finished(text) is finished


def test_verdict_at_the_pause_needs_both_signals_unless_the_text_check_is_off() -> None:
    on, off = TurnConfig(), TurnConfig(text_check=False)
    station = PauseText("Where is the station?", 0.95)
    assert not is_complete(0.3, station, on, 200)
    assert not is_complete(0.9, None, on, 200)
    assert is_complete(0.9, station, on, 200)
    assert not is_complete(0.9, PauseText("Where is the", 0.0), on, 200)
    # Whisper completed a cut-off sentence itself, and was unsure of its full stop
    assert not is_complete(0.9, PauseText("I need it.", 0.56), on, 200)
    assert is_complete(0.9, PauseText("I need it.", None), on, 200)  # no score from the engine
    assert not is_complete(0.9, PauseText("", None), on, 200)
    assert is_complete(0.9, None, off, 200)
    assert not is_complete(0.4, station, off, 200)


def test_the_confidence_needed_falls_with_the_silence() -> None:
    """Pins the cliff of the old rule: a final mark at 0.84 instead of 0.86 (another
    machine's numerics, another voice) made the turn wait 1.5 s instead of 0.2 s."""
    config = TurnConfig(patience_ms=600, sentence_end_span=0.25)
    sure, unsure = PauseText("I need it.", 0.86), PauseText("I need it.", 0.84)
    assert complete_after_ms(0.9, sure, config, 200) == 200
    after = complete_after_ms(0.9, unsure, config, 200)
    assert after is not None and 200 < after < 230  # a few ms later, not the long limit
    # the less sure, the longer the wait; at most the patience after the pause
    times = [complete_after_ms(0.9, PauseText("I need it.", p), config, 200)
             for p in (0.8, 0.5, 0.2, 0.0)]
    assert times == sorted(times) and times[-1] == 800  # type: ignore[type-var]
    low_turn = complete_after_ms(0.1, sure, config, 200)
    assert low_turn is not None and 600 < low_turn <= 800
    assert is_complete(0.9, unsure, config, 200, silence_ms=after)
    assert not is_complete(0.9, unsure, config, 200, silence_ms=after - 1)
    # what does not read finished never ends the turn early, however long the silence
    assert complete_after_ms(0.99, PauseText("I'd like to", 0.99), config, 200) is None
    # patience 0: the strict rule, the long limit for the rest
    assert complete_after_ms(0.9, unsure, TurnConfig(patience_ms=0), 200) is None


def test_the_turn_model_is_asked_again_only_where_more_silence_can_change_the_verdict() -> None:
    config = TurnConfig(patience_ms=1000, recheck_ms=100)
    sure = PauseText("What time is it?", 0.95)
    unsure_turn = complete_after_ms(0.3, sure, config, 200)  # 200 + 0.4 * 1000
    assert unsure_turn == pytest.approx(600)
    assert recheck_at_ms(0.3, unsure_turn, config, 200) == 300
    assert recheck_at_ms(0.3, unsure_turn, TurnConfig(recheck_ms=0), 200) is None  # off
    # Smart Turn sure, Whisper's final mark unsure: more silence will not change the text
    unsure_text = complete_after_ms(0.9, PauseText("What time is it?", 0.7), config, 200)
    assert recheck_at_ms(0.9, unsure_text, config, 200) is None
    assert recheck_at_ms(0.3, None, config, 200) is None  # not finished text: the long limit
    assert recheck_at_ms(0.48, 240.0, config, 200) is None  # ends before it would be asked


def test_the_recheck_is_asked_early_with_its_silence_made_up_but_ends_no_sooner() -> None:
    """At the pause (220 ms of silence heard) the recheck for 300 ms gets 80 ms more: a copy
    of the latest 80 ms of the silence; with only 100 ms heard, its latter 50 ms repeated; a
    verdict of "at the pause" then still waits for 300."""
    voice = np.arange(16000, dtype=np.int16)
    silence = (np.arange(3520) % 7 - 3).astype(np.int16)  # 220 ms of room noise
    window = np.concatenate([voice, silence])
    padded = recheck_window(window, 220, 300)
    assert padded.size == window.size + 1280  # 80 ms
    assert np.array_equal(padded[: window.size], window)
    assert np.array_equal(padded[window.size:], silence[-1280:])
    short = np.concatenate([voice, silence[:1600]])  # 100 ms heard
    assert np.array_equal(recheck_window(short, 100, 300)[short.size:],
                          np.resize(silence[800:1600], 3200))  # not the word's tail
    assert recheck_window(window, 320, 300) is window  # the silence is there: nothing made up
    config = TurnConfig(patience_ms=1000, recheck_ms=100)
    sure = PauseText("What time is it?", 0.95)
    assert rechecked_after_ms(0.9, sure, config, 200, 300) == 300  # not at 200
    assert rechecked_after_ms(0.3, sure, config, 200, 300) == pytest.approx(600)
    assert rechecked_after_ms(0.9, PauseText("I'd like to", 0.9), config, 200, 300) is None


@pytest.mark.parametrize(
    "kwargs",
    [{"model": "smart-turn-v9"}, {"threshold": 1.0}, {"max_silence_ms": 50}, {"threads": 0},
     {"sentence_end_threshold": 1.0}, {"patience_ms": -1}, {"sentence_end_span": 0.0},
     {"recheck_ms": -1}],
)
def test_config_is_validated(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidTurnConfigError):
        TurnConfig(**kwargs)  # type: ignore[arg-type]


def test_a_turn_ends_early_only_where_every_signal_is_sure() -> None:
    config = TurnConfig(early_end_confidence=0.9)
    sure = PauseText("What time is it?", 0.95)
    assert sure_early(0.95, sure, config)
    assert not sure_early(0.95, sure, TurnConfig())  # off by default
    assert not sure_early(0.85, sure, config)  # Smart Turn short of it
    assert not sure_early(0.95, PauseText("What time is it?", 0.85), config)  # the final mark
    assert not sure_early(0.95, PauseText("What time is it?", None), config)  # no score
    assert not sure_early(0.95, PauseText("I'd like to.", 0.99), config)  # reads unfinished
    assert not sure_early(None, sure, config) and not sure_early(0.95, None, config)
    with pytest.raises(InvalidTurnConfigError):
        TurnConfig(early_end_confidence=0.3)
