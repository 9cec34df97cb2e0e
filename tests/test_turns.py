"""Turn-taking on a fake clock with scripted fake engines: state sequences, the history after
every kind of ending, start-early kept and discarded, barge-in then a new answer, false
interruptions that resume, failures answered with an apology.

The session is real (its peer connection is never negotiated) and runs on a `FakeTimer`;
the test is the far end: it pulls 20 ms frames from an audio track on the session's playout,
as aiortc's sender would, so "the voice started" and "it played to the end" are what a track
really sent. Engines are test doubles and executors run inline: no threads, no sleeping.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from typing import Any

import numpy as np
import pytest

import rtc_server.hearing as hearing_module
from engines.asr.base import PauseText
from engines.llm.base import ChatMessage
from engines.tts.base import PhonemeTiming, Speech
from media.clock import FakeTimer
from media.tracks import ClockedAudioTrack
from rtc_server.agent import (
    AgentBehaviour,
    is_backchannel,
    is_false_interruption,
    is_real_interruption,
)
from rtc_server.config import AgentConfig, Config
from rtc_server.engine_set import Engines, Pools
from rtc_server.hearing import Utterance
from rtc_server.metrics import Metrics
from rtc_server.session import Session

RATE = 16000
WORD_S = 0.08  # the fake voice: 80 ms per word, 20 ms gaps
REPLY = "Sure. The answer is forty two, and that is all. Anything else?"


class InlineExecutor(Executor):
    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            future.set_exception(exc)
        return future


class FakeLLM:
    def __init__(self, reply: str = REPLY) -> None:
        self.reply = reply
        self.calls: list[list[ChatMessage]] = []
        self.closed_early = 0
        self.release = asyncio.Event()
        self.release.set()
        self.fail = False
        self.stall_after: int | None = None  # words; then it waits for ever (a slow model)
        self.warmed: list[str] = []

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncIterator[str]:
        self.calls.append(list(messages))
        done = False
        try:
            await self.release.wait()
            if self.fail:
                raise RuntimeError("model exploded")
            for i, word in enumerate(self.reply.split(" ")):
                if i == self.stall_after:
                    await asyncio.Event().wait()
                yield word + " "
                await asyncio.sleep(0)
            done = True
        finally:
            if not done:
                self.closed_early += 1

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        self.warmed.append(messages[-1].content)

    def close(self) -> None:
        pass


class FakeTTS:
    sample_rate = RATE

    def __init__(self) -> None:
        self.texts: list[str] = []

    def synthesize(self, text: str) -> Iterator[Speech]:
        self.texts.append(text)
        word, gap = int(RATE * WORD_S), int(RATE * 0.02)
        pcm, phonemes, t = [], [], 0.0
        for _ in text.split():
            pcm += [np.full(word, 8000, np.int16), np.zeros(gap, np.int16)]
            phonemes += [PhonemeTiming("a", t, WORD_S * 1000), PhonemeTiming("_", t + 80, 20)]
            t += 100
        yield Speech(pcm=np.concatenate(pcm), sample_rate=RATE, phonemes=tuple(phonemes),
                     text=text)


class FakeFace:
    fps = 25

    def animate(self, pcm: np.ndarray, sample_rate: int) -> np.ndarray:
        return np.zeros((int(np.ceil(len(pcm) / sample_rate * 25)), 68, 2), np.float32)


class FakeStream:
    """One utterance: a word per 0.1 s of audio fed, every word "word"."""

    def __init__(self) -> None:
        self.samples = 0

    def feed(self, pcm: np.ndarray) -> str | None:
        self.samples += len(pcm)
        return None

    def pause(self) -> PauseText:
        return PauseText(self._text(), None)

    def finish(self) -> str:
        return self._text()

    def _text(self) -> str:
        return " ".join(["word"] * (self.samples // (RATE // 10)))


class FakeASR:
    def __init__(self) -> None:
        self.streams: list[FakeStream] = []

    def open(self) -> FakeStream:
        self.streams.append(FakeStream())
        return self.streams[-1]


class LevelDetector:
    """Speech is whatever is not digital silence (the audio says where the user speaks)."""

    def is_speech(self, frame: np.ndarray) -> bool:
        return bool(np.any(frame))


class _Still:
    def frame(self, index: int, offsets: np.ndarray | None = None) -> np.ndarray:
        return np.zeros((64, 64, 3), np.uint8)


class Harness:
    def __init__(self, **agent: Any) -> None:
        self.llm, self.tts, self.timer = FakeLLM(), FakeTTS(), FakeTimer()
        inline = InlineExecutor()
        self.engines = Engines(
            asr=FakeASR(), llm=self.llm, tts=self.tts, face=FakeFace(),  # type: ignore[arg-type]
            make_smoother=lambda: None,
            pools=Pools(asr=inline, tts=inline, face=inline, render=inline),  # type: ignore[arg-type]
        )
        config = Config(agent=AgentConfig(greeting="", lead_ms=20, **agent))
        holder: dict[str, AgentBehaviour] = {}

        def factory(session: Session) -> AgentBehaviour:
            holder["agent"] = AgentBehaviour(session, self.engines, config)
            return holder["agent"]

        self.session = Session(
            "test", config=config, frames=_Still(), metrics=Metrics(),
            behaviour_factory=factory, on_closed=lambda _: None, timer=self.timer,
        )
        self.agent = holder["agent"]
        self.session.clock.start()
        self.agent.on_connected()
        self.track = ClockedAudioTrack(self.session.playout)
        self.heard: list[np.ndarray] = []

    async def talk(self, speech_s: float, silence_s: float, frame: int = 320) -> None:
        """Be the user for a while: push frames of speech then silence in real (fake) time,
        `frame` samples at a time, while the far end pulls the agent's audio."""
        voice = (np.arange(int(speech_s * RATE)) % 200 + 100).astype(np.int16)
        audio = np.concatenate([voice, np.zeros(int(silence_s * RATE), np.int16)])
        pulled = 0.0
        for i in range(0, len(audio), frame):
            self.agent.on_audio(audio[i : i + frame])
            while pulled < (i + frame) / RATE:
                self.heard.append((await self.track.recv()).to_ndarray().reshape(-1))
                pulled += 0.02
            for _ in range(5):
                await asyncio.sleep(0)

    def sent(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in map(json.loads, self.session._pending) if m["type"] == kind]  # noqa: SLF001

    def states(self) -> list[str]:
        return [e["state"] for e in self.sent("state")]

    async def settle(self) -> None:
        for _ in range(100):
            await asyncio.sleep(0)

    async def listen(self, seconds: float) -> None:
        """Be the far end for `seconds`: pull 20 ms frames as aiortc's sender would."""
        for _ in range(round(seconds / 0.02)):
            frame = await self.track.recv()
            self.heard.append(frame.to_ndarray().reshape(-1))
            await self.settle()

    def loud_s(self) -> float:
        """Seconds of voice the far end received."""
        return sum(int((np.abs(f) > 1000).sum()) for f in self.heard) / 48000

    def utterance(self, uid: int, text: str) -> Utterance:
        now = self.session.clock.time()
        return Utterance(uid, text, speech_end=now, voice_end=now - 0.2, forced=False)

    async def ask(self, uid: int, text: str) -> None:
        self.agent.on_speech_start(uid)
        self.agent.on_final(self.utterance(uid, text))
        await self.settle()

    async def close(self) -> None:
        await self.session.close()


@pytest.fixture(autouse=True)
def level_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    from engines.vad import Endpointer, VadConfig

    def endpointer(config: VadConfig, max_silence_ms: int | None = None) -> Endpointer:
        return Endpointer(config, LevelDetector(), max_silence_ms)

    monkeypatch.setattr(hearing_module, "create_endpointer", endpointer)


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    await harness.close()


def speech_duration(text: str) -> float:
    return 0.1 * len(text.split())


async def test_a_question_goes_listening_thinking_speaking_listening(h: Harness) -> None:
    await h.ask(1, "What is the answer?")
    assert h.states() == ["listening", "thinking"]
    assert "first_audio_sent" not in h.agent._turn.marks  # type: ignore[union-attr]  # noqa: SLF001
    await h.listen(speech_duration(REPLY) + 1.0)
    assert h.states() == ["listening", "thinking", "speaking", "listening"]
    assert h.loud_s() == pytest.approx(0.08 * len(REPLY.split()), abs=0.1)
    assert h.agent.history == [
        ChatMessage("user", "What is the answer?"), ChatMessage("assistant", REPLY),
    ]
    timings = h.sent("timings")[-1]["marks_ms"]
    assert timings["first_audio_sent"] > 0 and timings["first_audio_sent"] >= timings["asr_final"]
    texts = [e["text"] for e in h.sent("agent_text") if e["text"]]
    assert " ".join(texts) == REPLY


async def test_nothing_counts_as_said_until_the_track_sends_it(h: Harness) -> None:
    """Regression: first_audio_sent was taken when an announce task woke up, not when the
    track sent the first sample; a track that never pulls must never report speaking."""
    await h.ask(1, "Hello?")
    await h.settle()
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None and turn.chunks  # scheduled ...
    assert "first_audio_sent" not in turn.marks and "speaking" not in h.states()  # ... not sent
    await h.listen(0.2)
    assert "first_audio_sent" in turn.marks and h.states()[-1] == "speaking"


async def test_start_early_is_kept_when_the_final_matches(h: Harness) -> None:
    h.agent.on_speech_start(1)
    h.agent.on_pause(1, "what is the answer")
    await h.settle()
    assert h.tts.texts and not h.session.playout.busy_until()  # prepared, nothing scheduled
    assert h.states() == ["listening"]
    await h.listen(0.3)  # the endpointer's hangover
    h.agent.on_final(h.utterance(1, "What is the answer?"))
    await h.listen(speech_duration(REPLY) + 1.0)
    assert len(h.llm.calls) == 1  # the early generation was kept, not redone
    assert h.agent.history[0] == ChatMessage("user", "What is the answer?")
    assert len(h.agent.history) == 2
    assert h.sent("timings")[-1]["marks_ms"]["llm_first_token"] < 0  # before the endpoint


async def test_start_early_is_discarded_without_trace_when_the_final_differs(
    h: Harness,
) -> None:
    """Regression: a discarded early turn wrote "what is the" into the history before the
    real question."""
    h.llm.release.clear()
    h.agent.on_speech_start(1)
    h.agent.on_pause(1, "what is the")
    await h.settle()
    h.agent.on_final(h.utterance(1, "What is the weather like?"))
    h.llm.release.set()
    await h.listen(speech_duration(REPLY) + 1.0)
    assert [c[-1].content for c in h.llm.calls] == ["what is the", "What is the weather like?"]
    assert h.agent.history == [
        ChatMessage("user", "What is the weather like?"), ChatMessage("assistant", REPLY),
    ]


async def test_speech_resuming_discards_the_early_start(h: Harness) -> None:
    h.llm.release.clear()
    h.agent.on_speech_start(1)
    h.agent.on_pause(1, "tell me")
    await h.settle()
    turn = h.agent._turn  # noqa: SLF001
    h.agent.on_resume(1)
    await h.settle()
    assert turn is not None and turn.is_done and h.agent._turn is None  # noqa: SLF001
    assert h.llm.closed_early == 1 and h.agent.history == []
    assert h.states() == ["listening"]


async def test_a_new_final_while_thinking_replaces_the_turn(h: Harness) -> None:
    h.llm.release.clear()
    await h.ask(1, "What is")
    await h.ask(2, "the capital of Peru?")
    h.llm.release.set()
    await h.listen(speech_duration(REPLY) + 1.0)
    assert h.llm.calls[-1][-1].content == "What is the capital of Peru?"
    assert h.agent.history == [
        ChatMessage("user", "What is the capital of Peru?"), ChatMessage("assistant", REPLY),
    ]


async def test_barge_in_stops_the_voice_and_the_new_question_is_answered(h: Harness) -> None:
    await h.ask(1, "Count for me.")
    await h.listen(0.5)
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None and turn.phase == "speaking"
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, voiced_ms=100)  # too short: nothing happens
    assert turn.phase == "speaking"
    h.agent.on_voice(2, voiced_ms=200)  # a barge-in: the voice stops at once
    assert turn.phase == "paused" and h.states()[-1] == "listening"
    assert h.session.playout.busy_until() <= h.session.clock.time() + 1e-6
    before = len(h.heard)
    await h.listen(0.3)
    assert all(np.abs(f).max() == 0 for f in h.heard[before:])  # silence after the cut
    h.agent.on_partial(2, "what time is")  # three words: a real interruption
    await h.settle()
    assert turn.is_done and turn.interrupted
    heard = h.agent.history[-1].content
    assert h.agent.history[0] == ChatMessage("user", "Count for me.")
    assert heard and REPLY.startswith(heard) and len(heard) < len(REPLY)
    h.agent.on_final(h.utterance(2, "What time is it?"))
    await h.listen(speech_duration(REPLY) + 1.0)
    assert h.llm.calls[-1] == [
        ChatMessage("user", "Count for me."), ChatMessage("assistant", heard),
        ChatMessage("user", "What time is it?"),
    ]
    assert h.states() == ["listening", "thinking", "speaking", "listening", "thinking",
                          "speaking", "listening"]
    assert h.sent("timings")[1]["barge_in_ms"] == 200  # the interrupted turn's timings
    assert h.session.metrics.barge_ins._value.get() == 1  # noqa: SLF001


@pytest.mark.parametrize("remark", ["mm-hm", "", "Yeah.", "uh huh"])
async def test_a_false_interruption_resumes_where_it_was_cut(h: Harness, remark: str) -> None:
    await h.ask(1, "Tell me.")
    await h.listen(0.55)  # into the middle of a word
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, voiced_ms=200)
    assert turn.phase == "paused"
    await h.listen(0.4)
    h.agent.on_final(h.utterance(2, remark))
    assert turn.phase == "speaking" and h.states()[-2:] == ["listening", "speaking"]
    await h.listen(speech_duration(REPLY) + 1.5)
    assert turn.is_done and not turn.interrupted
    assert h.agent.history == [ChatMessage("user", "Tell me."), ChatMessage("assistant", REPLY)]
    # Every word was heard whole: the cut word was played again from its start.
    assert h.loud_s() >= 0.08 * len(REPLY.split())
    assert h.session.metrics.false_interruptions._value.get() == 1  # noqa: SLF001
    # Each chunk announced once, though one of them was played twice.
    assert [e["text"] for e in h.sent("agent_text") if e["text"]] == [
        c.text for c in turn.chunks]


async def test_a_long_barge_in_without_words_is_a_real_interruption(h: Harness) -> None:
    await h.ask(1, "Tell me.")
    await h.listen(0.4)
    turn = h.agent._turn  # noqa: SLF001
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, voiced_ms=200)
    h.agent.on_voice(2, voiced_ms=1300)
    await h.settle()
    assert turn is not None and turn.interrupted and turn.is_done


async def test_without_resume_every_barge_in_ends_the_answer() -> None:
    h = Harness(resume_false_interruption=False)
    try:
        await h.ask(1, "Tell me.")
        await h.listen(0.4)
        turn = h.agent._turn  # noqa: SLF001
        h.agent.on_speech_start(2)
        h.agent.on_voice(2, voiced_ms=200)
        await h.settle()
        assert turn is not None and turn.interrupted
        h.agent.on_final(h.utterance(2, "mm-hm"))
        await h.listen(0.5)
        assert len(h.llm.calls) == 2  # "mm-hm" is a question of its own then
    finally:
        await h.close()


async def test_a_failing_llm_is_answered_with_an_apology(h: Harness) -> None:
    h.llm.fail = True
    await h.ask(1, "Hello?")
    await h.listen(3.0)
    assert any("Sorry" in t for t in h.tts.texts)
    assert h.sent("error")[0]["code"] == "turn_failed"
    assert h.states()[-1] == "listening"


async def test_an_utterance_and_its_answer_share_one_turn_id(h: Harness) -> None:
    """Regression: partials were numbered ahead of an early-started turn, so the page showed
    the user's words under a turn that never answered."""
    h.agent.on_speech_start(1)
    h.agent.on_partial(1, "what is")
    h.agent.on_pause(1, "what is the answer")
    h.agent.on_partial(1, "what is the answer")
    h.agent.on_final(h.utterance(1, "What is the answer?"))
    await h.listen(1.0)
    ids = {m["turn_id"] for m in h.sent("transcript")} | {m["turn_id"] for m in
                                                           h.sent("agent_text")}
    assert len(ids) == 1


async def test_interrupt_returns_once_every_task_of_the_turn_has_stopped(h: Harness) -> None:
    h.llm.reply = "One, two, three, four, five, six, seven, eight."
    h.llm.stall_after = 6
    await h.ask(1, "Talk.")
    await h.listen(0.3)
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None
    await turn.interrupt()
    assert turn.is_done and len(turn._tasks) == 0  # noqa: SLF001
    assert h.llm.closed_early == 1
    assert h.session.playout.busy_until() <= h.session.clock.time() + 1e-6


def test_backchannels_and_false_interruptions() -> None:
    for text in ["", "Mm-hm.", "yeah", "Uh huh", "OK.", "嗯", "Thank you."]:
        assert is_backchannel(text), text
    for text in ["Stop.", "What time is it?", "yeah but why", "no"]:
        assert not is_backchannel(text), text
    # Whisper's words for a short hum or cough are not a question ...
    assert is_false_interruption("Emma Chen.", voiced_s=0.5, short_s=0.7)
    # ... but a short "stop" is, and so is anything long.
    assert not is_false_interruption("Stop it.", voiced_s=0.4, short_s=0.7)
    assert not is_false_interruption("Emma Chen.", voiced_s=1.0, short_s=0.7)
    assert is_real_interruption("wait") and is_real_interruption("what time is")
    assert not is_real_interruption("Emma Chen")


async def test_a_short_sound_heard_as_two_words_resumes_but_stop_ends(h: Harness) -> None:
    await h.ask(1, "Tell me.")
    await h.listen(0.4)
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, voiced_ms=200)
    h.agent.on_partial(2, "Emma")  # not enough to decide
    assert turn.phase == "paused"
    h.agent.on_final(h.utterance(2, "Emma Chen."))  # 0.2 s of voice + the pause: short
    assert turn.phase == "speaking"
    await h.listen(0.3)
    h.agent.on_speech_start(3)
    h.agent.on_voice(3, voiced_ms=200)
    h.agent.on_partial(3, "stop")
    await h.settle()
    assert turn.interrupted


def consistent(states: list[str]) -> None:
    """Each state event is a change to a known state."""
    assert all(a != b for a, b in zip(states, states[1:], strict=False)), states
    assert set(states) <= {"listening", "thinking", "speaking"}, states


async def test_a_minute_of_talk_without_a_pause(h: Harness) -> None:
    """The endpointer ends it at its 30 s limit and a new utterance begins at once; the agent
    answers, is talked over, and nothing breaks: no error, one turn at a time."""
    await h.talk(60.0, 2.0)
    await h.listen(REPLY.count(" ") * 0.1 + 2.0)
    assert not h.sent("error")
    finals = [e for e in h.sent("transcript") if e["final"]]
    assert len(finals) >= 2 and all(e["text"] for e in finals[:2])
    assert h.session.metrics.barge_ins._value.get() >= 1  # noqa: SLF001 - talked over it
    consistent(h.states())
    assert h.states()[-1] == "listening" and h.agent._turn is None  # noqa: SLF001
    assert len(h.agent.history) <= 40


async def test_ten_minutes_of_silence_is_nothing(h: Harness) -> None:
    await h.talk(0.0, 600.0, frame=960)
    assert h.states() == ["listening"] and not h.llm.calls
    assert not h.sent("transcript") and not h.engines.asr.streams  # type: ignore[attr-defined]
    assert len(h.agent._hearing._ops) == 0  # noqa: SLF001


@pytest.mark.parametrize("frame", [112, 528, 1])
async def test_frames_of_odd_sizes_are_heard(h: Harness, frame: int) -> None:
    await h.talk(0.3 if frame == 1 else 1.0, 0.6, frame=frame)
    finals = [e for e in h.sent("transcript") if e["final"]]
    assert len(finals) == 1 and finals[0]["text"].startswith("word")
    await h.listen(REPLY.count(" ") * 0.1 + 1.0)
    assert len(h.llm.calls) == 1 and h.states()[-1] == "listening"


async def test_partials_warm_the_llm_while_the_user_talks() -> None:
    h = Harness(warm_llm=True)
    h.agent.on_speech_start(1)
    h.agent.on_partial(1, "what is the capital")
    assert h.llm.warmed == ["what is the capital"]
    await h.ask(2, "Hello?")
    h.agent.on_partial(3, "tell me more")  # the agent is answering: no hint then
    assert h.llm.warmed == ["what is the capital"]
    await h.close()
