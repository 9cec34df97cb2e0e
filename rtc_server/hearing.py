"""Hearing, per session: the endpointer on the event loop, ASR and the turn model off it.

Every 20 ms frame goes through the endpointer (microseconds) on the loop, which alone decides
where speech starts, pauses, resumes and ends (`engines/vad/endpointer.py`). Audio of an
utterance is queued to one worker lane per session that drives its `AsrStream` off the loop:
`feed` while the user speaks (frames that queue up behind a slow decode are merged into one
feed; the silence after a word is fed without a partial decode, which would hold up the pause
decode), `pause()` at a pause, `finish()` at the end. The pause decode starts before the pause,
`decode_ahead_ms` into a silence (`engines/asr/ahead.py`), so at the pause its text is ready.
The silence after a pause (past its first `pause_ms`) is not fed at all, so `finish()` reuses
the pause decode, and a hesitation of 0.9 s reaches Whisper as a 0.2 s gap: measured, that
left Whisper surer of the sentence's end (13 of 20 paused piper questions ended by the model
instead of 10, same WER).

End of turn with a turn model (`[turn]`): at each `SpeechPaused` the model runs on the turn
executor with the pause's audio while the lane decodes the pause; with `check_ahead` it was
asked already, beside the early decode and on the same audio (the window up to then plus the
missing silence), so at the pause only the text may be outstanding; when the probability (and,
with `text_check`, the pause text) are in, `engines.turn.policy` gives the verdict and
`Endpointer.verdict` turns "complete" into `SpeechEnded` at once. A result for a pause that
is no longer current (speech resumed, or the utterance ended) is dropped; a model that fails
or is slow leaves the endpointer's long limit (`max_silence_ms`) to end the turn. Without a
turn model the endpointer's fixed hangover ends it. With `early_end_confidence`, a turn whose
early evidence is sure (the early decode's text and final mark, the turn model asked beside
it) ends right there, before the pause (`Endpointer.end_early`). With `text_end_threshold`, a
verdict that waits past the pause asks the text-end probe (the chat model's reading of the
pause's words, engines/llm/text_end.py), asked already on the early decode's words where the
verdict may wait, so its answer is in at the pause; each new piece of evidence (the probe,
the turn model's recheck) recomputes the verdict in one place (`_verdict`), sooner or later.
With `speaker_floor_ms`, the speaker's own pauses so far (`engines/turn/speaker.py`) bound the
wait whatever the evidence: a misheard question whose words look unfinished ends after this
speaker's longest hesitation, not after the one limit made for every speaker.

The listener learns, in order: speech start, voice duration (for barge-in), partials, the
early decode's text while its silence lasts (`on_early_text`: the pause's text, most likely,
before the pause), a pause with its stable text (for starting the LLM early), the resumption
of speech after a pause, and
the final transcript with the clock time of the endpoint and of the end of the voiced audio.
The final also carries when the last pause's evidence came in (`events.HEARING_MARKS`), so
the end of turn can be split into the pause, the turn model, the pause's transcript and the
silence the verdict asked for (on the H200 box the pause's transcript came last in 17 of 20
turns with Whisper on its CPU, 13 of 20 with Whisper on its GPU; bench/RESULTS.md section gpu),
and that evidence itself (`events.EVIDENCE`: the probabilities, and whether the probe's
answer was the early words' read), so a slow end of turn says which signal held it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from engines.asr.ahead import DecodeAhead
from engines.asr.base import AsrStream, PauseText, StreamingASR
from engines.turn import TurnConfig, TurnModel
from engines.turn.policy import (
    complete_after_ms,
    recheck_at_ms,
    recheck_window,
    rechecked_after_ms,
    sure_early,
    text_end_matters,
)
from engines.turn.speaker import bounded_wait, speaker_pauses
from engines.turn.text_end import TextEnd, normalized
from engines.vad import SAMPLE_RATE, VadConfig, create_endpointer
from engines.vad import base as events
from engines.vad.loudness import UtteranceLevel
from media.clock import MediaClock
from rtc_server.engine_set import Pools
from rtc_server.tasks import TaskSet

logger = logging.getLogger(__name__)
MAX_QUEUED_OPS = int(30.0 / 0.02)  # 30 s of frames; beyond that frames are dropped (logged)
_NO_AUDIO = np.zeros(0, dtype=np.int16)


@dataclass(frozen=True)
class Utterance:
    id: int
    text: str
    speech_end: float  # clock time the endpoint fired
    voice_end: float  # clock time the voiced audio ended
    forced: bool
    reason: str = "silence"  # "complete" (turn model), "silence" or "max_length"
    marks: dict[str, float] = field(default_factory=dict)  # HEARING_MARKS reached, clock times
    evidence: dict[str, float] = field(default_factory=dict)  # events.EVIDENCE of the verdict
    # The ASR's confidence in the words (`PauseText.confidence`, of the pause decode the final
    # reused); None where the engine can't tell or the final was decoded anew
    confidence: float | None = None
    level_db: float | None = None  # how loud it was (engines/vad/loudness.py); None: unknown


class HearingListener(Protocol):
    def on_speech_start(self, utterance_id: int) -> None: ...

    def on_voice(
        self, utterance_id: int, voiced_ms: float, level_db: float | None = None
    ) -> None: ...

    def on_partial(self, utterance_id: int, text: str) -> None: ...

    def on_early_text(self, utterance_id: int, text: str) -> None: ...

    def on_pause(self, utterance_id: int, text: str) -> None: ...

    def on_resume(self, utterance_id: int) -> None: ...

    def on_final(self, utterance: Utterance) -> None: ...


@dataclass(frozen=True)
class _End:
    speech_end: float
    voice_end: float
    reason: str
    marks: dict[str, float]
    evidence: dict[str, float] = field(default_factory=dict)
    longest_pause_ms: float = 0.0  # the longest silence the speaker spoke on after, in it
    level_db: float | None = None  # the utterance's level (`UtteranceLevel.db`)


@dataclass
class _Pause:
    """The current pause: what its verdict waits for."""

    utterance: int
    pause_id: int
    probability: float | None = None
    text: PauseText | None = None
    decided: bool = False  # the evidence is in: `after_ms` holds the verdict
    after_ms: float | None = None  # the silence that ends the turn (None: the long limit)
    again: tuple[float, float] | None = None  # the recheck's probability and its silence
    text_end: float | None = None  # the text-end probe's probability, once in
    text_end_ahead: bool = False  # ... read on the early decode's words
    speaker_limit: float | None = None  # the speaker's learnt limit, where it ended the turn
    fired: bool = False  # the verdict ended the turn
    marks: dict[str, float] = field(default_factory=dict)  # HEARING_MARKS, clock times

    def evidence(self) -> dict[str, float]:
        """What the verdict was computed on (`events.EVIDENCE`), as far as it came in."""
        found: dict[str, float | None] = {
            "turn": self.probability, "turn_again": None if self.again is None else self.again[0],
            "end": None if self.text is None else self.text.end_probability or 0.0,
            "text_end": self.text_end, "speaker_limit": self.speaker_limit,
        }
        if self.text_end is not None:
            found["text_end_ahead"] = float(self.text_end_ahead)
        return {k: round(v, 3) for k, v in found.items() if v is not None}


_Op = tuple[str, int, object]
_Read = tuple[float | Exception, float]  # the probe's probability or failure; when it was asked
_FEEDS = ("feed", "quiet")  # audio for the stream; "quiet": silence, no partial decode there


@dataclass(frozen=True)
class _WordsAhead:
    """The text-end probe asked on an early decode's words: current while no speech came
    since (`run`, as in `_Ahead`) and the pause's words are the same (`words`, `normalized`)."""

    run: int
    words: str
    read: asyncio.Task[_Read | None]


@dataclass(frozen=True)
class _Ahead:
    """An early decode's request: the speech it follows (`Hearing._speech_frames` then), the
    missing silence, and the turn model's verdict asked beside it (`check_ahead`)."""

    run: int
    rest: np.ndarray
    verdict: asyncio.Future[float] | None = None


class Hearing:
    def __init__(
        self,
        *,
        asr: StreamingASR,
        vad: VadConfig,
        clock: MediaClock,
        pools: Pools,
        tasks: TaskSet,
        listener: HearingListener,
        on_error: Callable[[str, BaseException], None],
        turn: TurnConfig | None = None,
        turn_model: TurnModel | None = None,
        text_end: TextEnd | None = None,
    ) -> None:
        self._asr = asr
        self._prompt: str | None = None  # Whisper's prompt for this session (use_prompt)
        self._turn = turn or TurnConfig()
        self._model = turn_model if self._turn.enabled else None
        self._text_end = text_end if self._turn.text_end_threshold else None
        max_silence = self._turn.max_silence_ms if self._model is not None else None
        self._endpointer = create_endpointer(vad, max_silence_ms=max_silence)
        self._speaker = speaker_pauses(self._turn) if self._model is not None else None
        self._longest_pause = 0.0  # in the current utterance (the speaker spoke on after it)
        self._cut_at: float | None = None  # voice end (stream s) of a turn the limit ended
        self._clock = clock
        self._pools = pools
        self._tasks = tasks
        self._listener = listener
        self._on_error = on_error
        # A deque (not asyncio.Queue) so the lane can merge queued feeds; bounded in _put.
        self._ops: deque[_Op] = deque()
        self._wake = asyncio.Event()
        self._utterance = 0
        self._level = UtteranceLevel()  # the current utterance's voiced frames
        self._background = False  # the current utterance: no partial or early decodes
        self._look: int | None = None  # a background utterance allowed partials until one comes
        self._looked: int | None = None  # the utterance that had its look
        self._onset_clock = 0.0
        self._push_clock = 0.0  # clock time of the latest push (the endpointer's `time`)
        self._paused = False  # after a SpeechPaused: the silence is not fed to the ASR
        self._ahead = DecodeAhead(vad.decode_ahead_ms, vad.pause_ms)
        self._pause_ms = vad.pause_ms
        self._pause: _Pause | None = None
        # The turn model's verdict asked with the early pause decode, for this silence run.
        self._early: asyncio.Future[float] | None = None
        # Counts the frames of speech: an early decode's text is current while it is unchanged.
        self._speech_frames = 0
        self._words_ahead: _WordsAhead | None = None  # the probe on the early decode's words
        self._dropped = 0
        tasks.spawn("asr-lane", self._lane())

    def use_prompt(self, prompt: str | None) -> None:
        """Whisper's prompt for this session's utterances from the next one on (None: the
        configured one): the deployment's words with the app's for this user."""
        self._prompt = prompt

    def push(self, frame: np.ndarray) -> None:
        """One 20 ms frame of 16 kHz mono int16 (called on the event loop)."""
        event = self._endpointer.push(frame)
        self._push_clock = self._clock.time()
        if event is not None:
            self._handle(event, frame)
        elif self._endpointer.in_speech:
            silence_ms = self._endpointer.trailing_silence_ms
            self._feed(frame, partial=silence_ms == 0 and (
                not self._background or self._look == self._utterance))
            if silence_ms == 0:
                self._early = None  # speech again: a verdict asked in the silence is stale
                self._speech_frames += 1
                self._level.add(frame)
            if not (self._paused or self._background):
                rest = self._ahead.step(frame, silence_ms)
                if rest is not None:
                    self._check_ahead(rest)
                    self._put(("ahead", self._utterance,
                               _Ahead(self._speech_frames, rest, self._early)))
            self._voice()
            pause = self._pause
            if pause is not None and pause.decided and not pause.fired:
                self._decide(pause)  # the silence may have grown to what the evidence asks

    def set_background(self, utterance_id: int, background: bool) -> None:
        """Speech the listener will not answer now (a television under the answer): its
        utterance gets no partial or early decodes, which would take the cores from the
        answer's voice (measured: a 4 s stall on 2 cores), only the pause decodes and the final
        that end it. False: the listener's again (it became the user's)."""
        if utterance_id == self._utterance:
            self._background = background
            if background:
                self._ahead.reset()

    def look(self, utterance_id: int) -> None:
        """One partial transcript of a background utterance (once per utterance): a single
        decode, not the stream of them that stalls the answer, to let its words say whether
        it asks something after all."""
        if utterance_id == self._utterance and self._looked != utterance_id:
            self._look = self._looked = utterance_id

    @property
    def pause_coming(self) -> bool:
        """Inside an utterance, a silence half-way to the pause's decode
        (`DecodeAhead.starts_ms`) or a pause: that decode is about to take the cores, so
        best-effort work started now (warming the LLM on a partial) would only slow it down."""
        if not self._endpointer.in_speech:
            return False
        soon_ms = max(self._ahead.starts_ms // 2, 1)
        return self._paused or self._endpointer.trailing_silence_ms >= soon_ms

    # --- endpointer events (on the loop) ----------------------------------------------------

    def _handle(self, event: events.VadEvent, frame: np.ndarray) -> None:
        if isinstance(event, events.SpeechStarted):
            self._utterance += 1
            self._background = False
            self._paused, self._pause, self._early = False, None, None
            self._longest_pause = 0.0
            if self._cut_at is not None and self._speaker is not None:
                silence_ms = (event.t - self._cut_at) * 1000
                if self._speaker.cut_off(silence_ms):  # they spoke on: a pause, not an end
                    logger.info("cut off by the speaker's limit: they spoke on after %.0f ms",
                                silence_ms)
            self._cut_at = None
            self._ahead.start(event.audio)
            self._onset_clock = self._stream_clock(event.t)
            self._level = UtteranceLevel()  # from the onset: the pre-roll is not the voice
            voiced = round((self._endpointer.time - event.t) * SAMPLE_RATE)
            self._level.add(event.audio[max(len(event.audio) - voiced, 0):])
            self._put(("open", self._utterance, None))
            self._put(("feed", self._utterance, event.audio))
            self._listener.on_speech_start(self._utterance)
        elif isinstance(event, events.SpeechPaused):
            self._feed(frame, partial=False)
            self._ahead.reset()
            self._paused = True
            self._pause = _Pause(self._utterance, event.pause_id)
            self._pause.marks["pause"] = self._push_clock
            self._put(("pause", self._utterance, event.pause_id))
            early, self._early = self._early, None
            if self._model is not None:
                self._tasks.spawn(f"turn-check-{event.pause_id}", self._check(event, early))
        elif isinstance(event, events.SpeechResumed):
            self._paused, self._pause, self._early = False, None, None
            self._longest_pause = max(self._longest_pause, event.silence_ms)
            self._speech_frames += 1
            self._level.add(event.audio)
            self._feed(event.audio)  # the resumed speech from its onset
            self._listener.on_resume(self._utterance)
            self._voice()
        elif isinstance(event, events.SpeechEnded):
            pause = self._pause
            if pause is not None and pause.speaker_limit is not None:
                self._cut_at = event.t
            self._ended(event, {} if pause is None else pause.marks,
                        {} if pause is None else pause.evidence())

    def _ended(self, event: events.SpeechEnded, marks: dict[str, float],
               evidence: dict[str, float]) -> None:
        self._paused, self._pause, self._early = False, None, None
        end = _End(self._clock.time(), self._stream_clock(event.t), event.reason, marks,
                   evidence, self._longest_pause, self._level.db)
        self._put(("finish", self._utterance, end))

    def _stream_clock(self, t: float) -> float:
        """Clock time of endpointer stream time `t`."""
        return self._push_clock - (self._endpointer.time - t)

    def _feed(self, frame: np.ndarray, partial: bool = True) -> None:
        if not self._paused:
            self._put(("feed" if partial else "quiet", self._utterance, frame))

    def _voice(self) -> None:
        if self._endpointer.trailing_silence_ms == 0:
            voiced_ms = (self._push_clock - self._onset_clock) * 1000
            self._listener.on_voice(self._utterance, voiced_ms, self._level.db)

    # --- the verdict (on the loop, fed from the turn executor and the lane) ------------------

    def _check_ahead(self, rest: np.ndarray) -> None:
        """Ask the turn model now, on the window a pause would carry (the silence's missing
        part made of `rest`, as the early decode has it): at the pause its verdict is in."""
        if self._model is None or not self._turn.check_ahead:
            return
        audio = np.concatenate([self._endpointer.turn_audio(), rest])
        loop = asyncio.get_running_loop()
        early = loop.run_in_executor(self._pools.turn, self._model.complete_probability, audio)
        early.add_done_callback(_retrieve)  # unused when the user speaks on
        self._early = early

    async def _check(self, event: events.SpeechPaused, early: asyncio.Future[float] | None) -> None:
        assert self._model is not None
        loop = asyncio.get_running_loop()
        try:
            if early is not None:
                probability = await early
            else:
                probability = await loop.run_in_executor(
                    self._pools.turn, self._model.complete_probability, event.audio
                )
        except Exception as exc:  # no verdict: the endpointer's long limit ends the turn
            self._on_error("turn_model_failed", exc)
            return
        pause = self._pause
        if pause is not None and pause.pause_id == event.pause_id:
            pause.probability = probability
            pause.marks["turn_model"] = self._clock.time()
            self._decide(pause)

    async def _end_early(
        self, utterance: int, run: int, early: PauseText, marks: dict[str, float]
    ) -> None:
        """`[turn] early_end_confidence`: with the turn model's early probability (asked
        beside this decode), a sure turn ends now, before the pause, if the silence it was
        asked in still lasts."""
        probability = self._early
        if probability is None:
            return
        try:
            p = await probability
        except Exception:  # noqa: BLE001 - the pause asks again and reports a failure there
            return
        if (run != self._speech_frames or utterance != self._utterance or self._paused
                or not sure_early(p, early, self._turn)):
            return
        ended = self._endpointer.end_early()
        if ended is not None:
            now = self._clock.time()
            self._ended(ended, {**marks, "turn_model": now, "early_end": now},
                        {"turn": round(p, 3), "end": round(early.end_probability or 0.0, 3)})

    def _paused_text(
        self, utterance: int, pause_id: int, paused: PauseText, started: float,
        ahead_done: float | None,
    ) -> None:
        pause = self._pause
        if pause is None or (pause.utterance, pause.pause_id) != (utterance, pause_id):
            return  # resumed or ended since: that text is not the pause's any more
        pause.text = paused
        pause.marks["decode_start"] = started
        if ahead_done is not None:  # the early decode's; pause_text after it: decoded again
            pause.marks["ahead_done"] = ahead_done
        pause.marks["pause_text"] = self._clock.time()
        if paused.text.strip():
            self._listener.on_pause(utterance, paused.text.strip())
        self._decide(pause)

    def _decide(self, pause: _Pause) -> None:
        """The verdict once the probability and the text are in: complete now, after the
        silence the evidence asks for (checked again on every frame), or never (the long
        limit ends the turn)."""
        if pause.probability is None or self._pause is not pause:
            return
        if self._turn.text_check and pause.text is None:
            return  # the lane's pause decode is still running
        if not pause.decided:
            pause.decided = True
            pause.after_ms = self._verdict(pause)
            logger.debug("pause %d: p=%.2f text=%r -> complete after %s ms", pause.pause_id,
                         pause.probability, pause.text, pause.after_ms)
            if self._text_end is not None and text_end_matters(
                    pause.text, self._turn, self._pause_ms, pause.after_ms):
                assert pause.text is not None
                self._tasks.spawn(f"text-end-{pause.pause_id}",
                                  self._check_text(pause, pause.text.text))
            if pause.after_ms is not None:
                pause.marks["turn_asked"] = self._voice_end() + pause.after_ms / 1000
                at = recheck_at_ms(pause.probability, pause.after_ms, self._turn,
                                   self._pause_ms)
                if at is not None:  # asked now, with the silence up to `at` made up
                    silence = self._endpointer.trailing_silence_ms
                    audio = recheck_window(self._endpointer.turn_audio(), silence, at)
                    self._tasks.spawn(f"turn-again-{pause.pause_id}",
                                      self._check_again(pause, audio, at))
        # Silent longer than this speaker ever paused: the turn ends whatever the words say.
        wait, by_speaker = bounded_wait(pause.after_ms, self._speaker)
        if wait is None or self._endpointer.trailing_silence_ms < wait:
            return
        if by_speaker:
            pause.speaker_limit = wait
            logger.debug("pause %d: the speaker's limit (%.0f ms) ended it", pause.pause_id,
                         wait)
        pause.after_ms, pause.fired = None, True
        ended = self._endpointer.verdict(pause.pause_id, True)
        if ended is not None:
            self._handle(ended, _NO_AUDIO)

    def _verdict(self, pause: _Pause) -> float | None:
        """The verdict on all the evidence in (the one place it is computed): the sooner of
        the first probability's and the recheck's, both with the text-end probe if in."""
        assert pause.probability is not None
        first = complete_after_ms(pause.probability, pause.text, self._turn, self._pause_ms,
                                  pause.text_end)
        if pause.again is None:
            return first
        probability, at = pause.again
        second = rechecked_after_ms(probability, pause.text, self._turn, self._pause_ms, at,
                                    pause.text_end)
        known = [v for v in (first, second) if v is not None]
        return min(known) if known else None

    def _revise(self, pause: _Pause) -> None:
        """New evidence in (the recheck, the probe): the verdict again, perhaps at once."""
        after = self._verdict(pause)
        if after == pause.after_ms:
            return
        pause.after_ms = after
        if after is None:
            pause.marks.pop("turn_asked", None)
        else:
            pause.marks["turn_asked"] = self._voice_end() + after / 1000
        self._decide(pause)  # perhaps at once: the silence is past it already

    def _voice_end(self) -> float:
        return self._push_clock - self._endpointer.trailing_silence_ms / 1000

    def _read_ahead(
        self, run: int, early: PauseText, verdict: asyncio.Future[float] | None
    ) -> None:
        """`[turn] text_end_threshold`: the probe reads the early decode's words as soon as the
        turn model's early probability (asked beside that decode) says the verdict will wait
        for it, so that at the pause its answer is in or nearly: asked at the pause's text, it
        came 40 to 160 ms after it live on the H200 (bench/RESULTS.md, section gpu). A verdict
        that ends the turn at the pause asks nothing: at 32 sessions on one-core workers a
        probe beside every early-started answer delayed those answers."""
        if self._text_end is None or not text_end_matters(early, self._turn, self._pause_ms,
                                                          None):
            return
        if self._words_ahead is not None:
            self._words_ahead.read.cancel()  # stale: speech came since (its forward unrun)
        read = self._tasks.spawn(f"text-end-ahead-{run}", self._read_early(early, verdict))
        self._words_ahead = _WordsAhead(run, normalized(early.text), read)

    async def _read_early(
        self, early: PauseText, verdict: asyncio.Future[float] | None
    ) -> _Read | None:
        """The probe on the early words, once the early probability (if asked) says the
        verdict waits; None where it does not (the pause asks again if its verdict does)."""
        if verdict is not None:
            try:
                probability = await asyncio.shield(verdict)  # the pause's check awaits it too
            except Exception:  # noqa: BLE001 - the pause's check reports it
                probability = None
            if probability is not None and not text_end_matters(
                    early, self._turn, self._pause_ms,
                    complete_after_ms(probability, early, self._turn, self._pause_ms)):
                return None
        return await self._read_words(early.text)

    async def _read_words(self, text: str) -> _Read:
        """The probe's probability for `text` (or its failure, reported where it is used),
        and the clock time it was asked."""
        assert self._text_end is not None
        asked = self._clock.time()
        try:
            return await self._text_end.probability(text), asked
        except Exception as exc:  # noqa: BLE001 - the pause that needs it reports it
            return exc, asked

    async def _check_text(self, pause: _Pause, text: str) -> None:
        """`[turn] text_end_threshold`: the text-end probe on the pause's words (its answer on
        the early decode's, when those were the same); its verdict (engines/turn/policy.py)
        replaces the one without it, sooner or later."""
        ahead = self._words_ahead
        read = (await ahead.read if ahead is not None and ahead.run == self._speech_frames
                and ahead.words == normalized(text) else None)
        was_ahead = read is not None
        if read is None:  # not read ahead, or the early verdict did not wait
            read = await self._read_words(text)
        probability, asked = read
        if isinstance(probability, Exception):  # the verdict without it stands
            self._on_error("text_end_failed", probability)
            return
        if self._pause is not pause or pause.fired:
            return  # resumed or ended since
        pause.marks["text_end_asked"] = asked
        pause.marks["text_end"] = self._clock.time()
        pause.text_end, pause.text_end_ahead = probability, was_ahead
        logger.debug("pause %d text end: p=%.3f", pause.pause_id, probability)
        self._revise(pause)

    async def _check_again(self, pause: _Pause, audio: np.ndarray, at: float) -> None:
        """`[turn] recheck_ms`: the turn model on the window with `at` ms of silence (made up
        where not heard yet: `recheck_window`); the sooner of the two verdicts, not before
        `at`."""
        assert self._model is not None
        loop = asyncio.get_running_loop()
        try:
            probability = await loop.run_in_executor(
                self._pools.turn, self._model.complete_probability, audio)
        except Exception as exc:  # the first verdict stands
            self._on_error("turn_model_failed", exc)
            return
        if self._pause is not pause or pause.fired:
            return  # resumed or ended since
        pause.marks["turn_again"] = self._clock.time()
        pause.again = (probability, at)
        logger.debug("pause %d asked again: p=%.2f", pause.pause_id, probability)
        self._revise(pause)

    # --- the ASR lane ----------------------------------------------------------------------

    def _put(self, op: _Op) -> None:
        if len(self._ops) >= MAX_QUEUED_OPS and op[0] in _FEEDS:
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
        ahead_started: float | None = None  # this silence run's early decode began (clock)
        ahead_done: float | None = None  # ... and returned (clock)
        heard: PauseText | None = None  # this utterance's latest pause decode
        while True:
            kind, utterance, arg = await self._next()
            try:
                if kind == "open":
                    stream = await loop.run_in_executor(pool, self._asr.open, self._prompt)
                    current, heard = utterance, None
                    continue
                if stream is None or utterance != current:
                    continue
                if kind in _FEEDS:
                    pcm, partial = self._merge_feeds(kind, arg)
                    if partial:  # speech again: an early decode before it is not the pause's
                        ahead_started = ahead_done = None
                    text = await loop.run_in_executor(pool, stream.feed, pcm, partial)
                    if text:
                        if self._look == utterance:
                            self._look = None  # had its look: background again
                        self._listener.on_partial(utterance, text)
                elif kind == "ahead":  # the pause decode, early; its verdict waits for the pause
                    assert isinstance(arg, _Ahead)
                    ahead_started = self._clock.time()
                    early = await loop.run_in_executor(pool, stream.decode_ahead, arg.rest)
                    ahead_done = self._clock.time()
                    if early and early.text.strip() and arg.run == self._speech_frames and (
                        utterance == self._utterance
                    ):  # (still that silence: no speech since it was asked)
                        self._listener.on_early_text(utterance, early.text.strip())
                        self._read_ahead(arg.run, early, arg.verdict)
                        if self._turn.early_end_confidence:
                            await self._end_early(utterance, arg.run, early,
                                                  {"decode_start": ahead_started,
                                                   "ahead_done": ahead_done})
                elif kind == "pause":
                    assert isinstance(arg, int)
                    started = ahead_started or self._clock.time()
                    paused = heard = await loop.run_in_executor(pool, stream.pause)
                    self._paused_text(utterance, arg, paused, started, ahead_done)
                elif kind == "finish":
                    assert isinstance(arg, _End)
                    final = await loop.run_in_executor(pool, stream.finish)
                    stream = None
                    if self._speaker is not None and final.strip():
                        self._speaker.heard(arg.longest_pause_ms)
                    reused = heard is not None and heard.text.strip() == final.strip()
                    self._listener.on_final(Utterance(
                        utterance, final.strip(), arg.speech_end, arg.voice_end,
                        forced=arg.reason == "max_length", reason=arg.reason, marks=arg.marks,
                        evidence=arg.evidence,
                        confidence=heard.confidence if reused and heard is not None else None,
                        level_db=arg.level_db,
                    ))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # contain ASR failures to this utterance
                stream = None
                self._on_error("asr_failed", exc)
                if kind == "finish" and isinstance(arg, _End):
                    # The utterance still ends, unheard: a listener waiting on it (an answer
                    # paused by this speech) must not wait for ever.
                    self._listener.on_final(Utterance(
                        utterance, "", arg.speech_end, arg.voice_end,
                        forced=arg.reason == "max_length", reason=arg.reason,
                    ))

    def _merge_feeds(self, kind: str, first: object) -> tuple[np.ndarray, bool]:
        """Join queued feeds of the same utterance, so a lane that fell behind catches up;
        a partial decode is allowed when the last of them was speech."""
        parts = [np.asarray(first)]
        while self._ops and self._ops[0][0] in _FEEDS:
            kind, _, pcm = self._ops.popleft()
            parts.append(np.asarray(pcm))
        pcm = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return pcm, kind == "feed"


def _retrieve(future: asyncio.Future[float]) -> None:
    """Take an early verdict's failure (the pause's check reports it when it uses it)."""
    if not future.cancelled():
        future.exception()
