"""The server's hearing with fake engines: the turn model off the loop, its verdict fed back,
stale verdicts dropped, the long limit without a verdict, and the ASR stream driven by the
endpointer (feed, pause, finish; no silence fed after a pause).

A level detector (`tests.support.fakes`) stands in for webrtcvad (a frame is speech when it is
not all zeros), so the audio states exactly where the user speaks; frames are pushed faster
than real time, and a test waits only where the verdict has to come back from the turn
executor.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable

import numpy as np
import pytest

from engines.asr.base import PauseText
from engines.turn import TurnConfig
from engines.vad import VadConfig
from engines.vad.gate import frame_dbfs
from media.clock import MediaClock
from rtc_server.engine_set import Pools
from rtc_server.events import HEARING_MARKS
from rtc_server.hearing import Hearing, Utterance
from rtc_server.tasks import TaskSet
from tests.support.fakes import FakeASR, use_level_detector

SR = 16000
FRAME = 320


class FakeStream:
    """Scripted texts, the next one for each pause decode; like the real stream, a `pause()`
    finds its decode done when a `decode_ahead(rest)` covered everything fed since."""

    def __init__(self, texts: list[str], mark: float = 0.95) -> None:
        self.ops: list[tuple[str, int]] = []  # (call, samples fed with it)
        self.mark = mark  # Whisper's probability for a final mark the texts end with
        self.partial_flags: list[bool] = []  # feed's `partial`, per feed
        self.partial_text: str | None = None  # what a partial decode returns (None: nothing)
        self._texts = texts
        self.decodes = 0
        self._fed = 0
        self._covered = -1  # samples the latest decode covered
        self.hold = threading.Event()  # cleared: an early decode waits (a slow decode)
        self.hold.set()

    def feed(self, pcm: np.ndarray, partial: bool = True) -> str | None:
        self.ops.append(("feed", pcm.shape[0]))
        self.partial_flags.append(partial)
        self._fed += pcm.shape[0]
        return self.partial_text if partial else None

    def decode_ahead(self, rest: np.ndarray) -> PauseText | None:
        self.ops.append(("ahead", rest.shape[0]))
        self.hold.wait(5)
        self.decodes += 1
        self._covered = self._fed + rest.shape[0]
        text = self._texts[min(self.decodes - 1, len(self._texts) - 1)]
        return PauseText(text, self.mark if text.endswith((".", "?")) else 0.0)

    def pause(self) -> PauseText:
        if self._covered < self._fed:
            self.decodes += 1
            self._covered = self._fed
        self.ops.append(("pause", 0))
        text = self._texts[min(self.decodes - 1, len(self._texts) - 1)]
        return PauseText(text, self.mark if text.endswith((".", "?")) else 0.0)

    def finish(self) -> str:
        self.ops.append(("finish", 0))
        return self._texts[-1]

    @property
    def pauses(self) -> int:
        return sum(op == "pause" for op, _ in self.ops)

    def fed_after_last_pause(self) -> int:
        last = max(i for i, (op, _) in enumerate(self.ops) if op == "pause")
        return sum(n for op, n in self.ops[last:] if op == "feed")


class FakeTurnModel:
    """Scripted probabilities; `hold` blocks the call (a slow model) until released."""

    def __init__(self, probabilities: list[float], hold: bool = False) -> None:
        self._probabilities = probabilities
        self.calls = 0
        self.sizes: list[int] = []  # samples of each call's window
        self.answered = 0
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self.fail = False

    def complete_probability(self, pcm16k: np.ndarray) -> float:
        self.calls += 1
        self.sizes.append(pcm16k.size)
        assert pcm16k.size > 0  # the endpointer hands over the utterance window
        self.release.wait(5)
        self.answered += 1
        if self.fail:
            raise RuntimeError("turn model exploded")
        return self._probabilities[min(self.calls - 1, len(self._probabilities) - 1)]


class FakeTextEnd:
    """A scripted text-end probe (engines/turn/text_end.py) that records what it read;
    `release` cleared: it answers only once set (a slow probe)."""

    def __init__(self, probability: float, fail: bool = False) -> None:
        self.probability_ = probability
        self.fail = fail
        self.texts: list[str] = []
        self.answered = 0
        self.release = asyncio.Event()
        self.release.set()

    async def probability(self, text: str) -> float:
        self.texts.append(text)
        await self.release.wait()
        self.answered += 1
        if self.fail:
            raise RuntimeError("probe exploded")
        return self.probability_


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.finals: list[Utterance] = []
        self.final = asyncio.Event()
        self.levels: list[float | None] = []  # as each voiced frame reported it

    def on_speech_start(self, utterance_id: int) -> None:
        self.calls.append(("start", utterance_id))

    def on_voice(
        self, utterance_id: int, voiced_ms: float, level_db: float | None = None
    ) -> None:
        self.levels.append(level_db)

    def on_partial(self, utterance_id: int, text: str) -> None: ...

    def on_early_text(self, utterance_id: int, text: str) -> None:
        self.calls.append(("early", text))

    def on_pause(self, utterance_id: int, text: str) -> None:
        self.calls.append(("pause", text))

    def on_resume(self, utterance_id: int) -> None:
        self.calls.append(("resume", utterance_id))

    def on_final(self, utterance: Utterance) -> None:
        self.calls.append(("final", utterance.text))
        self.finals.append(utterance)
        self.final.set()


class Rig:
    def __init__(
        self, asr: FakeASR[FakeStream], model: FakeTurnModel | None, turn: TurnConfig,
        vad: VadConfig, text_end: FakeTextEnd | None = None,
    ) -> None:
        self.asr, self.model = asr, model
        self.clock = MediaClock()
        self.clock.start()
        self.pools, self.tasks = Pools(), TaskSet("test")
        self.listener = Recorder()
        self.errors: list[str] = []
        self.hearing = Hearing(
            asr=asr, vad=vad, turn=turn, turn_model=model, text_end=text_end, clock=self.clock,
            pools=self.pools, tasks=self.tasks, listener=self.listener,
            on_error=lambda kind, exc: self.errors.append(kind),
        )

    def say(self, seconds: float, gain: float = 1.0) -> None:
        self._push(((np.arange(int(seconds * SR)) % 1000 + 1) * gain).astype(np.int16))

    def quiet(self, seconds: float) -> None:
        self._push(np.zeros(int(seconds * SR), np.int16))

    def _push(self, audio: np.ndarray) -> None:
        for i in range(0, audio.shape[0], FRAME):
            self.hearing.push(audio[i : i + FRAME])

    async def close(self) -> None:
        await self.tasks.cancel_all()
        self.pools.shutdown()


async def until(predicate: Callable[[], bool], within_s: float = 3.0) -> None:
    async with asyncio.timeout(within_s):
        while not predicate():  # noqa: ASYNC110 - observing worker threads from the test
            await asyncio.sleep(0.005)


@pytest.fixture(autouse=True)
def level_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    use_level_detector(monkeypatch)


@pytest.fixture
async def rigs() -> AsyncIterator[list[Rig]]:
    made: list[Rig] = []
    yield made
    for rig in made:
        await rig.close()


def rig(rigs: list[Rig], texts: list[str], model: FakeTurnModel | None,
        turn: TurnConfig | None = None, vad: VadConfig | None = None) -> Rig:
    rigs.append(Rig(FakeASR(lambda: FakeStream(texts)), model, turn or TurnConfig(),
                    vad or VadConfig()))
    return rigs[-1]


async def settle(r: Rig) -> None:
    """Let the verdict for the latest pause come back to the loop (model and lane both)."""
    model = r.model
    assert model is not None
    await until(lambda: model.calls > 0 and model.answered == model.calls
                and bool(r.asr.streams) and r.asr.streams[-1].pauses >= model.calls)
    for _ in range(3):
        await asyncio.sleep(0)


async def paused(r: Rig) -> Rig:
    """`r` after the room, a second of speech and the 200 ms pause, its verdict back."""
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)
    await settle(r)
    return r


async def no_final_yet(r: Rig) -> None:
    """What the loop has to run has run, and the turn is still open."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert not r.listener.finals


async def test_complete_ends_the_turn_at_the_short_pause(rigs: list[Rig]) -> None:
    r = rig(rigs, ["What time is it?"], FakeTurnModel([0.9]))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)  # the pause: the model and the pause decode start
    await asyncio.wait_for(r.listener.final.wait(), 3)
    (final,) = r.listener.finals
    assert final.reason == "complete" and not final.forced and final.text == "What time is it?"
    assert r.listener.calls == [("start", 1), ("early", "What time is it?"),
                                ("pause", "What time is it?"), ("final", "What time is it?")]
    assert r.asr.streams[0].ops[-2:] == [("pause", 0), ("finish", 0)]  # the final reused it


async def test_incomplete_keeps_listening_until_the_long_limit(rigs: list[Rig]) -> None:
    r = rig(rigs, ["I'd like to"], FakeTurnModel([0.2]))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)
    await settle(r)
    r.quiet(1.0)
    assert not r.listener.finals  # 1.2 s of silence: still the user's turn
    r.quiet(0.3)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert r.listener.finals[0].reason == "silence"
    # The evidence came in, but asked for no silence: the long limit ended the turn.
    assert set(r.listener.finals[0].marks) == {
        "pause", "decode_start", "ahead_done", "turn_model", "pause_text"}


async def test_complete_sound_with_unfinished_words_keeps_listening(rigs: list[Rig]) -> None:
    """The model alone called 80% of mid-sentence pauses complete on our test voices; the
    pause text ("I'd like to") vetoes it."""
    r = rig(rigs, ["I'd like to", "I'd like to transfer some money."], FakeTurnModel([0.95]))
    r.quiet(0.3)
    r.say(0.8)
    r.quiet(0.2)
    await settle(r)
    r.quiet(0.5)
    r.say(1.0)  # "... transfer some money."
    r.quiet(0.2)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert [u.text for u in r.listener.finals] == ["I'd like to transfer some money."]
    assert r.listener.finals[0].reason == "complete"
    assert ("resume", 1) in r.listener.calls


async def test_verdict_arriving_after_speech_resumed_is_dropped(rigs: list[Rig]) -> None:
    model = FakeTurnModel([0.95, 0.95], hold=True)
    r = rig(rigs, ["Could you tell me?", "Could you tell me the way?"], model,
            TurnConfig(text_check=False))
    r.quiet(0.3)
    r.say(0.8)
    r.quiet(0.2)  # pause 1: the model is slow
    await until(lambda: model.calls == 1)
    r.say(0.6)  # the user goes on before the verdict
    model.release.set()
    await until(lambda: model.answered == 1)
    for _ in range(3):
        await asyncio.sleep(0)
    assert not r.listener.finals  # the late "complete" for pause 1 ended nothing
    r.quiet(0.2)  # pause 2
    await asyncio.wait_for(r.listener.final.wait(), 3)
    (final,) = r.listener.finals
    assert final.reason == "complete" and final.text == "Could you tell me the way?"
    assert model.calls == 2


async def test_failing_turn_model_falls_back_to_the_long_limit(rigs: list[Rig]) -> None:
    model = FakeTurnModel([0.9])
    model.fail = True
    r = rig(rigs, ["Hello."], model)
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)
    await until(lambda: model.answered == 1 and bool(r.errors))
    r.quiet(1.4)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert r.errors == ["turn_model_failed"] and r.listener.finals[0].reason == "silence"


async def test_without_a_turn_model_the_hangover_ends_the_turn(rigs: list[Rig]) -> None:
    r = rig(rigs, ["Hello there."], None, TurnConfig(model="none"))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.38)
    await until(lambda: bool(r.asr.streams) and r.asr.streams[0].decodes == 1)
    await until(lambda: ("pause", "Hello there.") in r.listener.calls)
    assert not r.listener.finals
    r.quiet(0.04)  # 400 ms of silence
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert r.listener.finals[0].reason == "silence"


async def test_silence_after_a_pause_is_not_fed_and_speech_after_it_is(
    rigs: list[Rig],
) -> None:
    r = rig(rigs, ["one", "one two"], FakeTurnModel([0.1]))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.6)
    await settle(r)
    stream = r.asr.streams[0]

    def fed() -> int:
        return sum(n for op, n in stream.ops if op == "feed")

    assert stream.fed_after_last_pause() == 0  # the pause's silence stays out of the ASR
    assert fed() == int((0.3 + 1.0 + 0.2) * SR)  # up to the pause, not the 400 ms after it
    r.say(0.5)
    # speech again: fed from its onset (with 40 ms of the pause before it), nothing lost
    await until(lambda: fed() == int((0.3 + 1.0 + 0.2 + 0.04 + 0.5) * SR))
    r.quiet(1.6)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    # the long limit ended it; the final is the second pause's decode (nothing fed since)
    assert stream.ops[-2:] == [("pause", 0), ("finish", 0)]


@pytest.mark.parametrize("ahead_ms", [80, 0])
async def test_the_pause_decode_runs_before_the_pause_and_is_reused_at_it(
    rigs: list[Rig], ahead_ms: int
) -> None:
    r = rig(rigs, ["What time is it?"], FakeTurnModel([0.9]), vad=VadConfig(
        pause_ms=200, decode_ahead_ms=ahead_ms))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.1)  # 100 ms into the silence: no pause yet
    await until(lambda: bool(r.asr.streams) and len(r.asr.streams[0].ops) > 0)
    stream = r.asr.streams[0]
    if ahead_ms:
        await until(lambda: stream.decodes == 1)  # decoded already, as if 200 ms were heard
        assert ("ahead", int((0.2 - ahead_ms / 1000) * SR)) in stream.ops
    await asyncio.sleep(0.05)
    assert ("pause", "What time is it?") not in r.listener.calls  # (the listener waits)
    assert stream.decodes == (1 if ahead_ms else 0)
    r.quiet(0.1)  # the pause
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert r.listener.finals[0].reason == "complete"
    # one decode in all: at the pause nothing new had been fed, so its text was reused
    assert stream.decodes == 1 and stream.fed_after_last_pause() == 0
    assert sum(n for op, n in stream.ops if op == "feed") == int((0.3 + 1.0 + 0.2) * SR)


async def test_the_early_decode_s_text_reaches_the_listener_before_the_pause(
    rigs: list[Rig],
) -> None:
    r = rig(rigs, ["What time is it?"], FakeTurnModel([0.9]))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.1)  # past decode_ahead_ms (80), before the pause (200)
    await until(lambda: ("early", "What time is it?") in r.listener.calls)
    assert not any(kind == "pause" for kind, _ in r.listener.calls)
    r.quiet(0.1)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert [kind for kind, _ in r.listener.calls] == ["start", "early", "pause", "final"]


async def test_an_early_text_overtaken_by_speech_is_not_reported(rigs: list[Rig]) -> None:
    """The user spoke again while the early decode ran: its text is only a partial."""
    r = rig(rigs, ["What time", "What time is it?"], FakeTurnModel([0.9]))
    streams = r.asr.streams
    r.quiet(0.3)
    r.say(0.6)
    await until(lambda: bool(streams))
    streams[0].hold.clear()
    r.quiet(0.1)  # the early decode starts, and waits
    await until(lambda: ("ahead", int(0.12 * SR)) in streams[0].ops)
    r.say(0.5)  # ... while the user goes on
    streams[0].hold.set()
    r.quiet(0.4)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert [c for c in r.listener.calls if c[0] == "early"] == [("early", "What time is it?")]
    assert r.listener.finals[0].text == "What time is it?"


async def test_speech_after_an_early_decode_is_all_fed_and_decoded_again(
    rigs: list[Rig],
) -> None:
    """A gap of 100-180 ms is no pause: the early decode was a partial, every frame reaches
    the ASR, and the pause that follows decodes again."""
    r = rig(rigs, ["What time", "What time is it?"], FakeTurnModel([0.9]))
    r.quiet(0.3)
    r.say(0.6)
    r.quiet(0.14)  # early decode at 80 ms, then the user goes on
    r.say(0.5)
    r.quiet(0.4)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    stream = r.asr.streams[0]
    assert [op for op, _ in stream.ops].count("ahead") == 2  # one per silence run
    assert sum(n for op, n in stream.ops if op == "feed") == int((0.3 + 0.6 + 0.14 + 0.5 + 0.2)
                                                                 * SR)
    assert stream.decodes == 2 and r.listener.finals[0].text == "What time is it?"
    assert r.listener.finals[0].reason == "complete"


@pytest.mark.parametrize("check_ahead", [True, False])
async def test_the_turn_model_is_asked_with_the_early_decode_on_the_pause_s_window(
    rigs: list[Rig], check_ahead: bool
) -> None:
    """With `check_ahead` the verdict is asked 80 ms into the silence, on what a pause would
    carry (the missing 120 ms made of the room); the pause then only uses it."""
    model = FakeTurnModel([0.9])
    r = rig(rigs, ["What time is it?"], model, TurnConfig(check_ahead=check_ahead))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.1)  # past decode_ahead_ms, before the pause
    if check_ahead:
        await until(lambda: model.answered == 1)
    else:
        await asyncio.sleep(0.05)
        assert model.calls == 0
    r.quiet(0.1)  # the pause
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert r.listener.finals[0].reason == "complete" and model.calls == 1
    # the same window either way: the utterance from its pre-roll plus 200 ms of silence
    first = max(0, round(0.3 * SR) - VadConfig().pre_roll_ms * SR // 1000)
    assert model.sizes == [int((0.3 + 1.0 + 0.2) * SR) - first]


async def test_speech_after_an_early_verdict_makes_the_pause_ask_again(rigs: list[Rig]) -> None:
    """The early "complete" belonged to a silence the user ended: the pause after the next
    words asks the model again and its "incomplete" stands (no patience: the long limit)."""
    model = FakeTurnModel([0.95, 0.1])
    r = rig(rigs, ["What time", "What time is"], model,
            TurnConfig(text_check=False, patience_ms=0))
    r.quiet(0.3)
    r.say(0.6)
    r.quiet(0.14)  # the early verdict (0.95), then the user goes on
    await until(lambda: model.answered == 1)
    r.say(0.5)
    r.quiet(0.2)  # the pause: asked again (the early one at 80 ms of it, 0.1)
    await until(lambda: model.answered == 2)
    for _ in range(3):
        await asyncio.sleep(0)
    assert not r.listener.finals and model.calls == 2
    r.quiet(1.4)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert r.listener.finals[0].reason == "silence"


async def test_an_unsure_verdict_ends_the_turn_after_the_silence_it_asks_for(
    rigs: list[Rig],
) -> None:
    """Pins the cliff of the fixed thresholds: a probability a little under the threshold
    (another machine's numerics) made the turn wait for the 1.5 s limit. Graded, p = 0.3
    asks for 40% of the patience: the turn ends 200 + 0.4 * 600 = 440 ms into the silence,
    counted in audio, and speech before then keeps the turn open."""
    turn = TurnConfig(patience_ms=600, check_ahead=False)
    model = FakeTurnModel([0.3])
    r = await paused(rig(rigs, ["What time is it?"], model, turn))
    r.quiet(0.22)  # 420 ms of silence
    await no_final_yet(r)
    r.quiet(0.04)  # 460 ms
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert r.listener.finals[0].reason == "complete"
    # What the end of turn waited for travels with the final (the benchmarks split it).
    marks = r.listener.finals[0].marks
    # (asked once; no text-end probe)
    assert set(marks) == set(HEARING_MARKS) - {
        "turn_again", "text_end_asked", "text_end", "early_end"}
    assert marks["pause"] <= min(marks["turn_model"], marks["pause_text"])
    # ... and what its verdict was computed on: Smart Turn's 0.3, the final mark's probability.
    evidence = r.listener.finals[0].evidence
    assert evidence["turn"] == 0.3 and set(evidence) == {"turn", "end"}
    # The early decode ran (80 ms into the silence) before the pause; its text was reused.
    assert marks["decode_start"] <= marks["ahead_done"] <= marks["pause_text"]

    again = rig(rigs, ["What time", "What time is it?"], FakeTurnModel([0.3]), turn)
    again.quiet(0.3)
    again.say(1.0)
    again.quiet(0.3)  # the pause; its verdict asks for 440 ms ...
    await settle(again)
    again.say(0.5)  # ... but the user goes on at 300 ms: that verdict is stale
    again.quiet(0.2)
    await until(lambda: again.asr.streams[-1].pauses == 2)
    for _ in range(3):
        await asyncio.sleep(0)
    assert not again.listener.finals
    again.quiet(0.3)
    await asyncio.wait_for(again.listener.final.wait(), 3)
    assert again.listener.finals[0].text == "What time is it?"


async def test_the_turn_model_asked_again_with_more_silence_may_end_the_turn_sooner(
    rigs: list[Rig],
) -> None:
    """`[turn] recheck_ms`: p = 0.3 at the pause asks for 200 + 0.4 * 1000 = 600 ms of
    silence; asked again at once on the window with 300 ms of silence (the missing 100 ms
    made up), p = 0.9 ends the turn when the real silence reaches 300 ms, not before. A
    second answer no surer leaves the first verdict."""
    turn = TurnConfig(check_ahead=False, recheck_ms=100)
    model = FakeTurnModel([0.3, 0.9])
    r = rig(rigs, ["What time is it?"], model, turn)
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)  # the pause
    await until(lambda: model.answered == 2)  # asked again before any more silence
    await no_final_yet(r)
    r.quiet(0.08)  # 280 ms: the second verdict says 300
    await no_final_yet(r)
    r.quiet(0.02)  # 300 ms
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert model.sizes[1] == model.sizes[0] + int(0.1 * SR)
    marks = r.listener.finals[0].marks
    assert marks["pause"] <= marks["turn_model"] <= marks["turn_again"]
    assert r.listener.finals[0].evidence["turn_again"] == 0.9

    same = FakeTurnModel([0.3, 0.2])
    slow = rig(rigs, ["What time is it?"], same, turn)
    slow.quiet(0.3)
    slow.say(1.0)
    slow.quiet(0.2)
    await until(lambda: same.answered == 2)
    slow.quiet(0.36)  # 560 ms
    await no_final_yet(slow)
    slow.quiet(0.06)  # 620 ms
    await asyncio.wait_for(slow.listener.final.wait(), 3)
    assert slow.listener.finals[0].reason == "complete"


def probe_rig(rigs: list[Rig], texts: list[str], text_end: FakeTextEnd,
              check_ahead: bool = False, mark: float = 0.75) -> Rig:
    """Smart Turn sure (0.9), Whisper's final mark unsure (0.75), the text-end probe on
    (0.95): a verdict (~867 ms without it) that waits for the probe."""
    turn = TurnConfig(check_ahead=check_ahead, text_end_threshold=0.95)
    rigs.append(Rig(FakeASR(lambda: FakeStream(texts, mark=mark)), FakeTurnModel([0.9]), turn,
                    VadConfig(), text_end))
    return rigs[-1]


@pytest.mark.parametrize(("probe", "fail", "ends_ms"), [
    (0.97, False, 200), (0.5, False, 867), (0.01, False, 1200), (0.97, True, 867),
])
async def test_the_text_end_probe_moves_a_waiting_verdict_either_way(
    rigs: list[Rig], probe: float, fail: bool, ends_ms: int,
) -> None:
    """Smart Turn sure, Whisper's final mark unsure (0.75: a verdict at ~867 ms): the probe
    is asked with the pause's words; sure they are whole (0.97, threshold 0.95) the turn ends
    at the pause, sure they are not (0.01) it waits the whole patience (1200 ms); unsure, or
    failing (reported), the verdict stays."""
    text_end = FakeTextEnd(probe, fail)
    r = probe_rig(rigs, ["Explain what a mortgage is."], text_end)
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)  # the pause
    await until(lambda: bool(text_end.texts) and (fail or "text_end" in (
        r.hearing._pause.marks if r.hearing._pause else {"text_end": 0})))
    assert text_end.texts == ["Explain what a mortgage is."]
    if ends_ms > 200:
        await settle(r)
        r.quiet((ends_ms - 200 - 30) / 1000)
        await no_final_yet(r)
        r.quiet(0.06)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    final = r.listener.finals[0]
    assert final.reason == "complete"
    assert r.errors == (["text_end_failed"] if fail else [])
    if not fail:
        assert final.marks["pause_text"] <= final.marks["text_end"]
        # read on the early decode's words (no early verdict said it was not needed)
        assert final.marks["text_end_asked"] <= final.marks["text_end"]
        assert final.evidence == {"turn": 0.9, "end": 0.75, "text_end": probe,
                                  "text_end_ahead": 1.0}
    else:
        assert "text_end" not in final.evidence


async def test_a_confident_verdict_never_waits_for_the_text_end_probe(rigs: list[Rig]) -> None:
    """Smart Turn and the final mark sure: the turn ends at the pause, while a probe asked
    on the early decode's words (no early verdict to say it is not needed) has not answered."""
    text_end = FakeTextEnd(0.99)
    text_end.release.clear()
    r = probe_rig(rigs, ["What time is it?"], text_end, mark=0.95)
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert text_end.answered == 0
    assert "text_end" not in r.listener.finals[0].marks
    text_end.release.set()


async def test_a_confident_early_verdict_never_asks_the_text_end_probe(
    rigs: list[Rig],
) -> None:
    """The turn model asked beside the early decode, sure, and a sure final mark: the probe
    is not asked, before the pause or at it."""
    text_end = FakeTextEnd(0.99)
    r = probe_rig(rigs, ["What time is it?"], text_end, check_ahead=True, mark=0.95)
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    ahead = r.hearing._words_ahead
    assert ahead is not None  # the words may end: the read ahead was set up ...
    assert await ahead.read is None  # ... and, the early verdict sure, read nothing
    assert text_end.texts == []


async def test_the_probe_asked_on_the_early_words_is_reused_at_the_pause(
    rigs: list[Rig],
) -> None:
    """The early decode's words are the pause's, and the turn model asked beside it leaves
    the verdict waiting (final mark 0.75): the probe read them once, before the pause, and its
    answer ends the turn at the pause."""
    text_end = FakeTextEnd(0.97)
    r = probe_rig(rigs, ["Explain what a mortgage is."], text_end, check_ahead=True)
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.1)  # past decode_ahead_ms (80), before the pause (200)
    await until(lambda: text_end.answered == 1)
    assert r.asr.streams[0].pauses == 0
    r.quiet(0.1)  # the pause
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert text_end.texts == ["Explain what a mortgage is."]
    assert r.listener.finals[0].reason == "complete"


async def test_speech_after_the_early_words_makes_the_probe_read_again(
    rigs: list[Rig],
) -> None:
    """The user spoke on after the early decode: its reading is not the pause's, whose new
    words the probe reads (the second decode's text)."""
    text_end = FakeTextEnd(0.97)
    r = probe_rig(rigs, ["Explain that.", "Explain that to me again."], text_end)
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.1)  # an early decode: "Explain that."
    await until(lambda: text_end.answered == 1)
    r.say(0.5)
    r.quiet(0.2)  # the pause after more words
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert text_end.texts == ["Explain that.", "Explain that to me again."]
    final = r.listener.finals[0]
    assert final.reason == "complete"
    assert final.evidence["text_end_ahead"] == 1.0  # the second early decode's words


class NoAheadStream(FakeStream):
    """An early decode that did not run (its CPU share spent: `StreamingASR.decode_ahead`)."""

    def decode_ahead(self, rest: np.ndarray) -> PauseText | None:
        self.ops.append(("ahead", rest.shape[0]))
        return None


async def test_without_early_words_the_pause_asks_the_probe(rigs: list[Rig]) -> None:
    """No early decode, so no words to read ahead: the pause's verdict waits (final mark
    0.75) and asks the probe on the pause's words; the final says it was asked there."""
    text_end = FakeTextEnd(0.97)
    rigs.append(Rig(FakeASR(lambda: NoAheadStream(["Explain what a mortgage is."], mark=0.75)),
                    FakeTurnModel([0.9]), TurnConfig(text_end_threshold=0.95), VadConfig(),
                    text_end))
    r = rigs[-1]
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)  # the pause
    await asyncio.wait_for(r.listener.final.wait(), 3)
    final = r.listener.finals[0]
    assert text_end.texts == ["Explain what a mortgage is."]
    assert final.reason == "complete"
    assert final.evidence == {"turn": 0.9, "end": 0.75, "text_end": 0.97,
                              "text_end_ahead": 0.0}
    assert final.marks["pause_text"] <= final.marks["text_end_asked"] <= final.marks["text_end"]


async def test_the_silence_after_words_is_fed_without_partial_decodes(rigs: list[Rig]) -> None:
    r = rig(rigs, ["What time is it?"], FakeTurnModel([0.1]))
    r.quiet(0.3)
    r.say(1.0)
    await until(lambda: bool(r.asr.streams) and r.asr.streams[0]._fed == int(1.3 * SR))
    stream = r.asr.streams[0]
    assert stream.partial_flags and all(stream.partial_flags)  # speech: partials allowed
    spoken = len(stream.partial_flags)
    r.quiet(0.2)
    await settle(r)
    feeds = [n for op, n in stream.ops if op == "feed"]
    assert not any(stream.partial_flags[spoken:])
    assert sum(feeds[spoken:]) == int(0.2 * SR)  # the silence up to the pause, no partials


async def test_a_failing_asr_still_ends_the_utterance_unheard(rigs: list[Rig]) -> None:
    """An answer paused by this speech waits for its final: an ASR that throws must still
    deliver one (empty), and the error is reported."""
    r = rig(rigs, ["Hello."], None, TurnConfig(model="none"))

    def boom() -> str:
        raise RuntimeError("decoder died")

    r.say(0.6)
    r.quiet(0.05)
    await until(lambda: bool(r.asr.streams))
    r.asr.streams[0].finish = boom  # type: ignore[method-assign]
    r.quiet(0.6)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert [u.text for u in r.listener.finals] == [""]
    assert r.errors == ["asr_failed"]


async def test_a_sure_turn_ends_at_the_early_decode_before_the_pause(rigs: list[Rig]) -> None:
    """`[turn] early_end_confidence`: the early text reads finished with a sure final mark and
    the turn model asked beside it is as sure: the turn ends ~80 ms into the silence, with no
    pause; the final carries the early_end mark."""
    r = rig(rigs, ["What time is it?"], FakeTurnModel([0.95]),
            turn=TurnConfig(early_end_confidence=0.9))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.1)  # past decode_ahead_ms (80), before the pause (200)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert [kind for kind, _ in r.listener.calls] == ["start", "early", "final"]
    final = r.listener.finals[0]
    assert final.text == "What time is it?" and final.reason == "complete"
    assert "early_end" in final.marks and "pause" not in final.marks


@pytest.mark.parametrize(("texts", "probability", "sure"), [
    (["What time is it?"], 0.95, 0.0),  # off (the default)
    (["What time is it?"], 0.8, 0.9),  # the turn model short of it
    (["I'd like to"], 0.95, 0.9),  # the text does not read finished
])
async def test_a_turn_not_sure_enough_waits_for_the_pause(
    rigs: list[Rig], texts: list[str], probability: float, sure: float
) -> None:
    r = rig(rigs, texts, FakeTurnModel([probability]),
            turn=TurnConfig(early_end_confidence=sure))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.1)
    await until(lambda: any(kind == "early" for kind, _ in r.listener.calls))
    await no_final_yet(r)
    r.quiet(0.1)  # the pause
    await settle(r)
    assert any(kind == "pause" for kind, _ in r.listener.calls)


async def test_speech_before_the_early_verdict_keeps_the_turn_open(rigs: list[Rig]) -> None:
    """The user went on while the turn model was still deciding: no early end."""
    model = FakeTurnModel([0.95], hold=True)
    r = rig(rigs, ["What time is it?"], model, turn=TurnConfig(early_end_confidence=0.9))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.1)
    await until(lambda: any(kind == "early" for kind, _ in r.listener.calls))
    r.say(0.3)  # speech again while the early verdict is out
    model.release.set()
    await no_final_yet(r)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not r.listener.finals
    r.quiet(0.3)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert "early_end" not in r.listener.finals[0].marks


def speaker_rig(rigs: list[Rig], texts: list[str], turn: TurnConfig | None = None) -> Rig:
    """A rig whose n-th utterance's stream says `texts[n]` (Smart Turn sure of every pause:
    the words alone decide)."""
    queue = iter(texts)

    def stream() -> FakeStream:
        return FakeStream([next(queue)])

    rigs.append(Rig(FakeASR(stream), FakeTurnModel([0.9]), turn or TurnConfig(), VadConfig()))
    return rigs[-1]


async def settle_latest(r: Rig, pauses: int = 1) -> None:
    """The latest utterance's `pauses`-th pause decoded and every turn-model call answered."""
    model, utterances = r.model, len(r.listener.finals) + 1
    assert model is not None
    await until(lambda: len(r.asr.streams) >= utterances
                and r.asr.streams[utterances - 1].pauses >= pauses
                and model.answered == model.calls)
    for _ in range(3):
        await asyncio.sleep(0)


async def finals_now(r: Rig, count: int) -> None:
    """What the loop has to run has run, and `count` utterances were final."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(r.listener.finals) == count


async def fluent_question(r: Rig) -> None:
    """An utterance that ends at its pause (a finished question), its final in."""
    count = len(r.listener.finals)
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)
    await until(lambda: len(r.listener.finals) > count)
    r.quiet(0.5)


async def test_a_misheard_question_ends_after_the_speaker_s_own_pauses(
    rigs: list[Rig]
) -> None:
    """Words that look unfinished ("What is the Amazon River and") wait for the long limit
    from a speaker never heard; once the speaker was heard speaking without a pause, such a
    turn ends after `speaker_floor_ms` of silence, and says which rule ended it."""
    r = speaker_rig(rigs, ["What time is it?", "What is the Amazon River and"])
    await fluent_question(r)
    r.say(1.0)
    r.quiet(0.2)
    await settle_latest(r)
    r.quiet(0.4)  # 600 ms of silence
    await finals_now(r, 1)
    r.quiet(0.14)  # 740 ms: past the floor (700)
    await until(lambda: len(r.listener.finals) == 2)
    final = r.listener.finals[1]
    assert final.text == "What is the Amazon River and" and final.reason == "complete"
    assert final.evidence["speaker_limit"] == 700


async def test_a_speaker_who_hesitated_gets_their_own_longer_limit(rigs: list[Rig]) -> None:
    """A 600 ms pause inside an earlier turn: unfinished words now wait 1.5 x 600 + 250 ms."""
    r = speaker_rig(rigs, ["I'd like to", "Tell me about"])
    r.quiet(0.3)
    r.say(0.8)
    r.quiet(0.6)  # a hesitation inside the turn ...
    r.say(0.8)  # ... and the speaker goes on
    r.quiet(0.2)
    await settle_latest(r, pauses=2)
    r.quiet(1.4)  # the first utterance of a session: the ceiling (1500) ends it
    await until(lambda: len(r.listener.finals) == 1)
    assert r.listener.finals[0].reason == "silence"
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)
    await settle_latest(r)
    r.quiet(0.9)  # 1.1 s of silence: still theirs (the limit is ~1.15 s)
    await finals_now(r, 1)
    r.quiet(0.12)
    await until(lambda: len(r.listener.finals) == 2)
    assert r.listener.finals[1].evidence["speaker_limit"] == pytest.approx(1150, abs=30)


async def test_a_cut_off_teaches_the_limit_at_once(rigs: list[Rig]) -> None:
    """The floor ended a turn and the speaker spoke on 900 ms after their voice stopped: the
    next unfinished words wait the whole ceiling."""
    r = speaker_rig(rigs, ["Hello there.", "I want to", "move money", "Could you tell me"])
    await fluent_question(r)
    r.say(0.8)
    r.quiet(0.2)
    await settle_latest(r)
    r.quiet(0.54)  # the floor ends it: a cut-off, as it turns out
    await until(lambda: len(r.listener.finals) == 2)
    r.quiet(0.16)  # 900 ms after the voice
    r.say(0.8)  # "... move money" (no final mark: only a limit ends it)
    r.quiet(0.2)
    await settle_latest(r)
    r.quiet(1.4)
    await until(lambda: len(r.listener.finals) == 3)
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)
    await settle_latest(r)
    r.quiet(1.2)  # 1.4 s: the cut-off taught 1.5 x 900 + 250, over the ceiling
    await finals_now(r, 3)
    r.quiet(0.12)
    await until(lambda: len(r.listener.finals) == 4)
    assert r.listener.finals[3].reason == "silence"  # the endpointer's ceiling


async def test_learning_off_keeps_the_one_long_limit(rigs: list[Rig]) -> None:
    r = speaker_rig(rigs, ["What time is it?", "What is the Amazon River and"],
                    TurnConfig(speaker_floor_ms=0))
    await fluent_question(r)
    r.say(1.0)
    r.quiet(0.2)
    await settle_latest(r)
    r.quiet(1.2)
    await finals_now(r, 1)
    r.quiet(0.12)
    await until(lambda: len(r.listener.finals) == 2)
    assert r.listener.finals[1].reason == "silence"
    assert "speaker_limit" not in r.listener.finals[1].evidence


async def test_an_utterance_s_level_is_its_voice_s_not_the_room_s(rigs: list[Rig]) -> None:
    """The level goes to the listener with the voice (for barge-in) and in the final: the
    voiced frames' level, from the onset on (the quiet pre-roll does not lower it)."""
    r = rig(rigs, ["What time is it?"], FakeTurnModel([0.9]))
    r.quiet(0.3)
    r.say(1.0)
    r.quiet(0.2)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    sound = frame_dbfs((np.arange(SR) % 1000 + 1).astype(np.int16))
    levels = [level for level in r.listener.levels if level is not None]
    assert r.listener.levels[0] is not None  # known from the first report on
    # Within the sound's frames (the sawtooth's 20 ms frames vary by a few dB), never down
    # at the silent pre-roll's -100 dB.
    assert levels and all(abs(level - sound) < 4.0 for level in levels)
    loud = r.listener.finals[0].level_db
    assert loud is not None and loud == pytest.approx(levels[-1])
    r.listener.final.clear()
    r.quiet(1.0)
    r.say(1.0, gain=0.1)  # the same sound, 20 dB down
    r.quiet(0.2)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    quiet = r.listener.finals[-1].level_db
    assert quiet is not None and abs(quiet - (loud - 20)) < 0.5


async def test_a_background_utterance_gets_one_look_at_its_words(rigs: list[Rig]) -> None:
    """`look`: speech set aside gets partial decodes again until one brings words, then it
    is set aside again; once per utterance (a television costs one decode, not a stream)."""
    r = rig(rigs, ["Good evening."], FakeTurnModel([0.9]))
    r.quiet(0.3)
    r.say(0.3)
    await until(lambda: bool(r.asr.streams) and r.asr.streams[0]._fed == int(0.6 * SR))
    stream = r.asr.streams[0]
    r.hearing.set_background(1, True)
    r.hearing.look(1)
    r.say(0.2)
    await until(lambda: stream._fed == int(0.8 * SR))
    before = len(stream.partial_flags)
    assert stream.partial_flags[-1]  # looking: no words yet
    stream.partial_text = "Good evening"
    r.say(0.2)
    await until(lambda: stream._fed == int(1.0 * SR))
    assert stream.partial_flags[before]  # the look that brought words ...
    r.say(0.4)
    r.hearing.look(1)  # (once per utterance)
    r.say(0.2)
    await until(lambda: stream._fed == int(1.6 * SR))
    assert not any(stream.partial_flags[before + 1:])  # ... then set aside again


async def test_background_speech_costs_no_partial_or_early_decodes(rigs: list[Rig]) -> None:
    """Speech the listener set aside (a television under the answer) is still heard to its
    end, but without partial decodes or the early decode: only the pause's and the final."""
    r = rig(rigs, ["Good evening."], FakeTurnModel([0.9]))
    r.quiet(0.3)
    r.say(0.3)
    await until(lambda: bool(r.asr.streams) and r.asr.streams[0]._fed == int(0.6 * SR))
    stream = r.asr.streams[0]
    assert stream.partial_flags and all(stream.partial_flags)  # the listener's: partials
    before = len(stream.partial_flags)
    r.hearing.set_background(1, True)
    r.say(0.7)
    await until(lambda: stream._fed == int(1.3 * SR))
    assert not any(stream.partial_flags[before:])  # set aside: fed, never decoded on the way
    r.quiet(0.2)
    await asyncio.wait_for(r.listener.final.wait(), 3)
    assert r.listener.finals[0].text == "Good evening."  # still heard to its end
    assert "ahead" not in [op for op, _ in stream.ops]  # no early decode
    r.hearing.set_background(1, False)  # (an old utterance: changes nothing)
    r.listener.final.clear()
    r.quiet(1.0)
    r.say(1.0)  # a new utterance is the listener's again
    await until(lambda: len(r.asr.streams) == 2 and r.asr.streams[1]._fed == int(1.5 * SR))
    assert all(r.asr.streams[1].partial_flags)
