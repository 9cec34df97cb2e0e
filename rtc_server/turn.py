"""One agent turn: the owner of everything it starts (LiveKit's `SpeechHandle` is the model).

A Turn turns a stream of text chunks into scheduled voice and lips: its own tasks prepare
chunk n+1 (TTS, face, with the turn's own smoother) while chunk n plays, and schedule each
chunk on the session's playout at one frame-aligned clock time for sound and lips. It keeps
what it scheduled, so that it can say, after any ending, what the user actually heard.

Phases, reported to its host (the conversation) in one place, `_set_phase`:
`waiting` (started early on a partial transcript; nothing is scheduled until `confirm()`)
-> `thinking` -> `speaking` (from the moment the audio track sends its first sample)
<-> `paused` (a possible interruption: scheduled media cleared, the rest kept) -> `done`.

- `pause()` clears what is scheduled after now and keeps it, rewound to the start of the word
  that was cut; `resume()` plays it again and goes on (a false interruption).
- `interrupt()` is the one way to stop a turn: it clears the media, cancels every task the
  turn owns and returns once they have all stopped. Results of executor work that finish
  later are dropped with the cancelled awaits.
- The turn is done when its chunks have all played (the track reported each last sample) or
  it was interrupted; `done()` waits for that. The host then writes the history once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from engines.llm.base import ChatMessage
from engines.text.heard import heard_prefix
from engines.tools.calls import ToolCall
from media.playout import Playout
from rtc_server.speaker import Voice, Voiced
from rtc_server.tasks import TaskSet

logger = logging.getLogger(__name__)
Phase = Literal["waiting", "thinking", "speaking", "paused", "done"]

# Stage order for the data channel and the page's latency panel.
STAGES = (
    "voice_end", "speech_end", "asr_final", "llm_first_token", "first_chunk", "tts_start",
    "tts_first_audio", "face_first_frame", "first_audio_sent",
)
_FULLY_PLAYED_SLACK_S = 0.06
_PREPARED_AHEAD = 2  # chunks prepared while one plays
# A chunk this long tells the voice's time per character (a shorter one, its set-up).
_RATE_MIN_CHARS = 30


class TurnHost(Protocol):
    def turn_changed(self, turn: Turn) -> None:
        """The turn's phase changed (read `turn.phase`)."""
        ...

    def turn_said(self, turn: Turn, text: str) -> None:
        """A chunk of the answer began to play."""
        ...

    def turn_failed(self, turn: Turn, exc: Exception) -> None:
        """A stage failed; the turn says its apology next."""
        ...


@dataclass
class SpokenChunk:
    voiced: Voiced
    index: int
    heard_s: float = 0.0  # how far into the chunk the track has sent audio
    started: bool = False

    @property
    def text(self) -> str:
        return self.voiced.text

    @property
    def duration_s(self) -> float:
        return self.voiced.duration_s


@dataclass
class _Part:
    """A scheduled piece of a chunk (all of it, or the rest after a pause)."""

    chunk: SpokenChunk
    from_s: float  # where in the chunk it starts
    tag: str
    at: float = 0.0


@dataclass
class Turn:
    id: int
    user_text: str
    playout: Playout
    voice: Voice
    host: TurnHost
    utterance_id: int | None = None  # None for the greeting
    speculative: bool = False  # started on a partial; nothing plays until confirm()
    lead_s: float = 0.02
    apology: str = ""
    marks: dict[str, float] = field(default_factory=dict)
    evidence: dict[str, float] = field(default_factory=dict)  # its end of turn's (EVIDENCE)
    chunks: list[SpokenChunk] = field(default_factory=list)
    phase: Phase = "thinking"
    failed: bool = False
    interrupted: bool = False
    discarded: bool = False  # an early start proved wrong, or replaced: leaves no history
    announced: bool = False  # the early timings went out when the voice started
    barge_in_ms: float | None = None  # user speech onset -> agent audio cleared
    stall_ms: float = 0.0  # the voice ran dry between chunks: the next one was not ready
    # The slowest preparation (TTS and face) per character seen in this answer, live, beside
    # whatever else the machine does (None before a chunk long enough to tell).
    prepare_s_per_char: float | None = None
    calls: list[ToolCall] = field(default_factory=list)  # tool calls it ran (rtc_server/acting)
    # Each call and its result as the model read them: the history keeps them before the answer
    tool_messages: list[ChatMessage] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.phase = "waiting" if self.speculative else "thinking"
        self._tasks = TaskSet(f"turn-{self.id}")
        self._smoother = self.voice.smoother()
        self._confirmed = asyncio.Event()
        if not self.speculative:
            self._confirmed.set()
        self._playing = asyncio.Event()  # not paused
        self._playing.set()
        self._idle = asyncio.Event()  # nothing outstanding on the playout
        self._idle.set()
        self._outstanding: list[_Part] = []
        self._replay: list[_Part] = []
        self._parts = 0
        self._ends_at: float | None = None  # when the last part scheduled ends (stall check)
        self._preparing = 0  # chunks taken from the source and not yet scheduled
        self._done = asyncio.Event()
        self._stopping = False

    # --- control (the host) -----------------------------------------------------------------

    def start(self, chunks: AsyncIterator[str]) -> None:
        self.mark("turn_start", self.playout.clock.time())
        self._tasks.spawn("run", self._run(chunks))

    def confirm(self) -> None:
        """The final transcript confirmed an early start: it may speak now."""
        self.speculative = False
        if self.phase == "waiting":
            self._set_phase("thinking")
        self._confirmed.set()

    async def wait_confirmed(self) -> None:
        """Returns once the turn may act: at once unless it started early and the final
        transcript has not confirmed it yet (a discarded turn is cancelled meanwhile)."""
        await self._confirmed.wait()

    def pause(self) -> bool:
        """Stop the voice now but keep the rest (a possible interruption). False if it was
        not speaking."""
        if self.phase != "speaking" or self._stopping:
            return False
        self._record_heard()
        self.playout.clear_after()
        kept: list[_Part] = []
        for part in self._outstanding:
            played = self.playout.played_s(part.tag)
            resume = part.from_s
            if played > 0:  # cut mid-chunk: go back to the start of the word that was cut
                cut = part.from_s + played
                resume = max((w for w in part.chunk.voiced.word_starts_s if w <= cut),
                             default=part.from_s)
                resume = max(resume, part.from_s)
            kept.append(_Part(part.chunk, resume, ""))
        self._replay = kept + self._replay
        self._outstanding = []
        self._ends_at = None  # the time paused is not a stall
        self._playing.clear()
        self._idle.set()
        self._set_phase("paused")
        return True

    def resume(self) -> None:
        """It was a false interruption: play what was kept at once (not when the next chunk
        is ready: the model may be seconds from it) and go on."""
        if self.phase == "paused" and not self._stopping:
            self._set_phase("speaking")
            self._playing.set()
            self._play_kept()

    async def interrupt(self) -> None:
        """Stop everything this turn does; returns once all its tasks have stopped."""
        if not self._stopping:
            self._stopping = True
            self.interrupted = True
            self.playout.clear_after()
            self._outstanding, self._replay = [], []
            await self._tasks.cancel_all()
            self._finish()
        await self._done.wait()

    def runs_dry_within(self, seconds: float) -> bool:
        """Whether the voice will have nothing left to say within `seconds`: it is playing
        (not paused, not before its first chunk), no chunk is being prepared, and what is
        scheduled ends by then. The answer's source then cuts its next chunk short."""
        if self._ends_at is None or self._preparing or not self._playing.is_set():
            return False
        return self._ends_at - self.playout.clock.time() < seconds

    async def done(self) -> None:
        await self._done.wait()

    @property
    def is_done(self) -> bool:
        return self._done.is_set()

    # --- what it said -----------------------------------------------------------------------

    def mark(self, stage: str, t: float) -> None:
        """Record the first time a stage is reached (later calls are ignored)."""
        self.marks.setdefault(stage, t)

    def timings_ms(self) -> dict[str, float]:
        """Marks in ms after `speech_end` (the greeting: after the turn began)."""
        zero = self.marks.get("speech_end", self.marks.get("turn_start", 0.0))
        ordered = [s for s in STAGES if s in self.marks]
        ordered += [s for s in self.marks if s not in STAGES and s != "turn_start"]
        return {s: round((self.marks[s] - zero) * 1000.0, 1) for s in ordered}

    def heard_text(self) -> str:
        """The answer up to where playback stopped: the chunks as written, the one cut in
        proportionally, whole words (a Chinese character is one; `heard_prefix`)."""
        parts: list[str] = []
        for chunk in self.chunks:
            if chunk.heard_s >= chunk.duration_s - _FULLY_PLAYED_SLACK_S:
                parts.append(chunk.text)
                continue
            if chunk.heard_s > 0:
                parts.append(heard_prefix(chunk.text, chunk.heard_s / chunk.duration_s))
            break
        return "".join(parts).strip()

    # --- the work ---------------------------------------------------------------------------

    async def _run(self, chunks: AsyncIterator[str]) -> None:
        try:
            try:
                await self._speak(chunks)
            except Exception as exc:  # turn boundary: say sorry instead of going silent
                self.failed = True
                self.host.turn_failed(self, exc)
                if self.apology:
                    await self._speak(_single(self.apology))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the apology failed too: nothing left to say it with
            logger.error("turn %d: apology failed too: %s", self.id, exc)
        finally:
            self._finish()

    async def _speak(self, chunks: AsyncIterator[str]) -> None:
        prepared: asyncio.Queue[Voiced | BaseException | None] = asyncio.Queue(_PREPARED_AHEAD)
        producer = self._tasks.spawn("prepare", self._prepare(chunks, prepared))
        try:
            while (item := await prepared.get()) is not None:
                if isinstance(item, BaseException):
                    raise item  # a failure of the LLM, TTS or face
                await self._confirmed.wait()
                chunk = SpokenChunk(item, len(self.chunks))
                self.chunks.append(chunk)
                await self._play(_Part(chunk, 0.0, ""))
                self._preparing -= 1
            await self._drain()
        finally:
            producer.cancel()

    async def _prepare(
        self, chunks: AsyncIterator[str], out: asyncio.Queue[Voiced | BaseException | None]
    ) -> None:
        clock = self.playout.clock
        # When the audio prepared so far runs out, at the soonest (it plays from now, or
        # later): the next chunk's slack in the process's speech queue. A first chunk has none.
        runs_out: float | None = None
        try:
            async for text in chunks:
                self._preparing += 1
                began = clock.time()
                voiced = await self.voice.prepare(
                    text, self._smoother,
                    slack_s=0.0 if runs_out is None else max(0.0, runs_out - began),
                    on_stage=lambda stage: self.mark(stage, clock.time()),
                )
                if len(text.strip()) >= _RATE_MIN_CHARS:
                    took = (clock.time() - began) / len(text.strip())
                    self.prepare_s_per_char = max(self.prepare_s_per_char or 0.0, took)
                if voiced is None:
                    self._preparing -= 1
                else:
                    now = clock.time()
                    self.mark("face_first_frame", now)
                    runs_out = max(now, runs_out or now) + voiced.duration_s
                    await out.put(voiced)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to the player, which fails the turn
            await out.put(exc)
            return
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
        await out.put(None)

    async def _play(self, part: _Part) -> None:
        """Schedule `part` once playing is allowed, after whatever is kept from a pause."""
        await self._playing.wait()
        self._play_kept()
        self._schedule(part)

    def _play_kept(self) -> None:
        """Schedule what a pause kept, in order (nothing in between may pause again)."""
        while self._replay:
            self._schedule(self._replay.pop(0))

    async def _drain(self) -> None:
        """Wait until everything scheduled (and kept from pauses) has played."""
        while True:
            await self._playing.wait()
            self._play_kept()
            if not self._outstanding:
                return
            self._idle.clear()
            await self._idle.wait()

    def _schedule(self, part: _Part) -> None:
        playout, voiced = self.playout, part.chunk.voiced
        fps = playout.fps
        first_frame = round(part.from_s * fps)
        start_s = first_frame / fps  # audio and lips cut at one frame instant
        pcm = voiced.pcm[round(start_s * voiced.sample_rate) :]
        offsets = voiced.offsets[first_frame:]
        if len(pcm) == 0:
            return
        self._parts += 1
        part.tag, part.from_s = f"turn{self.id}-part{self._parts}", start_s
        ready = playout.clock.time() + self.lead_s
        if part.from_s == 0.0 and self._ends_at is not None and ready > self._ends_at:
            self.stall_ms += (ready - self._ends_at) * 1000.0  # came after the last one ended
        part.at = playout.frame_time(max(ready, playout.busy_until()))
        self._ends_at = part.at + len(pcm) / voiced.sample_rate
        playout.schedule_audio(
            pcm, voiced.sample_rate, part.at, tag=part.tag,
            on_start=lambda t: self._started(part, t), on_end=lambda t: self._ended(part, t),
        )
        if len(offsets):
            playout.schedule_pose(offsets, part.at)
        self._outstanding.append(part)
        self._idle.clear()

    # --- the audio track's reports (on the event loop, inside its recv) ---------------------

    def _started(self, part: _Part, t: float) -> None:
        if self._stopping:
            return
        if "first_audio_sent" not in self.marks:
            self.mark("first_audio_sent", t)
        if not part.chunk.started:
            part.chunk.started = True
            self.host.turn_said(self, part.chunk.text)
        if self.phase in ("thinking", "waiting"):
            self._set_phase("speaking")

    def _ended(self, part: _Part, t: float) -> None:
        part.chunk.heard_s = max(part.chunk.heard_s, part.chunk.duration_s)
        if part in self._outstanding:
            self._outstanding.remove(part)
        if not self._outstanding:
            self._idle.set()

    def _record_heard(self) -> None:
        for part in self._outstanding:
            played = self.playout.played_s(part.tag)
            part.chunk.heard_s = max(part.chunk.heard_s, part.from_s + played)

    def _finish(self) -> None:
        if self._done.is_set():
            return
        self._record_heard()
        self._outstanding = []
        self._set_phase("done")
        self._done.set()

    def _set_phase(self, phase: Phase) -> None:
        if phase != self.phase:
            self.phase = phase
            self.host.turn_changed(self)


async def _single(text: str) -> AsyncIterator[str]:
    yield text
