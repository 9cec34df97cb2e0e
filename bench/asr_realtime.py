"""Real-time part of bench/asr.py: the server's own `Hearing` on a real clock.

Each clip is pushed in 20 ms frames at microphone pace (frame k at clock time (k + 1) x 20 ms,
as the inbound track delivers it), with the ASR lane and the turn model on the server's
executors. Clock time equals audio time, so the true end of the voice is known.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from engines.asr.base import StreamingASR
from engines.turn import TurnConfig, TurnModel
from engines.vad import VadConfig
from media.clock import MediaClock
from rtc_server.engine_set import Pools
from rtc_server.hearing import Hearing, Utterance
from rtc_server.tasks import TaskSet

SR = 16000
FRAME = 320
logger = logging.getLogger("bench.asr")


@dataclass(frozen=True)
class Row:
    voice_end: float  # clock s, true end of the voice
    endpoint: float  # clock s, the endpoint fired
    final: float  # clock s, on_final was called
    text: str


class _Recorder:
    def __init__(self, clock: MediaClock) -> None:
        self._clock = clock
        self.finals: list[tuple[float, Utterance]] = []
        self.done = asyncio.Event()

    def on_speech_start(self, utterance_id: int) -> None: ...

    def on_voice(
        self, utterance_id: int, voiced_ms: float, level_db: float | None = None
    ) -> None: ...

    def on_partial(self, utterance_id: int, text: str) -> None: ...

    def on_early_text(self, utterance_id: int, text: str) -> None: ...

    def on_pause(self, utterance_id: int, text: str) -> None: ...

    def on_resume(self, utterance_id: int) -> None: ...

    def on_final(self, utterance: Utterance) -> None:
        self.finals.append((self._clock.time(), utterance))
        self.done.set()


async def play_all(
    clips: list[Any], asr: StreamingASR, vad: VadConfig, turn: TurnConfig,
    model: TurnModel | None,
) -> list[Row]:
    """Play each clip (with `.audio` and `.voice_end`); one row per clip that was heard."""
    warm_up = getattr(asr, "warm_up", None)
    if warm_up is not None:
        warm_up()
    pools, rows = Pools(), []
    try:
        for clip in clips:
            clock, tasks = MediaClock(), TaskSet("bench")
            clock.start()
            recorder = _Recorder(clock)
            hearing = Hearing(
                asr=asr, vad=vad, turn=turn, turn_model=model, clock=clock, pools=pools,
                tasks=tasks, listener=recorder,
                on_error=lambda kind, exc: logger.error("%s: %s", kind, exc),
            )
            audio = clip.audio
            for i in range(0, audio.shape[0] - FRAME + 1, FRAME):
                await clock.sleep_until((i + FRAME) / SR)
                hearing.push(audio[i : i + FRAME])
            try:
                await asyncio.wait_for(recorder.done.wait(), 10.0)
            except TimeoutError:
                logger.warning("no final for %r", clip.text)
            await tasks.cancel_all()
            if recorder.finals:
                at, utterance = recorder.finals[0]
                rows.append(Row(clip.voice_end, utterance.speech_end, at, utterance.text))
    finally:
        pools.shutdown()
    return rows
