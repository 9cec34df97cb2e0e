"""The turn-taking tests' rig: a real session on a fake clock, scripted engines, and the far
end pulling the agent's audio as aiortc's sender would (`Harness`).

- `Harness(**agent)`: an `AgentBehaviour` in a `Session` whose peer connection is never
  negotiated, on a `FakeTimer`, with `ScriptedLLM` (it says `REPLY`), a fake voice (`FakeTTS`:
  80 ms of tone per word, 20 ms gaps), a still face, an ASR that hears a word per 0.1 s fed
  and inline executors; `talk(speech_s, silence_s)` is the user, `listen(seconds)` the far
  end, `ask(uid, text)` a whole utterance at once;
- `speech_duration(text)`: how long the fake voice takes to say `text`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from engines.asr.base import PauseText
from engines.tools.spec import ToolSet
from engines.tts.base import PhonemeTiming, Speech
from media.clock import FakeTimer
from media.tracks import ClockedAudioTrack
from rtc_server.agent import AgentBehaviour
from rtc_server.config import AgentConfig, Config
from rtc_server.engine_set import Engines, Pools
from rtc_server.hearing import Utterance
from rtc_server.metrics import Metrics
from rtc_server.session import Session
from tests.support.fakes import FakeASR, InlineExecutor, ScriptedLLM, words

RATE = 16000
WORD_S = 0.08  # the fake voice: 80 ms per word, 20 ms gaps
REPLY = "Sure. The answer is forty two, and that is all. Anything else?"


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

    def feed(self, pcm: np.ndarray, partial: bool = True) -> str | None:
        self.samples += len(pcm)
        return None

    def pause(self) -> PauseText:
        return PauseText(self._text(), None)

    def decode_ahead(self, rest: np.ndarray) -> PauseText | None:
        return None

    def finish(self) -> str:
        return self._text()

    def _text(self) -> str:
        return " ".join(["word"] * (self.samples // (RATE // 10)))


class _Still:
    def frame(self, index: int, offsets: np.ndarray | None = None) -> np.ndarray:
        return np.zeros((64, 64, 3), np.uint8)


class Harness:
    def __init__(self, tools: ToolSet | None = None, **agent: Any) -> None:
        self.llm, self.tts, self.timer = ScriptedLLM(words(REPLY)), FakeTTS(), FakeTimer()
        self.asr = FakeASR(FakeStream)
        inline = InlineExecutor()
        self.engines = Engines(
            asr=self.asr, llm=self.llm, tts=self.tts, face=FakeFace(),
            make_smoother=lambda: None,
            pools=Pools(asr=inline, tts=inline, face=inline, render=inline),  # type: ignore[arg-type]
            tools=tools,
        )
        config = Config(agent=AgentConfig(**{"greeting": "", "lead_ms": 20, **agent}))
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


def speech_duration(text: str) -> float:
    return 0.1 * len(text.split())
