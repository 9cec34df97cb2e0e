"""Offline hearing: endpointer, turn model and one ASR stream per utterance over a recording.

`listen(audio, asr, ...)` runs synchronously, in audio time, what `rtc_server/hearing.py` runs
live: 20 ms frames through the endpointer; frames of an utterance into its `AsrStream`
(not the silence after a `SpeechPaused`; the silence after a word without partial decodes;
the pause decode, and with `[turn] check_ahead` the turn model's call, started
`decode_ahead_ms` into a silence, `engines/asr/ahead.py`);
`pause()` and the turn model at each `SpeechPaused`, the verdict back into the endpointer
(`engines.turn.policy`: at once, or after the silence the evidence asks for); `finish()` at
`SpeechEnded`. Here the model and the pause decode
take no audio time: the verdict lands on the frame of the pause. Live, the endpoint comes
later by the model call (~26 ms) or, with the text check, by the pause decode.

Used by the CLI (`python -m engines.asr`), `bench/asr.py` and the tests, so all three measure
the same logic. An utterance still open when the audio ends is finished there. With
`[turn] speaker_floor_ms`, the speaker's pauses are learnt as live (`engines/turn/speaker.py`):
over the recording, or over several recordings of one speaker when the caller passes one
`SpeakerPauses` to each `listen`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engines.asr.ahead import DecodeAhead
from engines.asr.base import AsrStream, PauseText, StreamingASR
from engines.turn.base import TurnModel
from engines.turn.config import TurnConfig
from engines.turn.policy import (
    complete_after_ms,
    recheck_at_ms,
    recheck_window,
    rechecked_after_ms,
    sure_early,
)
from engines.turn.speaker import SpeakerPauses, bounded_wait, speaker_pauses
from engines.vad import VadConfig, create_endpointer
from engines.vad import base as events

SAMPLE_RATE = 16000
FRAME = SAMPLE_RATE * 20 // 1000


@dataclass
class PauseCheck:
    t: float  # stream time (s) the pause was reported
    voice_end: float  # stream time (s) the voice stopped
    text: str  # the stream's text at the pause
    end_probability: float | None  # the ASR's for the text's final . ? ! (None: no such score)
    probability: float | None  # the turn model's, None without one
    complete: bool  # the verdict at the pause itself
    complete_after_ms: float | None = None  # the silence that ends the turn (None: the limit)
    recheck_probability: float | None = None  # the turn model's, asked again (`recheck_ms`)
    confidence: float | None = None  # the ASR's in the words (`PauseText.confidence`)


@dataclass
class HeardUtterance:
    onset: float  # stream time (s) of the onset
    started_at: float  # stream time (s) SpeechStarted was emitted
    voice_end: float = float("nan")  # stream time (s) the voice stopped (SpeechEnded.t)
    ended_at: float = float("nan")  # stream time (s) the endpoint fired
    reason: str = "open"  # SpeechEnded.reason, or "open" if the audio ended first
    text: str = ""
    partials: list[tuple[float, str]] = field(default_factory=list)  # (stream time, text)
    pauses: list[PauseCheck] = field(default_factory=list)
    compute_s: float = 0.0  # wall time in the stream's calls (feed, pause, finish)
    partial_compute_s: float = 0.0  # wall time in the feed calls (the partials' decodes)
    longest_pause_ms: float = 0.0  # the longest silence in it that the speaker spoke on after
    by_speaker_limit: bool = False  # the speaker's learnt limit ended it, not the evidence


class _Listener:
    def __init__(
        self, asr: StreamingASR, vad: VadConfig, turn: TurnConfig,
        turn_model: TurnModel | None, on_event: Callable[[float, events.VadEvent], None] | None,
        speaker: SpeakerPauses | None = None, prompt: str | None = None,
    ) -> None:
        self._asr = asr
        self._prompt = prompt
        self._turn = turn
        self._model = turn_model
        self._endpointer = create_endpointer(
            vad, max_silence_ms=turn.max_silence_ms if turn_model is not None else None
        )
        self._on_event = on_event
        self._stream: AsrStream | None = None
        self._paused = False  # after a SpeechPaused: the silence is not fed to the ASR
        self._ahead = DecodeAhead(vad.decode_ahead_ms, vad.pause_ms)
        self._pause_ms = vad.pause_ms
        self._early: float | None = None  # the turn model's probability asked ahead
        self._due: tuple[int, float] | None = None  # (pause id, silence in ms that ends it)
        self._speaker = speaker if turn_model is not None else None
        self._by_speaker = False  # `_due` is the speaker's limit, not the evidence's verdict
        self.utterances: list[HeardUtterance] = []

    def push(self, frame: np.ndarray) -> None:
        event = self._endpointer.push(frame)
        if event is not None:
            self._handle(event, frame)
        elif self._due is not None and self._paused:
            pause_id, after = self._due
            if self._endpointer.trailing_silence_ms >= after:
                self._due = None
                self.utterances[-1].by_speaker_limit = self._by_speaker
                ended = self._endpointer.verdict(pause_id, True)
                if ended is not None:
                    self._handle(ended, np.zeros(0, np.int16))
        elif self._stream is not None and not self._paused:
            silence_ms = self._endpointer.trailing_silence_ms
            self._feed(frame, partial=silence_ms == 0)
            if silence_ms == 0:
                self._early = None
            rest = self._ahead.step(frame, silence_ms)
            if rest is not None:
                start = time.perf_counter()
                early = self._stream.decode_ahead(rest)  # the pause's text, if no speech comes
                self.utterances[-1].compute_s += time.perf_counter() - start
                if self._model is not None and self._turn.check_ahead:
                    window = np.concatenate([self._endpointer.turn_audio(), rest])
                    self._early = self._model.complete_probability(window)
                if early is not None and sure_early(self._early, early, self._turn):
                    self._end_early(early, silence_ms)

    def close(self) -> None:
        if self._stream is not None:
            start = time.perf_counter()
            utterance = self.utterances[-1]
            utterance.text = self._stream.finish().strip()
            utterance.compute_s += time.perf_counter() - start
            self._stream = None
            if self._speaker is not None and utterance.text:
                self._speaker.heard(utterance.longest_pause_ms)

    def _handle(self, event: events.VadEvent, frame: np.ndarray) -> None:
        now = self._endpointer.time
        if self._on_event is not None:
            self._on_event(now, event)
        if isinstance(event, events.SpeechStarted):
            self.close()
            last = self.utterances[-1] if self.utterances else None
            if self._speaker is not None and last is not None and last.by_speaker_limit:
                self._speaker.cut_off((event.t - last.voice_end) * 1000)
            self._stream, self._paused, self._early = self._asr.open(self._prompt), False, None
            self._due = None
            self._ahead.start(event.audio)
            self.utterances.append(HeardUtterance(onset=event.t, started_at=now))
            self._feed(event.audio)
        elif isinstance(event, events.SpeechEnded):
            utterance = self.utterances[-1]
            utterance.voice_end, utterance.ended_at, utterance.reason = event.t, now, event.reason
            self.close()
        elif isinstance(event, events.SpeechResumed):
            self._paused, self._early, self._due = False, None, None
            utterance = self.utterances[-1]
            utterance.longest_pause_ms = max(utterance.longest_pause_ms, event.silence_ms)
            self._feed(event.audio)  # the resumed speech from its onset
        elif isinstance(event, events.SpeechPaused):
            self._feed(frame, partial=False)
            self._ahead.reset()
            self._paused = True
            self._pause(event, now)

    def _feed(self, pcm: np.ndarray, partial: bool = True) -> None:
        assert self._stream is not None
        if self._paused:
            return
        start = time.perf_counter()
        text = self._stream.feed(pcm, partial)
        took = time.perf_counter() - start
        utterance = self.utterances[-1]
        utterance.compute_s += took
        utterance.partial_compute_s += took
        if text is not None:
            utterance.partials.append((self._endpointer.time, text))

    def _pause(self, event: events.SpeechPaused, now: float) -> None:
        assert self._stream is not None
        start = time.perf_counter()
        paused = self._stream.pause()
        self.utterances[-1].compute_s += time.perf_counter() - start
        probability, after = None, None
        if self._model is not None:
            early, self._early = self._early, None
            probability = (early if early is not None
                           else self._model.complete_probability(event.audio))
            after = complete_after_ms(probability, paused, self._turn, self._pause_ms)
        silence_ms = self._endpointer.trailing_silence_ms
        complete = after is not None and silence_ms >= after
        self.utterances[-1].pauses.append(PauseCheck(
            now, event.t, paused.text.strip(), paused.end_probability, probability, complete,
            after, confidence=paused.confidence,
        ))
        if after is not None and not complete:
            self._set_due(event.pause_id, after)
            assert probability is not None
            at = recheck_at_ms(probability, after, self._turn, self._pause_ms)
            if at is not None:
                self._asked_again(event.pause_id, after, at)
        elif after is None and probability is not None:
            self._set_due(event.pause_id, None)  # no verdict: only the speaker's limit
        ended = self._endpointer.verdict(event.pause_id, complete)
        if ended is not None:
            self._handle(ended, np.zeros(0, np.int16))

    def _end_early(self, early: PauseText, silence_ms: int) -> None:
        """`[turn] early_end_confidence`: the turn ends here, before the pause."""
        ended = self._endpointer.end_early()
        if ended is None:
            return
        self.utterances[-1].pauses.append(PauseCheck(
            self._endpointer.time, ended.t, early.text.strip(), early.end_probability,
            self._early, True, float(silence_ms), confidence=early.confidence,
        ))
        self._handle(ended, np.zeros(0, np.int16))

    def _asked_again(self, pause_id: int, after: float, at: float) -> None:
        """The recheck, asked at the pause as the server asks it: the turn model on the
        window with the silence up to `at` made up (`recheck_window`); the sooner of the two
        verdicts, not before `at`."""
        assert self._model is not None
        check = self.utterances[-1].pauses[-1]
        window = recheck_window(self._endpointer.turn_audio(),
                                self._endpointer.trailing_silence_ms, at)
        check.recheck_probability = self._model.complete_probability(window)
        again = rechecked_after_ms(check.recheck_probability,
                                   PauseText(check.text, check.end_probability), self._turn,
                                   self._pause_ms, at)
        if again is not None and again < after:
            check.complete_after_ms = again
            self._set_due(pause_id, again)

    def _set_due(self, pause_id: int, after: float | None) -> None:
        """The silence that ends this pause's turn: the evidence's verdict `after`, or the
        speaker's learnt limit where that comes first (as `Hearing._decide` does live)."""
        wait, self._by_speaker = bounded_wait(after, self._speaker)
        self._due = None if wait is None else (pause_id, wait)


def listen(
    audio: np.ndarray,
    asr: StreamingASR,
    *,
    vad: VadConfig | None = None,
    turn: TurnConfig | None = None,
    turn_model: TurnModel | None = None,
    on_event: Callable[[float, events.VadEvent], None] | None = None,
    speaker: SpeakerPauses | None = None,
    prompt: str | None = None,
) -> list[HeardUtterance]:
    """Every utterance in `audio` (16 kHz mono int16), with its text, pauses and timings.

    `on_event(stream_time, event)` sees each endpointer event as it happens (the CLI prints
    them). Without `turn_model` the end is the fixed hangover (`vad.end_silence_ms`).
    `speaker`: the speaker's pauses so far, to go on learning them over several recordings
    (`speaker_pauses(turn)` starts one); None: a new speaker for this recording, as a new
    session has (`[turn] speaker_floor_ms = 0`: not learnt, `max_silence_ms` for all).
    `prompt`: Whisper's prompt for this speaker (`StreamingASR.open`); None: the configured.
    """
    turn = turn or TurnConfig()
    if speaker is None:
        speaker = speaker_pauses(turn)
    listener = _Listener(asr, vad or VadConfig(), turn, turn_model, on_event, speaker, prompt)
    for i in range(0, audio.shape[0] - FRAME + 1, FRAME):
        listener.push(audio[i : i + FRAME])
    listener.close()
    return listener.utterances
