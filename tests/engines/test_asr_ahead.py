"""The early pause decode: when in a silence it is asked for, with what silence, and (on the
real Whisper stream) that the pause then reuses it and the stream keeps only real audio."""

from __future__ import annotations

import numpy as np
import pytest

from engines.asr import AsrConfig
from engines.asr.ahead import DecodeAhead
from engines.asr.streaming import WhisperStream, WhisperStreamingASR
from engines.asr.whisper_runner import Decoded
from engines.vad import VadConfig
from engines.vad.errors import InvalidVadConfigError
from testkit.speech import synth, voiced_bounds

SR = 16000
FRAME = 320  # 20 ms


def frame(value: int) -> np.ndarray:
    return np.full(FRAME, value, np.int16)


def test_it_asks_at_decode_ahead_ms_for_the_rest_of_the_pause_once_per_silence() -> None:
    ahead = DecodeAhead(80, 200)
    assert ahead.step(frame(9), 0) is None  # speech
    rests = [ahead.step(frame(v), 20 * i) for i, v in enumerate((4, 1, 3, 2), 1)]
    assert rests[:3] == [None, None, None] and rests[3] is not None
    rest = rests[3]
    # the pause's missing 120 ms, made of the quietest frame heard (the noise floor)
    assert rest.shape[0] == 120 * SR // 1000 and set(np.unique(rest)) == {1}
    assert all(ahead.step(frame(0), ms) is None for ms in (100, 120, 140))  # asked once
    assert ahead.step(frame(9), 0) is None  # speech again: the next silence asks again
    assert [ahead.step(frame(1), 20 * i) is not None for i in range(1, 5)] == [0, 0, 0, 1]


def test_the_rest_is_the_room_as_it_sounded_before_the_utterance() -> None:
    ahead = DecodeAhead(80, 200)
    # SpeechStarted's audio: the pre-roll (the end of an earlier utterance, then the room),
    # then the onset
    before, room, voice = (np.full(n, v, np.int16) for n, v in ((SR // 5, 700), (SR // 4, 5),
                                                                (SR // 5, 900)))
    ahead.start(np.concatenate([before, room, voice]))
    rests = [ahead.step(frame(1), 20 * i) for i in range(1, 5)]
    rest = rests[3]
    assert rest is not None and rest.shape[0] == 120 * SR // 1000 and (rest == 5).all()


def test_a_short_gap_asks_nothing() -> None:
    ahead = DecodeAhead(80, 200)
    assert [ahead.step(frame(1), ms) for ms in (20, 40, 60, 0, 20)] == [None] * 5


@pytest.mark.parametrize("ms", [0, 200, 300])
def test_off_or_not_before_the_pause_asks_nothing(ms: int) -> None:
    ahead = DecodeAhead(ms, 200)
    assert not ahead.enabled
    assert all(ahead.step(frame(1), t) is None for t in (0, 20, 80, 180, 400))


def test_the_option_must_come_before_the_pause() -> None:
    assert VadConfig(decode_ahead_ms=0).decode_ahead_ms == 0
    with pytest.raises(InvalidVadConfigError, match="decode_ahead_ms"):
        VadConfig(pause_ms=200, decode_ahead_ms=200)
    with pytest.raises(InvalidVadConfigError, match="decode_ahead_ms"):
        VadConfig(decode_ahead_ms=-1)


class _SlowRunner:
    """A Whisper stand-in whose every decode takes `seconds` (as reported)."""

    max_audio_s = 27.0

    def __init__(self, seconds: float) -> None:
        self.seconds, self.calls = seconds, 0

    def decode(self, pcm: np.ndarray, prompt: str | None = None) -> Decoded:
        self.calls += 1
        return Decoded("words.", "en", 0.0, 0.0, 0.9, self.seconds)

    def accept(self, decoded: Decoded, prompt: str | None = None) -> str:
        return decoded.text


def test_early_decodes_share_the_partials_cpu_cap() -> None:
    """Speech in noise pauses often for 80 ms: past the cap the decode waits for the pause."""
    runner = _SlowRunner(0.4)
    stream = WhisperStream(runner, AsrConfig(speech_gate=False))  # type: ignore[arg-type]
    stream.feed(np.ones(SR, np.int16))  # 1 s: one partial, 0.4 s of decoding: over 35%
    assert runner.calls == 1
    stream.decode_ahead(np.zeros(1920, np.int16))
    assert runner.calls == 1  # skipped: the pause will decode
    stream.feed(np.ones(2 * SR, np.int16))  # 3 s heard, 0.8 s decoded: under the cap again
    calls = runner.calls
    stream.decode_ahead(np.zeros(1920, np.int16))
    assert runner.calls == calls + 1


def test_feed_without_partial_takes_the_audio_and_decodes_nothing() -> None:
    """The silence after a word comes with partial=False: the pause decode is due soon."""
    runner = _SlowRunner(0.01)
    stream = WhisperStream(runner, AsrConfig(speech_gate=False))  # type: ignore[arg-type]
    assert stream.feed(np.ones(2 * SR, np.int16), partial=False) is None
    assert runner.calls == 0
    assert stream.feed(np.ones(320, np.int16)) == "words."  # speech again: the partial is due
    assert runner.calls == 1
    stream.feed(np.zeros(1600, np.int16), partial=False)
    assert runner.calls == 1
    assert stream.pause().text == "words."  # the pause decodes what came since
    assert runner.calls == 2


@pytest.mark.slow
def test_whisper_reuses_the_early_decode_at_the_pause_and_keeps_real_audio() -> None:
    """The speech goes in without a partial decode: a partial's cost counts against the CPU
    cap that the early decode shares, so on a busy machine (a slow partial) the early decode
    was skipped and the pause decoded again (`assert 2 == 1` beside another CPU job)."""
    asr = WhisperStreamingASR(AsrConfig(speech_gate=False))
    speech = synth("What time does the bank open?", engine="piper")
    first, last = voiced_bounds(speech)
    voice = speech[first:last]
    quiet = np.zeros(int(0.2 * SR), np.int16)

    stream = asr.open()
    stream.feed(voice, partial=False)
    stream.feed(quiet[: int(0.08 * SR)], partial=False)
    stream.decode_ahead(quiet[int(0.08 * SR) :])  # the rest of the pause, not kept
    decodes = stream.decodes
    stream.feed(quiet[int(0.08 * SR) :])  # the real silence arrives: no partial decode
    paused = stream.pause()
    assert stream.decodes == decodes  # the pause found its decode done
    assert "time" in paused.text.lower() and "bank" in paused.text.lower()

    # speech before the pause: the early text was a partial; the stream has the real audio
    again = asr.open()
    again.feed(voice, partial=False)
    again.feed(quiet[: int(0.08 * SR)], partial=False)
    again.decode_ahead(quiet[int(0.08 * SR) :])
    more = synth("Is it open on Saturday?", engine="piper")
    start, end = voiced_bounds(more)
    again.feed(more[start:end])
    again.feed(quiet)
    text = again.pause().text.lower()
    assert "bank" in text and "saturday" in text, text  # both, from the audio as it was


def test_the_rest_reaches_the_frame_the_pause_comes_on() -> None:
    """pause_ms 150 in 20 ms frames: the pause comes at 160 ms of silence, so an early decode
    at 60 ms carries 100 ms more (with 90 the stream was 10 ms short at the pause and decoded
    it all again: the pause's text ~100 ms later on the H200)."""
    ahead = DecodeAhead(60, 150)
    room = np.full(SR, 3, np.int16)
    ahead.start(np.concatenate([room, np.full(SR // 5, 900, np.int16)]))
    rests = [ahead.step(frame(1), 20 * i) for i in range(1, 4)]
    rest = rests[2]
    assert rest is not None and rest.shape[0] == 100 * SR // 1000 and (rest == 3).all()
