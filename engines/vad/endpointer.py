"""Endpointer: 16 kHz int16 audio in; speech start, pause, resume and end events out.

It is the one place that decides them; an ASR stream decodes when told (`engines.asr.base`).

Contract:
- `push(frame)` takes any length of audio (the server pushes 20 ms frames; any multiple of
  10 ms is natural). Audio is re-framed into `config.frame_ms` analysis frames; a remainder
  waits for the next push. Stream time counts from the first pushed sample.
- Start: a run of voiced frames adding up to `min_speech_ms`, where unvoiced gaps longer than
  `start_gap_ms` reset the run. `SpeechStarted.t` is the run's first voiced frame;
  `SpeechStarted.audio` is `pre_roll_ms` before it through the end of the current push, so a
  listener that appends every later push holds the whole utterance.
- Inside an utterance a lone voiced frame (a click, a noise burst) does not count as speech:
  at least half of the frames in the last 60 ms must be voiced.
- Pause: `pause_ms` without speech -> `SpeechPaused(t=end of the last speech frame, pause_id,
  audio)`, once per silence run. With a turn model (`max_silence_ms` given), `audio` is the
  utterance from its pre-roll up to now, at most the last `WINDOW_S` (8) seconds; without
  one it is empty. `turn_audio()` is the same window at any moment inside an utterance.
- Resume: speech after a reported pause -> `SpeechResumed(t, audio)`, `audio` from the
  frames that confirmed the speech (the last 60 ms, plus one frame) through the end of the
  push, and `silence_ms`, the silence it ended (the speaker's pause; `engines/turn/speaker.py`
  learns from it). From then on that pause is stale.
- End, without a turn model (`max_silence_ms=None`): `end_silence_ms` of silence ->
  `SpeechEnded(t=end of the last speech frame, reason="silence")`, today's fixed hangover.
- End, with a turn model: the caller runs the model on the pause's audio (off the event loop)
  and calls `verdict(pause_id, complete)`. Complete, for the current pause and while the
  silence goes on, returns `SpeechEnded(reason="complete")` at once. Incomplete, or a verdict
  that never comes, keeps listening: `max_silence_ms` of silence ends the utterance with
  `reason="silence"`. A verdict for a stale pause (speech resumed since, or the utterance
  ended) returns None and changes nothing. `end_early()`: a sure verdict before the pause
  (asked a little into the silence) ends the utterance at once, `reason="complete"`, while
  that silence lasts (the caller knows it is the same silence).
- Forced end: `max_utterance_s` after the onset -> `SpeechEnded(t=now, reason="max_length")`;
  if the user keeps talking a new utterance starts after `min_speech_ms` of voice.
- `trailing_silence_ms` is the silence run inside an utterance (0 while the user speaks).

One Endpointer per stream (it holds state). Cost: one detector call per frame (~5 us with
webrtcvad, plus ~1 ms per 32 ms with silero confirmation); a pause copies its window once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque

import numpy as np

from engines.turn.base import WINDOW_S
from engines.vad.base import (
    EndReason,
    SpeechEnded,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    VadEvent,
    VoiceActivityDetector,
)
from engines.vad.config import SAMPLE_RATE, VadConfig
from engines.vad.errors import InvalidVadConfigError
from engines.vad.webrtc import check_pcm16

logger = logging.getLogger(__name__)

_BLIP_WINDOW_MS = 60  # window for "speech inside an utterance" (see module docstring)
_EMPTY = np.zeros(0, dtype=np.int16)


class Endpointer:
    """Turns a stream of frames into speech events (see module docstring)."""

    def __init__(
        self, config: VadConfig, detector: VoiceActivityDetector,
        max_silence_ms: int | None = None,
    ) -> None:
        if max_silence_ms is not None and max_silence_ms <= config.pause_ms:
            raise InvalidVadConfigError("the turn's max_silence_ms must be longer than pause_ms")
        self.config = config
        self._detector = detector
        self._max_silence_ms = max_silence_ms
        self._frame = config.frame_samples
        self._window = max(1, _BLIP_WINDOW_MS // config.frame_ms)
        self._turn_window = int(WINDOW_S * SAMPLE_RATE)
        self._pending_events: deque[VadEvent] = deque()
        self._pause_id = 0
        self.reset()

    def reset(self) -> None:
        """Forget all state (a new stream); stream time restarts at 0."""
        self._remainder = _EMPTY
        self._samples_done = 0  # samples analysed so far (frames, not remainder)
        self._history: deque[np.ndarray] = deque()  # raw pushes since `_history_start`
        self._history_start = 0  # sample index of the first history sample
        self._history_end = 0  # sample index after the last history sample
        self._in_speech = False
        self._onset: int | None = None  # candidate (or confirmed) onset sample
        self._voiced_samples = 0  # voiced samples in the candidate run
        self._gap_samples = 0  # current unvoiced run while a candidate is open
        self._last_speech_end = 0  # sample index where the last speech frame ended
        self._paused = False  # a SpeechPaused was emitted for the current silence run
        self._recent: deque[bool] = deque(maxlen=self._window)
        self._pending_events.clear()

    @property
    def semantic(self) -> bool:
        """True when a turn model decides the end (see `verdict`)."""
        return self._max_silence_ms is not None

    @property
    def in_speech(self) -> bool:
        """True between SpeechStarted and SpeechEnded."""
        return self._in_speech

    @property
    def time(self) -> float:
        """Stream time (s) of the end of the audio analysed so far."""
        return self._samples_done / SAMPLE_RATE

    def turn_audio(self) -> np.ndarray:
        """The turn model's window as of now, as a pause now would carry it: the utterance
        from its pre-roll, at most the last 8 s (empty outside one or without a turn model).
        For a verdict asked before the pause (`engines/asr/ahead.py`)."""
        if not (self._in_speech and self.semantic):
            return _EMPTY
        return self._turn_audio()

    @property
    def trailing_silence_ms(self) -> int:
        """Inside an utterance: ms since the last speech frame ended; 0 outside one."""
        if not self._in_speech:
            return 0
        return (self._samples_done - self._last_speech_end) * 1000 // SAMPLE_RATE

    def push(self, frame: np.ndarray) -> VadEvent | None:
        """Add audio; return the event it caused, if any.

        A push shorter than `min_speech_ms` and `pause_ms` causes at most one event. A longer
        one may cause several: they come out one per push (or all at once from `process`); a
        SpeechStarted that waits has its audio extended by the pushes it waits.
        """
        self._queue(self._analyse(frame), frame)
        return self._pending_events.popleft() if self._pending_events else None

    def process(self, audio: np.ndarray) -> list[VadEvent]:
        """Add audio of any length; return every event it caused (and any still waiting)."""
        self._queue(self._analyse(audio), audio)
        events = list(self._pending_events)
        self._pending_events.clear()
        return events

    def verdict(self, pause_id: int, complete: bool) -> SpeechEnded | None:
        """The turn model's answer for pause `pause_id`: complete ends the utterance now.

        Returns the SpeechEnded it caused, or None (incomplete, or a stale pause).
        """
        current = self._in_speech and self._paused and pause_id == self._pause_id
        if not (complete and current):
            return None
        return self._end(self._last_speech_end, "complete")

    def end_early(self) -> SpeechEnded | None:
        """A sure "complete" before the pause was reported: ends the utterance now while the
        user is silent and no pause was reported (else None, nothing changes)."""
        if not self._in_speech or self._paused or self.trailing_silence_ms == 0:
            return None
        return self._end(self._last_speech_end, "complete")

    def _queue(self, new: list[VadEvent], pushed: np.ndarray) -> None:
        waiting = [
            dataclasses.replace(e, audio=np.concatenate([e.audio, check_pcm16(pushed)]))
            if isinstance(e, SpeechStarted | SpeechResumed) else e
            for e in self._pending_events
        ]
        self._pending_events.clear()
        self._pending_events.extend(waiting + new)

    def _analyse(self, audio: np.ndarray) -> list[VadEvent]:
        audio = check_pcm16(audio)
        if audio.size == 0:
            return []
        self._history.append(audio)
        self._history_end += audio.shape[0]
        buf = np.concatenate([self._remainder, audio]) if self._remainder.size else audio
        n = buf.shape[0] // self._frame * self._frame
        self._remainder = buf[n:].copy()
        events: list[VadEvent] = []
        for start in range(0, n, self._frame):
            event = self._step(buf[start : start + self._frame])
            if event is not None:
                events.append(event)
        # A start's (or resumption's) audio must run to the end of this push (remainder too).
        events = [self._with_audio(e) if isinstance(e, SpeechStarted | SpeechResumed) else e
                  for e in events]
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
        resumed, silence = False, 0
        if voiced and sum(self._recent) * 2 >= len(self._recent):
            # The silence ran from the last speech frame to the voiced frames that ended it.
            silence = self._samples_done - self._last_speech_end - sum(self._recent) * self._frame
            self._last_speech_end = self._samples_done
            resumed, self._paused = self._paused, False
        assert self._onset is not None
        if self._samples_done - self._onset >= cfg.max_utterance_s * SAMPLE_RATE:
            return self._end(self._samples_done, "max_length")
        if resumed:
            logger.debug("speech resumed at %.2f s", self.time)
            return SpeechResumed(t=self.time, audio=_EMPTY,
                                 silence_ms=max(silence, 0) * 1000 / SAMPLE_RATE)
        silence_ms = (self._samples_done - self._last_speech_end) * 1000 / SAMPLE_RATE
        if not self._paused and silence_ms >= cfg.pause_ms:
            self._paused = True
            self._pause_id += 1
            return SpeechPaused(
                t=self._last_speech_end / SAMPLE_RATE, pause_id=self._pause_id,
                audio=self._turn_audio() if self.semantic else _EMPTY,
            )
        limit = self._max_silence_ms if self._max_silence_ms is not None else cfg.end_silence_ms
        if silence_ms >= limit:
            return self._end(self._last_speech_end, "silence")
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
        self._paused = False
        self._last_speech_end = self._samples_done
        self._recent.clear()
        self._recent.extend([True] * self._window)
        logger.debug("speech started at %.2f s", self._onset / SAMPLE_RATE)
        # Audio is attached in `_analyse`, once the whole push is in the history.
        return SpeechStarted(t=self._onset / SAMPLE_RATE, audio=_EMPTY)

    def _end(self, end_sample: int, reason: EndReason) -> SpeechEnded:
        self._in_speech = False
        self._paused = False
        self._onset = None
        self._voiced_samples = 0
        self._gap_samples = 0
        logger.debug("speech ended at %.2f s (%s)", end_sample / SAMPLE_RATE, reason)
        return SpeechEnded(t=end_sample / SAMPLE_RATE, reason=reason)

    def _pre_roll(self) -> int:
        return self.config.pre_roll_ms * SAMPLE_RATE // 1000

    def _slice(self, first: int, end: int) -> np.ndarray:
        """History samples [first, end) (clipped to what is kept), as one array."""
        first = max(first, self._history_start)
        audio = np.concatenate(self._history) if len(self._history) > 1 else self._history[0]
        return audio[first - self._history_start : end - self._history_start]

    def _with_audio(self, event: SpeechStarted | SpeechResumed) -> SpeechStarted | SpeechResumed:
        if isinstance(event, SpeechStarted):
            first = round(event.t * SAMPLE_RATE) - self._pre_roll()
        else:  # the blip window that confirmed the speech, and one frame before it
            first = round(event.t * SAMPLE_RATE) - (self._window + 1) * self._frame
        return dataclasses.replace(event, audio=self._slice(first, self._history_end).copy())

    def _turn_audio(self) -> np.ndarray:
        assert self._onset is not None
        first = max(self._onset - self._pre_roll(), self._samples_done - self._turn_window)
        return self._slice(first, self._samples_done).copy()

    def _trim_history(self) -> None:
        # Keep the pre-roll before an open candidate, else just the pre-roll window; inside
        # an utterance the listener holds the audio, so keep only the pre-roll for the next
        # one (with a turn model: the utterance's last 8 s, for the pause's window).
        # Whole pushes are dropped from the front: no copying per frame.
        keep_from = self._history_end - self._pre_roll() - self._frame
        if self._onset is not None and not self._in_speech:
            keep_from = min(keep_from, self._onset - self._pre_roll())
        if self._in_speech and self.semantic:
            assert self._onset is not None
            keep_from = min(keep_from, max(
                self._onset - self._pre_roll(), self._samples_done - self._turn_window
            ))
        while len(self._history) > 1 and self._history_start + self._history[0].shape[0] <= (
            keep_from
        ):
            self._history_start += self._history.popleft().shape[0]
