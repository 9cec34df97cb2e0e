"""The pause decode, started before the pause (`[vad] decode_ahead_ms`).

At a pause (`[vad] pause_ms` of silence) the end-of-turn verdict waits for the pause decode
(its text and Whisper's confidence in the final mark, `engines/turn/policy.py`), and Whisper
base takes ~0.25 s on 2 cores: the longest wait of the end of turn. So it starts earlier:
`decode_ahead_ms` into a silence the caller asks the stream to `decode_ahead(rest)`: decode
what it was fed plus `rest`, the pause's missing silence, made here of the room as it
sounded before the utterance (the quietest stretch of its pre-roll; else the quietest frame
of the silence, repeated). The stream keeps only the real audio; it goes on being fed the real
silence, and when the pause comes after that much of it (nothing else fed), `pause()`
returns the early text at once. If the user speaks again first, the early decode was only a partial.

Measured (bench/RESULTS.md, sections turn and voice_to_voice): at 80 ms the endpoint comes
~150 ms sooner live (end of turn p50 476 -> 326 ms); offline the verdicts barely move
(complete questions ended by the model 47/80 as before, false cut-offs 5/80 against 3/80,
borderline noisy cases; the same WER). At 120 ms the live gain vanished (the early decode met the
lane's other work); at 40 ms 7/80 pauses were cut.

`DecodeAhead.step(frame, trailing_silence_ms)` says, per frame of an utterance, when to ask
and with what; the live lane (`rtc_server/hearing.py`) and the offline listener
(`engines/asr/offline.py`) both use it, so the benchmarks measure what the server does.
"""

from __future__ import annotations

import numpy as np

from engines.vad.config import FRAME_MS, SAMPLE_RATE


class DecodeAhead:
    """Per utterance: when, in a silence run, to decode ahead (see the module docstring)."""

    def __init__(self, decode_ahead_ms: int, pause_ms: int) -> None:
        self._ahead_ms = decode_ahead_ms if 0 < decode_ahead_ms < pause_ms else 0
        self._pause_ms = pause_ms
        self._silence: list[np.ndarray] = []  # frames of the current silence run
        self._asked = False  # this silence run's early decode was requested
        self._room = np.zeros(0, np.int16)  # the quietest stretch of the utterance's pre-roll

    def start(self, audio: np.ndarray) -> None:
        """A new utterance; `audio` is what `SpeechStarted` carried (its pre-roll first). The
        room is its quietest stretch as long as the padding: the pre-roll may hold the end
        of the previous utterance, the onset is speech."""
        self.reset()
        # (one frame more: the pause comes on a whole frame, see `_rest`)
        need = (self._pause_ms - self._ahead_ms + max(FRAME_MS)) * SAMPLE_RATE // 1000
        self._room = audio[:0]
        if not self._ahead_ms or audio.size < 2 * need:
            return
        hop = SAMPLE_RATE // 50
        energy = np.cumsum(np.concatenate([[0.0], audio.astype(np.float64) ** 2]))
        starts = np.arange(0, audio.size - need + 1, hop)
        quietest = int(starts[np.argmin(energy[starts + need] - energy[starts])])
        self._room = audio[quietest : quietest + need].copy()

    @property
    def enabled(self) -> bool:
        return self._ahead_ms > 0

    @property
    def starts_ms(self) -> int:
        """How far into a silence run the pause's decode begins: early, else at the pause."""
        return self._ahead_ms or self._pause_ms

    def reset(self) -> None:
        """A new silence run: the user spoke again, or a pause was reported (the endpointer
        takes over from there)."""
        self._silence, self._asked = [], False

    def step(self, frame: np.ndarray, trailing_silence_ms: int) -> np.ndarray | None:
        """For a frame inside an utterance (fed to the stream as always): the silence to
        decode ahead with, now, or None."""
        if not self._ahead_ms:
            return None
        if trailing_silence_ms == 0:  # speech (again)
            self.reset()
            return None
        if self._asked:
            return None
        self._silence.append(frame)
        if trailing_silence_ms < self._ahead_ms:
            return None
        self._asked = True
        return self._rest(trailing_silence_ms)

    def _rest(self, heard_ms: int) -> np.ndarray:
        """The pause's missing silence: the room before the utterance, else the quietest frame
        heard, repeated (the first frames after a word still carry its tail). Up to the frame
        the pause comes on: with a `pause_ms` that is not a whole number of frames (150 ms of
        20 ms frames: the pause at 160) a decode short of it was made again at the pause
        (measured on the H200: the pause's text ~100 ms later)."""
        frame = self._silence[-1].size
        pause = -(-self._pause_ms * SAMPLE_RATE // 1000 // frame) * frame  # whole frames
        missing = max(pause - heard_ms * SAMPLE_RATE // 1000, 0)
        if self._room.size >= missing:
            return self._room[:missing]
        quietest = min(self._silence, key=lambda f: float(np.mean(f.astype(np.float64) ** 2)))
        return np.resize(quietest, missing)
