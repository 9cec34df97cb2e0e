"""Speaking, per session: text chunks -> TTS -> face landmarks -> scheduled on the clock.

Each chunk is synthesized and animated off the event loop, then its audio and its landmark
offsets are scheduled at the same frame-aligned clock time, right after whatever is already
scheduled: sound and lips start together, and chunk n+1 is prepared while chunk n plays.
Frames are rendered just in time by the video track, so a barge-in drops unrendered work.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from engines.face.features import FPS as FACE_FPS
from engines.face.features import resample_frames
from engines.text.normalize import normalize
from media.playout import Playout
from rtc_server.engine_set import Engines
from rtc_server.turn import SpokenChunk, Turn


@dataclass(frozen=True)
class Prepared:
    text: str
    pcm: np.ndarray
    sample_rate: int
    offsets: np.ndarray  # [T, 68, 2] at the playout's fps


class Speaker:
    def __init__(self, engines: Engines, playout: Playout, clock_lead_s: float) -> None:
        self._engines = engines
        self._playout = playout
        self._lead_s = clock_lead_s
        self._smoother = engines.make_smoother()
        self._chunks = 0

    def reset(self) -> None:
        """After a barge-in: the next utterance starts from a closed mouth."""
        if self._smoother is not None:
            self._smoother.reset()

    async def prepare(self, text: str, turn: Turn) -> Prepared | None:
        """TTS and face for one chunk (None if it has nothing to say)."""
        spoken = normalize(text).strip()
        if not spoken:
            return None
        loop = asyncio.get_running_loop()
        pools, clock = self._engines.pools, self._playout.clock
        parts = await loop.run_in_executor(
            pools.tts, lambda: list(self._engines.tts.synthesize(spoken))
        )
        parts = [p for p in parts if len(p.pcm)]
        if not parts:
            return None
        turn.mark("tts_first_audio", clock.time())
        rate = parts[0].sample_rate
        pcm = np.concatenate([p.pcm for p in parts])
        offsets = await loop.run_in_executor(pools.face, self._animate, pcm, rate)
        turn.mark("face_first_frame", clock.time())
        return Prepared(text.strip(), pcm, rate, offsets)

    def _animate(self, pcm: np.ndarray, rate: int) -> np.ndarray:
        offsets = np.asarray(self._engines.face.animate(pcm, rate), np.float32)
        if self._smoother is not None and len(offsets):
            # The whole chunk is known before it plays, so smooth both ways (zero phase): a
            # causal Kalman filter alone delays the mouth by about a frame (measured 40 ms).
            # The forward pass carries the session's state across chunks for continuity.
            forward = self._smoother.smooth(offsets)
            backward = self._engines.make_smoother().smooth(offsets[::-1])[::-1]
            offsets = (forward + backward) / 2
        return resample_frames(offsets, FACE_FPS, self._playout.fps)

    def schedule(self, prepared: Prepared, turn: Turn) -> SpokenChunk:
        """Put one prepared chunk on the timeline, after what is already scheduled."""
        playout = self._playout
        at = playout.frame_time(max(playout.clock.time() + self._lead_s, playout.busy_until()))
        self._chunks += 1
        tag = f"turn{turn.id}-chunk{self._chunks}"
        end = playout.schedule_audio(prepared.pcm, prepared.sample_rate, at, tag=tag)
        playout.schedule_pose(prepared.offsets, at)
        chunk = SpokenChunk(prepared.text, tag, end - at, at)
        turn.chunks.append(chunk)
        return chunk
