"""Turn-taking with fake engines: start-early, replacing a thinking turn, barge-in with the
history cut to what was heard, and a failing engine answered with an apology.

The session is real (its peer connection is never negotiated); engines are test doubles, so
these run in milliseconds and pin the conversation logic itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence

import numpy as np
import pytest

from engines.llm.base import ChatMessage
from engines.tts.base import Speech
from rtc_server.agent import AgentBehaviour
from rtc_server.config import AgentConfig, Config
from rtc_server.engine_set import Engines
from rtc_server.hearing import Utterance
from rtc_server.metrics import Metrics
from rtc_server.session import Session
from rtc_server.turn import SpokenChunk, Turn

RATE = 16000


class FakeLLM:
    def __init__(self, reply: str = "Sure. The answer is forty two. Anything else?") -> None:
        self.reply = reply
        self.calls: list[list[ChatMessage]] = []
        self.cancelled = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()
        self.fail = False

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncIterator[str]:
        self.calls.append(list(messages))
        try:
            await self.release.wait()
            if self.fail:
                raise RuntimeError("model exploded")
            for word in self.reply.split(" "):
                yield word + " "
                await asyncio.sleep(0)
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled.set()
            raise

    def close(self) -> None:
        pass


class FakeTTS:
    sample_rate = RATE

    def __init__(self) -> None:
        self.texts: list[str] = []

    def synthesize(self, text: str) -> Iterator[Speech]:
        self.texts.append(text)
        n = int(RATE * 0.08 * len(text.split()))  # 80 ms per word
        pcm = (np.sin(np.arange(n) * 0.3) * 8000).astype(np.int16)
        yield Speech(pcm=pcm, sample_rate=RATE, phonemes=(), text=text)


class FakeFace:
    fps = 25

    def animate(self, pcm: np.ndarray, sample_rate: int) -> np.ndarray:
        return np.zeros((int(np.ceil(len(pcm) / sample_rate * 25)), 68, 2), np.float32)


class NoASR:
    def open(self) -> object:
        raise AssertionError("not used: these tests drive the listener callbacks directly")


@pytest.fixture
async def agent() -> Iterator[tuple[AgentBehaviour, Session, FakeLLM, FakeTTS]]:
    llm, tts = FakeLLM(), FakeTTS()
    engines = Engines(
        asr=NoASR(), llm=llm, tts=tts, face=FakeFace(), make_smoother=lambda: None,  # type: ignore[arg-type]
    )
    config = Config(agent=AgentConfig(greeting="", lead_ms=20))
    holder: dict[str, AgentBehaviour] = {}

    def factory(session: Session) -> AgentBehaviour:
        holder["agent"] = AgentBehaviour(session, engines, config)
        return holder["agent"]

    session = Session(
        "test", config=config, frames=_Still(), metrics=Metrics(),
        behaviour_factory=factory, on_closed=lambda _: None,
    )
    session.clock.start()
    yield holder["agent"], session, llm, tts
    await session.close()
    engines.close()


class _Still:
    def frame(self, index: int, offsets: np.ndarray | None = None) -> np.ndarray:
        return np.zeros((512, 512, 3), np.uint8)


def utterance(uid: int, text: str, session: Session) -> Utterance:
    now = session.clock.time()
    return Utterance(uid, text, speech_end=now, voice_end=now - 0.4, forced=False)


async def until(predicate, within_s: float = 3.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(within_s):
        while not predicate():  # noqa: ASYNC110 - observing worker threads from the test
            await asyncio.sleep(0.01)


def sent(session: Session, kind: str) -> list[dict]:
    import json

    return [m for m in map(json.loads, session._pending) if m["type"] == kind]  # noqa: SLF001


async def test_start_early_keeps_the_answer_when_the_final_matches(agent) -> None:  # type: ignore[no-untyped-def]
    behaviour, session, llm, tts = agent
    behaviour.on_pause(1, "what is the answer")
    await until(lambda: tts.texts)  # prepared ahead, before the endpoint
    assert not session.playout.busy_until()  # ... but nothing scheduled yet
    behaviour.on_final(utterance(1, "What is the answer?", session))
    await until(lambda: session.playout.busy_until() > 0)
    assert len(llm.calls) == 1  # the early generation was kept, not redone
    timings = behaviour._turn.timings_ms()  # type: ignore[union-attr]  # noqa: SLF001
    assert timings["llm_first_token"] < 0  # hidden behind the endpoint


async def test_start_early_is_discarded_when_the_final_differs(agent) -> None:  # type: ignore[no-untyped-def]
    behaviour, session, llm, tts = agent
    llm.release.clear()
    behaviour.on_pause(1, "what is the")
    await until(lambda: len(llm.calls) == 1)
    behaviour.on_final(utterance(1, "What is the weather like?", session))
    llm.release.set()
    await until(lambda: len(llm.calls) == 2)
    assert llm.calls[1][-1].content == "What is the weather like?"
    await until(lambda: session.playout.busy_until() > 0)


async def test_resuming_speech_cancels_the_early_start(agent) -> None:  # type: ignore[no-untyped-def]
    behaviour, session, llm, tts = agent
    llm.release.clear()
    behaviour.on_pause(1, "tell me")
    await until(lambda: len(llm.calls) == 1)
    turn = behaviour._turn  # noqa: SLF001
    behaviour.on_resume(1)
    await until(lambda: turn is not None and turn.task is not None and turn.task.done())
    llm.release.set()
    await until(lambda: llm.cancelled.is_set())
    assert behaviour._turn is None  # noqa: SLF001


async def test_new_final_while_thinking_replaces_the_turn(agent) -> None:  # type: ignore[no-untyped-def]
    behaviour, session, llm, tts = agent
    llm.release.clear()
    behaviour.on_final(utterance(1, "What is", session))
    await until(lambda: len(llm.calls) == 1)
    behaviour.on_final(utterance(2, "the capital of Peru?", session))
    llm.release.set()
    await until(lambda: len(llm.calls) == 2)
    assert llm.calls[1][-1].content == "What is the capital of Peru?"


async def test_barge_in_clears_media_and_history_keeps_what_was_heard(agent) -> None:  # type: ignore[no-untyped-def]
    behaviour, session, llm, tts = agent
    llm.reply = " ".join(["One two three four five six seven eight nine ten."] * 4)
    behaviour.on_final(utterance(1, "Count for me.", session))
    await until(lambda: session.playout.busy_until() > session.clock.time() + 1.0)
    turn = behaviour._turn  # noqa: SLF001
    assert turn is not None
    # pretend the audio track played the first half of the first chunk
    first = turn.chunks[0]
    session.playout.audio.read(round(first.at * 48000), round(first.duration_s * 24000))
    behaviour.on_voice(2, voiced_ms=100)  # too short: not a barge-in
    assert behaviour._turn is turn  # noqa: SLF001
    behaviour.on_voice(2, voiced_ms=260)
    assert session.playout.busy_until() <= session.clock.time() + 1e-6  # all cleared
    await until(lambda: turn.task is not None and turn.task.done())
    assert behaviour.history[0] == ChatMessage("user", "Count for me.")
    heard = behaviour.history[1].content
    assert heard and len(heard.split()) < len(first.text.split())
    assert first.text.startswith(heard)


async def test_failing_llm_is_answered_with_an_apology(agent) -> None:  # type: ignore[no-untyped-def]
    behaviour, session, llm, tts = agent
    llm.fail = True
    behaviour.on_final(utterance(1, "Hello?", session))
    await until(lambda: any("Sorry" in t for t in tts.texts))
    errors = sent(session, "error")
    assert errors and errors[0]["code"] == "turn_failed"


def test_heard_text_is_cut_at_the_played_sample() -> None:
    from media.clock import MediaClock
    from media.playout import Playout

    playout = Playout(MediaClock(), fps=25, width=64, height=64)
    turn = Turn(1, "hi")
    for i, (text, dur) in enumerate([("Hello there.", 1.0), ("How are you today my friend?", 2.0)]):
        tag = f"c{i}"
        playout.schedule_audio(np.ones(int(48000 * dur), np.int16), 48000, at=i * 1.0, tag=tag)
        turn.chunks.append(SpokenChunk(text, tag, dur, i * 1.0))
    playout.audio.read(0, 48000 + 48000)  # all of chunk 1, half of chunk 2
    assert turn.heard_text(playout) == "Hello there. How are you"


async def test_an_utterance_and_its_answer_share_one_turn_id(agent) -> None:  # type: ignore[no-untyped-def]
    """Regression: partials were numbered ahead of an early-started turn, so the page showed
    the user's words under a turn that never answered."""
    behaviour, session, llm, tts = agent
    behaviour.on_speech_start(1)
    behaviour.on_partial(1, "what is")
    behaviour.on_pause(1, "what is the answer")
    behaviour.on_partial(1, "what is the answer")
    behaviour.on_final(utterance(1, "What is the answer?", session))
    await until(lambda: session.playout.busy_until() > 0)
    ids = {m["turn_id"] for m in sent(session, "transcript")}
    assert ids == {behaviour._turn.id}  # type: ignore[union-attr]  # noqa: SLF001
