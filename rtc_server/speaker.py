"""The voice of a session: a text chunk -> speech and lip motion, off the event loop.

`Voice.prepare(text, smoother)` runs the TTS on its pool and the face model on its pool (or
its cross-session batcher), then smooths and re-times the landmarks for the video
(`engines.voicing`, the same path the offline renderer takes). The smoother is the turn's,
so a result that arrives after its turn was cancelled changes nothing anyone still uses, and
the caller simply drops it (the cancelled await).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engines.face.smoothing import KalmanSmoother
from engines.voicing import lips, speak, word_starts
from rtc_server.engine_set import Engines


@dataclass(frozen=True)
class Voiced:
    """One chunk of the answer, ready to play: its audio and its lips, frame for frame."""

    text: str  # the chunk exactly as cut from the answer (trailing whitespace kept)
    pcm: np.ndarray  # int16 mono at `sample_rate`
    sample_rate: int
    offsets: np.ndarray  # [T, 68, 2] landmark offsets at the video's fps
    word_starts_s: tuple[float, ...]  # where words begin: the points a paused answer resumes

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / self.sample_rate


class Voice:
    def __init__(self, engines: Engines, fps: int) -> None:
        self._engines = engines
        self._fps = fps

    def smoother(self) -> KalmanSmoother | None:
        """A new smoother for one turn (None when smoothing is off)."""
        made: KalmanSmoother | None = self._engines.make_smoother()
        return made

    async def prepare(
        self,
        text: str,
        smoother: KalmanSmoother | None,
        slack_s: float = 0.0,
        on_stage: Callable[[str], None] | None = None,
    ) -> Voiced | None:
        """TTS then face for one chunk; None when it has nothing to say. `slack_s`: how long
        the turn's audio lasts without this chunk (it waits behind the sessions' chunks due
        sooner, `SpeechQueue`); `on_stage("tts_start" | "tts_first_audio")` marks when the
        TTS began and ended, for the turn's marks."""
        engines = self._engines
        speech = await engines.pools.speech.run(
            slack_s, speak, engines.tts, text,
            on_start=None if on_stage is None else lambda: on_stage("tts_start"),
        )
        if speech is None:
            return None
        if on_stage is not None:
            on_stage("tts_first_audio")
        raw = await engines.animate(speech.pcm, speech.sample_rate)
        offsets = lips(raw, smoother, self._fps)
        # The chunk as written, its spaces kept: the page and the history join chunks as they
        # are (a space between two chunks is the first one's; Chinese has none).
        return Voiced(text, speech.pcm, speech.sample_rate, offsets, word_starts(speech))
