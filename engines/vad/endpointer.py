"""Endpointer: 16 kHz int16 audio in, `SpeechStarted` / `SpeechEnded` events out.

Contract:
- `push(frame)` takes any length of audio (the server pushes 20 ms frames; any multiple of
  10 ms is natural). Audio is re-framed into `config.frame_ms` analysis frames; a remainder
  waits for the next push. Stream time counts from the first pushed sample.
- Start: a run of voiced frames adding up to `min_speech_ms`, where unvoiced gaps longer than
  `start_gap_ms` reset the run. `SpeechStarted.t` is the run's first voiced frame;
  `SpeechStarted.audio` is `pre_roll_ms` before it through the end of the current push, so a
  listener that appends every later push holds the whole utterance.
- End: `end_silence_ms` without speech -> `SpeechEnded(t=end of last speech frame,
  forced=False)`. Inside an utterance a lone voiced frame (a click, a noise burst) does not
  count as speech: at least half of the frames in the last 60 ms must be voiced.
- Forced end: `max_utterance_s` after the onset -> `SpeechEnded(t=now, forced=True)`; if the
  user keeps talking a new utterance starts after `min_speech_ms` of voice.
- `trailing_silence_ms` exposes the silence run inside an utterance, so a caller can tell an
  ASR stream early that the user paused (`AsrStream.pause_hint()`), before the end is final.

One Endpointer per stream (it holds state). Cost: one detector call per frame (~5 us with
webrtcvad, plus ~1 ms per 32 ms with silero confirmation).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque

import numpy as np

from engines.vad.base import SpeechEnded, SpeechStarted, VadEvent, VoiceActivityDetector
from engines.vad.config import SAMPLE_RATE, VadConfig
from engines.vad.webrtc import check_pcm16

logger = logging.getLogger(__name__)

_BLIP_WINDOW_MS = 60  # window for "speech inside an utterance" (see module docstring)


class Endpointer:
    """Turns a stream of frames into speech start/end events (see module docstring)."""

    def __init__(self, config: VadConfig, detector: VoiceActivityDetector) -> None:
        self.config = config
        self._detector = detector
        self._frame = config.frame_samples
        self._window = max(1, _BLIP_WINDOW_MS // config.frame_ms)
        self._pending_events: deque[VadEvent] = deque()
        self.reset()

    def reset(self) -> None:
        """Forget all state (a new stream); stream time restarts at 0."""
        self._remainder = np.zeros(0, dtype=np.int16)
        self._samples_done = 0  # samples analysed so far (frames, not remainder)
        self._history: list[np.ndarray] = []  # raw audio since `_history_start`
        self._history_start = 0  # sample index of the first history sample
        self._in_speech = False
        self._onset: int | None = None  # candidate (or confirmed) onset sample
        self._voiced_samples = 0  # voiced samples in the candidate run
        self._gap_samples = 0  # current unvoiced run while a candidate is open
        self._last_speech_end = 0  # sample index where the last speech frame ended
        self._recent: deque[bool] = deque(maxlen=self._window)
        self._pending_events.clear()

    @property
    def in_speech(self) -> bool:
        """True between SpeechStarted and SpeechEnded."""
        return self._in_speech

    @property
    def time(self) -> float:
        """Stream time (s) of the end of the audio analysed so far."""
        return self._samples_done / SAMPLE_RATE

    @property
    def trailing_silence_ms(self) -> int:
        """Inside an utterance: ms since the last speech frame ended; 0 outside one."""
        if not self._in_speech:
            return 0
        return (self._samples_done - self._last_speech_end) * 1000 // SAMPLE_RATE

    def push(self, frame: np.ndarray) -> VadEvent | None:
        """Add audio; return the event it caused, if any.

        A push shorter than `min_speech_ms` and `end_silence_ms` causes at most one event.
        A longer one may cause several: they come out one per push (or all at once from
        `process`); a SpeechStarted that waits has its audio extended by the pushes it waits.
        """
        self._queue(self._analyse(frame), frame)
        return self._pending_events.popleft() if self._pending_events else None

    def process(self, audio: np.ndarray) -> list[VadEvent]:
        """Add audio of any length; return every event it caused (and any still waiting)."""
        self._queue(self._analyse(audio), audio)
        events = list(self._pending_events)
        self._pending_events.clear()
        return events

    def _queue(self, new: list[VadEvent], pushed: np.ndarray) -> None:
        waiting = [
            dataclasses.replace(e, audio=np.concatenate([e.audio, check_pcm16(pushed)]))
            if isinstance(e, SpeechStarted) else e
            for e in self._pending_events
        ]
        self._pending_events.clear()
        self._pending_events.extend(waiting + new)

    def _analyse(self, audio: np.ndarray) -> list[VadEvent]:
        audio = check_pcm16(audio)
        if audio.size == 0:
            return []
        self._history.append(audio)
        buf = np.concatenate([self._remainder, audio]) if self._remainder.size else audio
        n = buf.shape[0] // self._frame * self._frame
        self._remainder = buf[n:].copy()
        events: list[VadEvent] = []
        for start in range(0, n, self._frame):
            event = self._step(buf[start : start + self._frame])
            if event is not None:
                events.append(event)
        # A start's audio must run to the end of this push (remainder included).
        events = [self._with_audio(e) if isinstance(e, SpeechStarted) else e for e in events]
        self._trim_history()
        return events

    def _step(self, frame: np.ndarray) -> VadEvent | None:
        voiced = self._detector.is_speech(frame)
        frame_start = self._samples_done
        self._samples_done += self._frame
        cfg = self.config
        if not self._in_speech:
            return self._step_idle(voiced, frame_start)
        self._recent.append(voiced)
        if voiced and sum(self._recent) * 2 >= len(self._recent):
            self._last_speech_end = self._samples_done
        assert self._onset is not None
        if self._samples_done - self._onset >= cfg.max_utterance_s * SAMPLE_RATE:
            return self._end(self._samples_done, forced=True)
        silence = self._samples_done - self._last_speech_end
        if silence * 1000 >= cfg.end_silence_ms * SAMPLE_RATE:
            return self._end(self._last_speech_end, forced=False)
        return None

    def _step_idle(self, voiced: bool, frame_start: int) -> SpeechStarted | None:
        cfg = self.config
        if not voiced:
            if self._onset is not None:
                self._gap_samples += self._frame
                if self._gap_samples * 1000 > cfg.start_gap_ms * SAMPLE_RATE:
                    self._onset = None
            return None
        if self._onset is None:
            self._onset = frame_start
            self._voiced_samples = 0
        self._gap_samples = 0
        self._voiced_samples += self._frame
        if self._voiced_samples * 1000 < cfg.min_speech_ms * SAMPLE_RATE:
            return None
        self._in_speech = True
        self._last_speech_end = self._samples_done
        self._recent.clear()
        self._recent.extend([True] * self._window)
        logger.debug("speech started at %.2f s", self._onset / SAMPLE_RATE)
        # Audio is attached in `_analyse`, once the whole push is in the history.
        return SpeechStarted(t=self._onset / SAMPLE_RATE, audio=np.zeros(0, dtype=np.int16))

    def _end(self, end_sample: int, forced: bool) -> SpeechEnded:
        self._in_speech = False
        self._onset = None
        self._voiced_samples = 0
        self._gap_samples = 0
        logger.debug("speech ended at %.2f s (forced=%s)", end_sample / SAMPLE_RATE, forced)
        return SpeechEnded(t=end_sample / SAMPLE_RATE, forced=forced)

    def _with_audio(self, event: SpeechStarted) -> SpeechStarted:
        pre = self.config.pre_roll_ms * SAMPLE_RATE // 1000
        first = max(self._history_start, round(event.t * SAMPLE_RATE) - pre)
        audio = np.concatenate(self._history)[first - self._history_start :]
        return dataclasses.replace(event, audio=audio)

    def _trim_history(self) -> None:
        # Keep the pre-roll before an open candidate, else just the pre-roll window; inside
        # an utterance the listener holds the audio, so keep only the pre-roll for the next.
        pre = self.config.pre_roll_ms * SAMPLE_RATE // 1000
        end = self._history_start + sum(a.shape[0] for a in self._history)
        keep_from = end - pre - self._frame
        if self._onset is not None and not self._in_speech:
            keep_from = min(keep_from, self._onset - pre)
        keep_from = max(keep_from, self._history_start)
        if keep_from == self._history_start:
            return
        audio = np.concatenate(self._history)[keep_from - self._history_start :]
        self._history = [audio]
        self._history_start = keep_from
