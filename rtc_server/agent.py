"""The conversation: turn-taking, barge-in and start-early for one session.

States: listening -> thinking -> speaking -> listening. One Turn runs at a time; it is a
single task (LLM -> chunker -> TTS -> face -> clock) cancelled as a unit. `interrupt()` is
the one entry point for stopping the agent: it cancels the Turn, clears everything scheduled
after "now" on both tracks (the mouth is closed on the next frame), and the history keeps what
the user actually heard.

Start early: when the user pauses, the LLM starts on the stable partial transcript; the Turn
prepares its first chunk but schedules nothing until the final transcript confirms the text
(otherwise it is discarded), so the endpoint's hangover hides the LLM's first-token time.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncGenerator
from contextlib import aclosing

import numpy as np

from engines.llm.base import ChatMessage
from engines.llm.resilience import Notice
from engines.text.chunker import Chunker, ChunkerConfig
from rtc_server.config import Config
from rtc_server.engine_set import Engines
from rtc_server.events import AgentText, Transcript, TurnTimings
from rtc_server.hearing import Hearing, Utterance
from rtc_server.llm_async import stream_llm
from rtc_server.session import Session
from rtc_server.speaker import Prepared, Speaker
from rtc_server.turn import Turn

logger = logging.getLogger(__name__)
MAX_HISTORY_MESSAGES = 40  # the LLM trims to its token budget; this bounds memory


def _same_words(a: str, b: str) -> bool:
    def words(s: str) -> list[str]:
        return re.findall(r"[\w']+", s.lower())

    return words(a) == words(b)


class AgentBehaviour:
    def __init__(self, session: Session, engines: Engines, config: Config) -> None:
        self._session = session
        self._engines = engines
        self._config = config.agent
        self._llm_max_tokens = min(config.agent.max_new_tokens, config.llm.max_new_tokens)
        self._speaker = Speaker(engines, session.playout, config.agent.lead_ms / 1000)
        self._hearing = Hearing(
            asr=engines.asr, vad=config.vad, turn=config.turn, turn_model=engines.turn,
            clock=session.clock, pools=engines.pools, tasks=session.tasks, listener=self,
            on_error=session.report_error,
        )
        self.history: list[ChatMessage] = []
        self._turn: Turn | None = None
        self._turns = 0
        # Each user utterance gets its turn id when it starts, so its partials, its final and
        # the answer (early-started or not) all carry the same id on the data channel.
        self._utterance_turn: dict[int, int] = {}

    # --- Behaviour ------------------------------------------------------------------------

    def on_connected(self) -> None:
        self._session.set_state("listening")
        if self._config.greeting:
            self._start_turn(Turn(self._next_id(), user_text=""), self._config.greeting)

    def on_audio(self, frame: np.ndarray) -> None:
        self._hearing.push(frame)

    async def aclose(self) -> None:
        self._cancel_turn()

    def interrupt(self) -> None:
        """Stop speaking now: cancel the Turn and clear scheduled media (barge-in)."""
        self._cancel_turn()
        self._session.playout.clear_after()
        self._speaker.reset()
        self._session.set_state("listening")

    # --- HearingListener --------------------------------------------------------------------

    def on_speech_start(self, utterance_id: int) -> None:
        self._utterance_turn = {utterance_id: self._next_id()}
        self._session.log.debug(
            "user speech %d started (agent speaking: %s)", utterance_id, self._speaking()
        )

    def on_voice(self, utterance_id: int, voiced_ms: float) -> None:
        if voiced_ms >= self._config.barge_in_min_ms and self._speaking():
            self._session.log.info("barge-in after %.0f ms of user speech", voiced_ms)
            self._session.metrics.barge_ins.inc()
            self.interrupt()

    def on_partial(self, utterance_id: int, text: str) -> None:
        self._session.emit(Transcript(turn_id=self._turn_id(utterance_id), text=text, final=False))

    def on_pause(self, utterance_id: int, text: str) -> None:
        self._session.log.debug("pause in %d: %r", utterance_id, text)
        if not (self._config.start_early and text) or self._busy():
            return
        turn = Turn(self._turn_id(utterance_id), text, utterance_id, speculative=True)
        self._start_turn(turn)

    def on_resume(self, utterance_id: int) -> None:
        turn = self._turn
        if turn is not None and turn.speculative and turn.utterance_id == utterance_id:
            self._cancel_turn()  # the user went on talking: that guess is stale

    def on_final(self, utterance: Utterance) -> None:
        session, turn = self._session, self._turn
        session.log.debug("final %d: %r", utterance.id, utterance.text)
        if turn is not None and turn.speculative and turn.utterance_id == utterance.id:
            if utterance.text and _same_words(utterance.text, turn.user_text):
                turn.user_text = utterance.text
                self._confirm(turn, utterance)
                return
            self._cancel_turn()
        if not utterance.text:
            if not self._speaking():
                session.set_state("listening")
            return
        if self._speaking():
            session.log.info("ignored a short remark while speaking: %r", utterance.text)
            return
        text = utterance.text
        if turn is not None and not turn.speculative and not turn.started_speaking:
            text = f"{turn.user_text} {text}".strip()  # a new final replaces the thinking Turn
            self._cancel_turn()
        new = Turn(self._turn_id(utterance.id), text, utterance.id)
        self._confirm(new, utterance, start=True)

    # --- turns ------------------------------------------------------------------------------

    def _next_id(self) -> int:
        self._turns += 1
        return self._turns

    def _turn_id(self, utterance_id: int) -> int:
        if utterance_id not in self._utterance_turn:
            self._utterance_turn = {utterance_id: self._next_id()}
        return self._utterance_turn[utterance_id]

    def _busy(self) -> bool:
        return self._turn is not None or self._speaking()

    def _speaking(self) -> bool:
        """Audio is scheduled, or a Turn has begun speaking and is not over: a pause between
        two chunks (the LLM slower than speech) is still the agent's turn to talk."""
        turn = self._turn
        if turn is not None and turn.started_speaking and not turn.speculative:
            return True
        return self._session.playout.busy_until() > self._session.clock.time()

    def _confirm(self, turn: Turn, utterance: Utterance, *, start: bool = False) -> None:
        clock = self._session.clock
        turn.speculative = False
        turn.mark("voice_end", utterance.voice_end)
        turn.mark("speech_end", utterance.speech_end)
        turn.mark("asr_final", clock.time())
        self._session.emit(Transcript(turn_id=turn.id, text=utterance.text, final=True))
        self._session.set_state("thinking")
        if start:
            self._start_turn(turn)
        turn.gate.set()

    def _start_turn(self, turn: Turn, fixed_text: str | None = None) -> None:
        self._cancel_turn()
        self._turn = turn
        turn.mark("turn_start", self._session.clock.time())
        if not turn.speculative:
            turn.gate.set()
        turn.task = self._session.tasks.spawn(f"turn-{turn.id}", self._run(turn, fixed_text))

    def _cancel_turn(self) -> None:
        turn, self._turn = self._turn, None
        if turn is not None and turn.task is not None and not turn.task.done():
            turn.task.cancel()

    async def _run(self, turn: Turn, fixed_text: str | None) -> None:
        session = self._session
        try:
            if fixed_text is not None:
                await self._speak(turn, self._chunks_of(fixed_text))
            else:
                messages = [*self.history, ChatMessage("user", turn.user_text)]
                await self._speak(turn, self._answer(turn, messages))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # turn boundary: say sorry instead of going silent
            turn.failed = True
            session.report_error("turn_failed", exc)
            try:
                await self._speak(turn, self._chunks_of(self._config.apology))
            except Exception as again:  # noqa: BLE001 - nothing left to say it with
                session.log.error("apology failed too: %s", again)
        finally:
            self._record(turn)
            if self._turn is turn:
                self._turn = None

    async def _answer(self, turn: Turn, messages: list[ChatMessage]) -> AsyncGenerator[str, None]:
        clock = self._session.clock
        chunker = Chunker(ChunkerConfig(first_max_chars=self._config.first_chunk_max_chars))
        deltas = stream_llm(
            self._engines.llm, messages, max_new_tokens=self._llm_max_tokens,
            executor=self._engines.pools.llm,
        )
        # aclosing: a cancelled turn closes the stream at once, which stops the generation.
        async with aclosing(deltas):
            async for delta in deltas:
                if isinstance(delta, Notice):
                    # A holding phrase, cached answer or apology: a whole sentence, spoken at
                    # once, leaving the chunker fresh so the answer's first clause is early.
                    turn.mark(f"llm_{delta.kind}", clock.time())
                    yield str(delta)
                    continue
                turn.mark("llm_first_token", clock.time())
                for chunk in chunker.push(delta):
                    turn.mark("first_chunk", clock.time())
                    yield chunk
        for chunk in chunker.flush():
            turn.mark("first_chunk", clock.time())
            yield chunk

    async def _chunks_of(self, text: str) -> AsyncGenerator[str, None]:
        chunker = Chunker()
        for chunk in [*chunker.push(text), *chunker.flush()]:
            yield chunk

    async def _speak(self, turn: Turn, chunks: AsyncGenerator[str, None]) -> None:
        """Prepare chunk n+1 while chunk n plays; schedule once the Turn is confirmed."""
        session, speaker = self._session, self._speaker
        pending: asyncio.Queue[Prepared | None] = asyncio.Queue(maxsize=2)
        failure: list[Exception] = []

        async def produce() -> None:
            try:
                async with aclosing(chunks):
                    async for text in chunks:
                        prepared = await speaker.prepare(text, turn)
                        if prepared is not None:
                            await pending.put(prepared)
            except Exception as exc:  # handed to the consumer, which fails the turn
                failure.append(exc)
            await pending.put(None)

        producer = session.tasks.spawn(f"turn-{turn.id}-prepare", produce())
        try:
            end = session.clock.time()
            while (prepared := await pending.get()) is not None:
                await turn.gate.wait()
                chunk = speaker.schedule(prepared, turn)
                end = chunk.at + chunk.duration_s
                session.tasks.spawn(
                    f"turn-{turn.id}-announce", self._announce(turn, chunk.at, chunk.text)
                )
            if failure:
                raise failure[0]  # a failure of the LLM, TTS or face
            await session.clock.sleep_until(end)
        finally:
            producer.cancel()
        if self._turn is turn or self._turn is None:
            session.set_state("listening")

    async def _announce(self, turn: Turn, at: float, text: str) -> None:
        """At the moment a chunk starts playing: state, its text, and the turn's timings."""
        session = self._session
        await session.clock.sleep_until(at)
        if turn.task is None or turn.task.done():
            return  # cancelled before it was heard
        first = "first_audio_sent" not in turn.marks
        if first:
            turn.mark("first_audio_sent", session.clock.time())
            session.set_state("speaking")
            # Early marks, so the page shows the latency as soon as the voice starts; the
            # complete set follows when the turn ends (a holding phrase can come first).
            session.emit(TurnTimings(turn_id=turn.id, marks_ms=turn.timings_ms()))
        session.emit(AgentText(turn_id=turn.id, text=text, final=False))

    def _record(self, turn: Turn) -> None:
        """Keep the exchange in the history, cut to what the user heard."""
        heard = turn.heard_text(self._session.playout)
        if turn.user_text:
            if self.history and self.history[-1].role == "user":
                previous = self.history.pop()
                self.history.append(
                    ChatMessage("user", f"{previous.content} {turn.user_text}")
                )
            else:
                self.history.append(ChatMessage("user", turn.user_text))
        if heard:
            self.history.append(ChatMessage("assistant", heard))
        del self.history[:-MAX_HISTORY_MESSAGES]
        if turn.chunks:
            self._session.emit(AgentText(turn_id=turn.id, text="", final=True))
        if "first_audio_sent" in turn.marks:
            timings = turn.timings_ms()
            self._session.emit(TurnTimings(turn_id=turn.id, marks_ms=timings))
            if "speech_end" in turn.marks:
                self._session.metrics.observe_turn(timings)
            fields = {f"ms_{stage}": ms for stage, ms in timings.items()}
            self._session.log.info(
                "turn %d done", turn.id, extra={"heard_words": len(heard.split()), **fields}
            )
