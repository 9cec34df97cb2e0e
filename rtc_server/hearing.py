"""Hearing, per session: the endpointer on the event loop, streaming ASR on a serial lane.

Every 20 ms frame goes through the endpointer (microseconds) on the loop; audio inside an
utterance is queued to one worker lane per session that feeds the ASR stream off the loop
(frames that queue up behind a slow decode are merged into one feed). The listener learns,
in order: speech start, voice duration (for barge-in), partials, a pause (for starting the
LLM early), the resumption of speech after a pause, and the final transcript with the clock
time of the endpoint and of the end of the voiced audio.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from engines.asr.base import AsrStream, StreamingASR
from engines.vad import SpeechEnded, SpeechStarted, VadConfig, create_endpointer
from media.clock import MediaClock
from rtc_server.engine_set import Pools
from rtc_server.tasks import TaskSet

logger = logging.getLogger(__name__)
MAX_QUEUED_OPS = int(30.0 / 0.02)  # 30 s of frames; beyond that frames are dropped (logged)


@dataclass(frozen=True)
class Utterance:
    id: int
    text: str
    speech_end: float  # clock time the endpoint fired
    voice_end: float  # clock time the voiced audio ended (speech_end minus the hangover)
    forced: bool


class HearingListener(Protocol):
    def on_speech_start(self, utterance_id: int) -> None: ...

    def on_voice(self, utterance_id: int, voiced_ms: float) -> None: ...

    def on_partial(self, utterance_id: int, text: str) -> None: ...

    def on_pause(self, utterance_id: int, text: str) -> None: ...

    def on_resume(self, utterance_id: int) -> None: ...

    def on_final(self, utterance: Utterance) -> None: ...


@dataclass(frozen=True)
class _End:
    speech_end: float
    voice_end: float
    forced: bool


_Op = tuple[str, int, object]


class Hearing:
    def __init__(
        self,
        *,
        asr: StreamingASR,
        vad: VadConfig,
        pause_ms: int,
        clock: MediaClock,
        pools: Pools,
        tasks: TaskSet,
        listener: HearingListener,
        on_error: Callable[[str, BaseException], None],
    ) -> None:
        self._asr = asr
        self._endpointer = create_endpointer(vad)
        self._pause_ms = pause_ms
        self._clock = clock
        self._pools = pools
        self._listener = listener
        self._on_error = on_error
        # A deque (not asyncio.Queue) so the lane can merge queued feeds; bounded in _put.
        self._ops: deque[_Op] = deque()
        self._wake = asyncio.Event()
        self._utterance = 0
        self._onset_clock = 0.0
        self._paused = False
        self._pause_reported = False  # on_pause already sent for the current pause
        self._partial, self._partial_at = "", -1.0  # latest partial and its clock time
        self._dropped = 0
        tasks.spawn("asr-lane", self._lane())

    def push(self, frame: np.ndarray) -> None:
        """One 20 ms frame of 16 kHz mono int16 (called on the event loop)."""
        event = self._endpointer.push(frame)
        now = self._clock.time()
        if isinstance(event, SpeechStarted):
            self._utterance += 1
            self._paused = self._pause_reported = False
            self._partial, self._partial_at = "", -1.0
            self._onset_clock = now - (self._endpointer.time - event.t)
            self._put(("open", self._utterance, None))
            self._put(("feed", self._utterance, event.audio))
            self._listener.on_speech_start(self._utterance)
            return
        if isinstance(event, SpeechEnded):
            self._put(("feed", self._utterance, frame))
            voice_end = now - (self._endpointer.time - event.t)
            self._put(("finish", self._utterance, _End(now, voice_end, event.forced)))
            return
        if not self._endpointer.in_speech:
            return
        self._put(("feed", self._utterance, frame))
        silence = self._endpointer.trailing_silence_ms
        if silence == 0:
            if self._paused:
                self._paused = self._pause_reported = False
                self._listener.on_resume(self._utterance)
            self._listener.on_voice(self._utterance, (now - self._onset_clock) * 1000)
        elif silence >= self._pause_ms and not self._paused:
            self._paused = True
            if self._partial_at >= now - silence / 1000:
                # The stream already decoded ahead on its own since the voice stopped.
                self._report_pause(self._utterance, self._partial)
            else:
                self._put(("pause", self._utterance, None))

    def _put(self, op: _Op) -> None:
        if len(self._ops) >= MAX_QUEUED_OPS and op[0] == "feed":
            self._dropped += 1
            if self._dropped % 50 == 1:
                logger.warning("ASR lane is behind; dropped %d frames", self._dropped)
            return
        self._ops.append(op)
        self._wake.set()

    async def _next(self) -> _Op:
        while not self._ops:
            self._wake.clear()
            await self._wake.wait()
        return self._ops.popleft()

    async def _lane(self) -> None:
        loop = asyncio.get_running_loop()
        pool = self._pools.asr
        stream: AsrStream | None = None
        current = 0
        last_partial = ""
        while True:
            kind, utterance, arg = await self._next()
            try:
                if kind == "open":
                    stream = await loop.run_in_executor(pool, self._asr.open)
                    current, last_partial = utterance, ""
                    continue
                if stream is None or utterance != current:
                    continue
                if kind == "feed":
                    pcm = self._merge_feeds(arg)
                    text = await loop.run_in_executor(pool, stream.feed, pcm)
                    if text:
                        last_partial = text
                        if utterance == self._utterance:
                            self._partial, self._partial_at = text, self._clock.time()
                        self._listener.on_partial(utterance, text)
                        # The stream decodes ahead on its own at a pause: a partial that
                        # comes back while the user is silent already is the pause's text.
                        self._report_pause(utterance, text)
                elif kind == "pause" and not self._pause_reported:
                    hint = getattr(stream, "pause_hint", None)
                    result = await loop.run_in_executor(pool, hint) if hint else None
                    text = result if isinstance(result, str) else last_partial
                    self._report_pause(utterance, text)
                elif kind == "finish":
                    assert isinstance(arg, _End)
                    final = await loop.run_in_executor(pool, stream.finish)
                    stream = None
                    self._listener.on_final(
                        Utterance(utterance, final.strip(), arg.speech_end, arg.voice_end,
                                  arg.forced)
                    )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # contain ASR failures to this utterance
                stream = None
                self._on_error("asr_failed", exc)

    def _report_pause(self, utterance: int, text: str) -> None:
        if self._paused and not self._pause_reported and self._utterance == utterance and text:
            self._pause_reported = True
            self._listener.on_pause(utterance, text)

    def _merge_feeds(self, first: object) -> np.ndarray:
        """Join queued feeds of the same utterance, so a lane that fell behind catches up."""
        parts = [np.asarray(first)]
        while self._ops and self._ops[0][0] == "feed":
            parts.append(np.asarray(self._ops.popleft()[2]))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
