"""Endpointer and detectors on constructed frame sequences.

The endpointer logic is driven by a level detector (a frame is speech when its samples are
non-zero), so each sequence states exactly which frames are voiced; the real detectors
(webrtcvad, the noise-floor gate, silero) are then checked on synthetic voiced audio and noise.
The turn-model contract (pause -> verdict -> end, stale verdicts, the long limit) is pinned
here with scripted verdicts; `test_turn.py` runs the real model.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import lfilter

from engines.vad import (
    Endpointer,
    SpeechEnded,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    VadConfig,
    VadEvent,
    create_endpointer,
    create_vad,
)
from engines.vad.errors import InvalidInputError, InvalidVadConfigError
from tests.support.fakes import LevelDetector

SR = 16000


def seq(*parts: tuple[str, float]) -> np.ndarray:
    """('s', 0.5) = 0.5 s of 'speech' (a ramp, so positions are identifiable), ('q', x) quiet."""
    out = []
    for kind, dur in parts:
        n = round(dur * SR)
        if kind == "s":
            out.append((np.arange(n) % 1000 + 1).astype(np.int16))
        else:
            out.append(np.zeros(n, dtype=np.int16))
    return np.concatenate(out)


def run(
    audio: np.ndarray, config: VadConfig | None = None, push_ms: int = 20,
    max_silence_ms: int | None = None,
) -> list[tuple[float, VadEvent]]:
    """Push `audio` in `push_ms` pieces; return (stream time at the push's end, event)."""
    ep = Endpointer(config or VadConfig(), LevelDetector(), max_silence_ms)
    step = SR * push_ms // 1000
    events = []
    for i in range(0, audio.shape[0], step):
        event = ep.push(audio[i : i + step])
        if event is not None:
            events.append((min(i + step, audio.shape[0]) / SR, event))
    return events


def kinds(events: list[tuple[float, VadEvent]]) -> list[str]:
    return [type(e).__name__ for _, e in events]


def starts_ends(events: list[tuple[float, VadEvent]]) -> list[str]:
    return [k for k in kinds(events) if k in ("SpeechStarted", "SpeechEnded")]


def test_utterance_start_pause_and_end_after_hangover() -> None:
    """Without a turn model: the pause at 200 ms of silence, the end at today's 400 ms."""
    events = run(seq(("q", 1.0), ("s", 1.0), ("q", 1.0)))
    assert kinds(events) == ["SpeechStarted", "SpeechPaused", "SpeechEnded"]
    (t_start_push, start), (t_pause_push, pause), (t_end_push, end) = events
    assert isinstance(start, SpeechStarted) and isinstance(end, SpeechEnded)
    assert isinstance(pause, SpeechPaused)
    assert start.t == pytest.approx(1.0)
    # confirmed once min_speech_ms (150) of voice was heard
    assert t_start_push == pytest.approx(1.16, abs=0.021)
    assert pause.t == pytest.approx(2.0) and t_pause_push == pytest.approx(2.2, abs=0.021)
    assert pause.audio.size == 0  # no turn model: nothing to judge
    assert end.t == pytest.approx(2.0) and not end.forced and end.reason == "silence"
    # reported exactly when 400 ms of silence have passed
    assert t_end_push == pytest.approx(2.4, abs=0.021)


def test_pause_shorter_than_hangover_keeps_the_utterance() -> None:
    audio = seq(("q", 0.5), ("s", 0.6), ("q", 0.34), ("s", 0.6), ("q", 0.6))
    events = run(audio)
    assert kinds(events) == [
        "SpeechStarted", "SpeechPaused", "SpeechResumed", "SpeechPaused", "SpeechEnded"
    ]
    t_resumed, resumed = events[2]
    assert t_resumed == pytest.approx(0.5 + 0.6 + 0.34 + 0.04, abs=0.021)  # 2 of 3 frames
    # the resumed speech from its onset (and a frame before), for a listener that paused
    assert isinstance(resumed, SpeechResumed)
    assert resumed.silence_ms == pytest.approx(340, abs=21)  # the speaker's pause, measured
    onset = round(t_resumed * SR) - 4 * 320
    np.testing.assert_array_equal(resumed.audio, audio[onset : round(t_resumed * SR)])
    assert np.any(resumed.audio[: 3 * 320] == 0) and resumed.audio[-320:].all()
    first, second = events[1][1], events[3][1]
    assert isinstance(first, SpeechPaused) and isinstance(second, SpeechPaused)
    assert second.pause_id == first.pause_id + 1
    assert events[4][1].t == pytest.approx(0.5 + 0.6 + 0.34 + 0.6)


def test_gap_shorter_than_the_pause_is_no_event() -> None:
    events = run(seq(("q", 0.5), ("s", 0.6), ("q", 0.15), ("s", 0.6), ("q", 0.6)))
    assert kinds(events) == ["SpeechStarted", "SpeechPaused", "SpeechEnded"]


def test_pause_longer_than_hangover_splits_utterances() -> None:
    events = run(seq(("q", 0.5), ("s", 0.6), ("q", 0.5), ("s", 0.6), ("q", 0.6)))
    assert starts_ends(events) == ["SpeechStarted", "SpeechEnded"] * 2
    ends = [e for _, e in events if isinstance(e, SpeechEnded)]
    starts = [e for _, e in events if isinstance(e, SpeechStarted)]
    assert ends[0].t == pytest.approx(1.1)
    assert starts[1].t == pytest.approx(1.6)


def test_hangover_is_configurable() -> None:
    audio = seq(("q", 0.5), ("s", 0.6), ("q", 0.5), ("s", 0.6), ("q", 0.8))
    events = run(audio, VadConfig(end_silence_ms=700))
    assert starts_ends(events) == ["SpeechStarted", "SpeechEnded"]
    assert events[-1][0] == pytest.approx(0.5 + 0.6 + 0.5 + 0.6 + 0.7, abs=0.021)


def test_short_blips_never_start_speech() -> None:
    # 100 ms clicks every 300 ms: each shorter than min_speech_ms, separated by > start_gap_ms
    parts: list[tuple[str, float]] = []
    for _ in range(10):
        parts += [("s", 0.1), ("q", 0.2)]
    assert run(seq(*parts)) == []


def test_voice_with_short_gaps_accumulates_to_a_start() -> None:
    # 60 ms voiced / 60 ms gap: gaps below start_gap_ms, voice adds up to 150 ms
    parts: list[tuple[str, float]] = [("q", 0.2)] + [("s", 0.06), ("q", 0.06)] * 4
    events = run(seq(*parts, ("q", 1.0)))
    assert starts_ends(events) == ["SpeechStarted", "SpeechEnded"]
    assert events[0][1].t == pytest.approx(0.2)


def test_lone_voiced_frames_in_trailing_silence_do_not_hold_the_utterance() -> None:
    # steady clicks: 20 ms 'voice' every 100 ms after the utterance (like impulsive noise)
    parts: list[tuple[str, float]] = [("q", 0.3), ("s", 1.0)] + [("q", 0.08), ("s", 0.02)] * 8
    events = run(seq(*parts, ("q", 0.5)))
    assert kinds(events) == ["SpeechStarted", "SpeechPaused", "SpeechEnded"]
    assert events[2][1].t == pytest.approx(1.3)


def test_forced_end_at_max_length_then_restart() -> None:
    cfg = VadConfig(max_utterance_s=2.0)
    events = run(seq(("q", 0.2), ("s", 3.0), ("q", 1.0)), cfg)
    assert kinds(events) == [
        "SpeechStarted", "SpeechEnded", "SpeechStarted", "SpeechPaused", "SpeechEnded"
    ]
    forced = events[1][1]
    assert isinstance(forced, SpeechEnded) and forced.forced and forced.reason == "max_length"
    assert forced.t == pytest.approx(2.2)
    assert events[2][1].t == pytest.approx(2.2)  # still talking: a new utterance from there
    last = events[4][1]
    assert isinstance(last, SpeechEnded) and not last.forced and last.t == pytest.approx(3.2)


def test_start_audio_holds_pre_roll_through_end_of_push() -> None:
    audio = seq(("q", 1.0), ("s", 1.0), ("q", 0.5))
    ep = Endpointer(VadConfig(pre_roll_ms=300), LevelDetector())
    collected: list[np.ndarray] = []
    for i in range(0, audio.shape[0], 320):
        frame = audio[i : i + 320]
        event = ep.push(frame)
        if isinstance(event, SpeechStarted):
            collected.append(event.audio)
        elif collected:
            collected.append(frame)
        if isinstance(event, SpeechEnded):
            break
    utterance = np.concatenate(collected)
    first = int(0.7 * SR)
    np.testing.assert_array_equal(utterance, audio[first : first + utterance.shape[0]])
    assert utterance.shape[0] == int(0.3 * SR) + int(1.4 * SR)


def test_pre_roll_clipped_at_stream_start() -> None:
    events = run(seq(("q", 0.1), ("s", 0.5), ("q", 0.6)))
    start = events[0][1]
    assert isinstance(start, SpeechStarted)
    assert start.t == pytest.approx(0.1)
    assert start.audio.shape[0] == events[0][0] * SR  # all audio since the stream began


@pytest.mark.parametrize("push_ms", [10, 30, 40, 100])
@pytest.mark.parametrize("frame_ms", [10, 20, 30])
def test_push_size_and_frame_size_do_not_change_the_events(push_ms: int, frame_ms: int) -> None:
    audio = seq(("q", 0.62), ("s", 1.03), ("q", 0.31), ("s", 0.5), ("q", 0.9))
    events = run(audio, VadConfig(frame_ms=frame_ms), push_ms=push_ms)
    assert kinds(events) == [
        "SpeechStarted", "SpeechPaused", "SpeechResumed", "SpeechPaused", "SpeechEnded"
    ]
    assert events[0][1].t == pytest.approx(0.62, abs=frame_ms / 1000)
    assert events[1][1].t == pytest.approx(1.65, abs=frame_ms / 1000)
    assert events[4][1].t == pytest.approx(2.46, abs=frame_ms / 1000)


def test_one_long_push_gives_all_events_via_process_or_one_per_push() -> None:
    audio = seq(("q", 0.3), ("s", 0.5), ("q", 0.6), ("s", 0.5), ("q", 0.6))
    ep = Endpointer(VadConfig(), LevelDetector())
    once = ["SpeechStarted", "SpeechPaused", "SpeechEnded"]
    assert kinds([(0.0, e) for e in ep.process(audio)]) == once * 2

    ep = Endpointer(VadConfig(), LevelDetector())
    first = ep.push(audio)
    assert isinstance(first, SpeechStarted)
    pad = np.zeros(320, dtype=np.int16)
    rest = [ep.push(pad) for _ in range(5)]
    assert [type(e).__name__ for e in rest] == once[1:] + once
    held = rest[2]
    assert isinstance(held, SpeechStarted)
    # the held start's audio runs through the pushes it waited for
    assert held.audio.shape[0] == audio.shape[0] - round((1.4 - 0.5) * SR) + 3 * 320


def test_trailing_silence_reports_the_pause_as_it_grows() -> None:
    ep = Endpointer(VadConfig(), LevelDetector())
    seen = []
    audio = seq(("q", 0.2), ("s", 0.5), ("q", 0.5))
    for i in range(0, audio.shape[0], 320):
        ep.push(audio[i : i + 320])
        seen.append(ep.trailing_silence_ms)
    assert max(seen) == 380  # the next frame reaches 400 ms and ends the utterance
    assert seen[-1] == 0 and not ep.in_speech


def test_reset_restarts_stream_time() -> None:
    ep = Endpointer(VadConfig(), LevelDetector())
    ep.process(seq(("s", 0.5)))
    assert ep.in_speech
    ep.reset()
    assert not ep.in_speech and ep.time == 0.0
    events = ep.process(seq(("q", 0.2), ("s", 0.3)))
    assert events[0].t == pytest.approx(0.2)


# --- the turn-model contract: pause -> verdict -> end -------------------------------------

class Scripted:
    """Drives an endpointer in 20 ms pushes and answers each pause with a scripted verdict."""

    def __init__(self, verdicts: list[bool | None], max_silence_ms: int = 1500) -> None:
        self.ep = Endpointer(VadConfig(), LevelDetector(), max_silence_ms)
        self.verdicts = list(verdicts)
        self.events: list[tuple[float, VadEvent]] = []

    def play(self, audio: np.ndarray) -> list[tuple[float, VadEvent]]:
        for i in range(0, audio.shape[0], 320):
            event = self.ep.push(audio[i : i + 320])
            now = min(i + 320, audio.shape[0]) / SR
            if event is None:
                continue
            self.events.append((now, event))
            if isinstance(event, SpeechPaused) and self.verdicts:
                verdict = self.verdicts.pop(0)
                if verdict is not None:
                    ended = self.ep.verdict(event.pause_id, verdict)
                    if ended is not None:
                        self.events.append((now, ended))
        return self.events


def test_complete_verdict_ends_the_turn_at_the_short_pause() -> None:
    events = Scripted([True]).play(seq(("q", 0.5), ("s", 1.0), ("q", 2.0)))
    assert kinds(events) == ["SpeechStarted", "SpeechPaused", "SpeechEnded"]
    (_, _), (t_pause, pause), (t_end, end) = events
    assert isinstance(pause, SpeechPaused) and isinstance(end, SpeechEnded)
    assert end.reason == "complete" and not end.forced
    assert end.t == pytest.approx(1.5)  # the end of the voice, not of the check
    assert t_end == t_pause == pytest.approx(1.7, abs=0.021)  # 200 ms pause, not 400 ms


def test_incomplete_verdict_keeps_listening_up_to_the_long_limit() -> None:
    events = Scripted([False]).play(seq(("q", 0.5), ("s", 1.0), ("q", 2.0)))
    assert kinds(events) == ["SpeechStarted", "SpeechPaused", "SpeechEnded"]
    t_end, end = events[-1]
    assert isinstance(end, SpeechEnded) and end.reason == "silence"
    assert end.t == pytest.approx(1.5) and t_end == pytest.approx(3.0, abs=0.021)


def test_incomplete_then_speech_continues_in_the_same_utterance() -> None:
    """The bug the turn model fixes: "I'd like to ... transfer money" cut at 400 ms."""
    audio = seq(("q", 0.5), ("s", 0.8), ("q", 0.8), ("s", 1.0), ("q", 2.0))
    events = Scripted([False, True]).play(audio)
    assert kinds(events) == [
        "SpeechStarted", "SpeechPaused", "SpeechResumed", "SpeechPaused", "SpeechEnded"
    ]
    end = events[-1][1]
    assert isinstance(end, SpeechEnded) and end.reason == "complete"
    assert end.t == pytest.approx(3.1)
    # today's fixed hangover cuts the same audio in two
    assert starts_ends(run(audio)) == ["SpeechStarted", "SpeechEnded"] * 2


def test_no_verdict_ends_at_the_long_limit() -> None:
    events = Scripted([None], max_silence_ms=900).play(seq(("q", 0.5), ("s", 1.0), ("q", 2.0)))
    t_end, end = events[-1]
    assert isinstance(end, SpeechEnded) and end.reason == "silence"
    assert t_end == pytest.approx(1.5 + 0.9, abs=0.021)


def test_verdict_after_speech_resumed_is_stale_and_dropped() -> None:
    ep = Endpointer(VadConfig(), LevelDetector(), 1500)
    pauses = [e for e in ep.process(seq(("q", 0.5), ("s", 1.0), ("q", 0.3)))
              if isinstance(e, SpeechPaused)]
    assert len(pauses) == 1
    resumed = ep.process(seq(("s", 0.1)))  # the user goes on while the model is running
    assert [type(e) for e in resumed] == [SpeechResumed]
    assert ep.verdict(pauses[0].pause_id, True) is None  # late "complete": dropped
    assert ep.in_speech
    later = ep.process(seq(("s", 0.5), ("q", 0.3)))
    (pause,) = later
    assert isinstance(pause, SpeechPaused)
    assert ep.verdict(pauses[0].pause_id, True) is None  # still stale for the new pause
    ended = ep.verdict(pause.pause_id, True)
    assert isinstance(ended, SpeechEnded) and ended.t == pytest.approx(2.4)
    assert ep.verdict(pause.pause_id, True) is None


def test_pause_carries_the_utterance_window_for_the_turn_model() -> None:
    audio = seq(("q", 1.0), ("s", 3.0), ("q", 0.2))
    ep = Endpointer(VadConfig(), LevelDetector(), 1500)
    (pause,) = [e for e in ep.process(audio) if isinstance(e, SpeechPaused)]
    # from the pre-roll (500 ms before the onset at 1.0 s) through the 200 ms of pause
    np.testing.assert_array_equal(pause.audio, audio[int(0.5 * SR) :])
    long = seq(("q", 0.5), ("s", 10.0), ("q", 0.2))
    ep = Endpointer(VadConfig(max_utterance_s=30.0), LevelDetector(), 1500)
    (pause,) = [e for e in ep.process(long) if isinstance(e, SpeechPaused)]
    np.testing.assert_array_equal(pause.audio, long[-8 * SR :])  # the model reads 8 s


def test_endpointer_without_turn_model_ignores_the_long_limit() -> None:
    events = run(seq(("q", 0.5), ("s", 1.0), ("q", 2.0)))
    assert events[-1][0] == pytest.approx(1.9, abs=0.021)  # 400 ms, not 1.5 s
    with pytest.raises(InvalidVadConfigError):
        Endpointer(VadConfig(), LevelDetector(), max_silence_ms=200)  # not after the pause


@pytest.mark.parametrize(
    "bad",
    [np.zeros(320, dtype=np.float32), np.zeros((320, 2), dtype=np.int16), [0] * 320],
)
def test_bad_frames_raise_typed_errors(bad: object) -> None:
    ep = create_endpointer()
    with pytest.raises(InvalidInputError):
        ep.push(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [{"aggressiveness": 4}, {"frame_ms": 25}, {"end_silence_ms": 5},
     {"max_utterance_s": 0.0}, {"silero_threshold": 1.5}, {"pause_ms": 5},
     {"pause_ms": 400, "end_silence_ms": 400}],
)
def test_config_is_validated(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidVadConfigError):
        VadConfig(**kwargs)  # type: ignore[arg-type]


# --- real detectors on synthetic audio ---------------------------------------------------

def vowel(dur: float, f0: float = 120.0, amp: float = 0.3) -> np.ndarray:
    """A glottal pulse train through three formant resonators: webrtcvad hears it as voice."""
    n = int(dur * SR)
    t = np.arange(n) / SR
    phase = np.cumsum(2 * np.pi * f0 * (1 + 0.03 * np.sin(2 * np.pi * 5 * t)) / SR)
    y = (np.diff(np.floor(phase / (2 * np.pi)), prepend=0) > 0).astype(float)
    for f, bw in ((700, 80), (1200, 90), (2600, 120)):
        r, th = np.exp(-np.pi * bw / SR), 2 * np.pi * f / SR
        y = lfilter([1.0], [1.0, -2 * r * np.cos(th), r * r], y)
    return (y / np.abs(y).max() * amp * 32767).astype(np.int16)


def white(dur: float, dbfs: float, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(int(dur * SR)) * 10 ** (dbfs / 20) * 32767
    return np.clip(x, -32768, 32767).astype(np.int16)


def endpoint(audio: np.ndarray, config: VadConfig) -> list[VadEvent]:
    ep = create_endpointer(config)
    out = []
    for i in range(0, audio.shape[0], 320):
        event = ep.push(audio[i : i + 320])
        if event is not None:
            out.append(event)
    return out


def test_webrtcvad_endpoints_a_synthetic_vowel() -> None:
    q = np.zeros(SR, dtype=np.int16)
    events = endpoint(np.concatenate([q, vowel(1.0), q]), VadConfig())
    assert [type(e).__name__ for e in events] == ["SpeechStarted", "SpeechPaused", "SpeechEnded"]
    assert events[0].t == pytest.approx(1.0, abs=0.05)
    assert events[2].t == pytest.approx(2.0, abs=0.05)


def test_steady_loud_noise_fools_plain_webrtcvad_but_not_the_gate() -> None:
    noise = white(4.0, -20.0)
    # without the gate, webrtcvad calls every frame of -20 dBFS white noise speech
    assert [type(e).__name__ for e in endpoint(noise, VadConfig(noise_gate_db=0))] == [
        "SpeechStarted"
    ]
    assert endpoint(noise, VadConfig()) == []


def test_vowel_in_steady_noise_is_still_endpointed() -> None:
    q = np.zeros(SR, dtype=np.int16)
    clean = np.concatenate([q, vowel(1.0), q, q])
    noisy = np.clip(clean.astype(np.int32) + white(clean.shape[0] / SR, -35.0), -32768, 32767)
    events = endpoint(noisy.astype(np.int16), VadConfig())
    assert [type(e).__name__ for e in events] == ["SpeechStarted", "SpeechPaused", "SpeechEnded"]
    assert events[2].t == pytest.approx(2.0, abs=0.1)


def test_silero_confirmation_rejects_noise_and_silence() -> None:
    cfg = VadConfig(silero_confirm=True, noise_gate_db=0)
    assert endpoint(white(3.0, -20.0), cfg) == []
    assert endpoint(np.zeros(3 * SR, dtype=np.int16), cfg) == []


def test_detector_rejects_wrong_frame_sizes() -> None:
    vad = create_vad()
    assert vad.is_speech(np.zeros(480, dtype=np.int16)) is False
    with pytest.raises(InvalidInputError):
        vad.is_speech(np.zeros(400, dtype=np.int16))


def test_a_sure_verdict_before_the_pause_ends_the_utterance_in_that_silence_only() -> None:
    ep = Endpointer(VadConfig(), LevelDetector(), 1500)
    assert ep.end_early() is None  # no utterance
    ep.process(seq(("q", 0.5), ("s", 1.0)))
    assert ep.end_early() is None  # the user is speaking
    assert ep.process(seq(("q", 0.1))) == []  # 100 ms of silence: no pause yet
    ended = ep.end_early()
    assert isinstance(ended, SpeechEnded) and ended.reason == "complete"
    assert ended.t == pytest.approx(1.5) and not ep.in_speech
    assert ep.process(seq(("q", 1.0))) == []  # nothing more from that utterance
    # once the pause is reported, only its verdict ends the turn
    ep.process(seq(("s", 1.0), ("q", 0.3)))
    assert ep.end_early() is None and ep.in_speech
