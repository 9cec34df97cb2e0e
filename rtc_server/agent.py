"""The conversation of one session: turn-taking, barge-in, false interruptions, start-early.

One `Turn` speaks at a time (`rtc_server/turn.py`); the conversation decides when turns
start, stop, pause and resume, and it alone emits the session's state (`_update_state`, from
the current turn's phase) and writes the history (`_record`, once per finished turn, from what
the audio track actually played).

- Start early: at a pause the LLM starts on the stable partial transcript; the turn prepares
  its first chunk but plays nothing until the final transcript confirms the words, else it
  is discarded (and writes nothing).
- Barge-in: `barge_in_min_ms` of user speech while the agent speaks pauses it at once (the
  voice stops within a frame, the mouth closes). Speech more than `barge_in_level_margin_db`
  under the level of the user's answered turns (engines/vad/loudness.py: a television, a
  room's talk, or a user quieter than their first question, seen in an independent check:
  ignored, never answered) pauses it too, `quiet_pauses` times a session, but only words that
  ask something of the agent (`asks_something`), not the answer's own heard back (`echoes`),
  make it an interruption; three words or more that ask nothing resume the answer and the
  rest of that speech talks over it. With the pauses spent, such speech talks over the answer
  until its words ask (its one partial, `Hearing.look`, or a pause). The interrupting
  utterance is heard whole, from its onset with the endpointer's pre-roll, whatever the agent
  was doing. If it turns out to be a false interruption (no words; only backchannels such as
  "mm-hm" or "yeah"; or a sound shorter than `false_interruption_short_ms` that Whisper wrote
  as a word or two, as it does with coughs and hums, unless a word means stop) the answer
  resumes from the start of the word it was cut in; otherwise (more than two words heard, a
  stop word, or words and speech longer than `false_interruption_max_ms`) the turn is
  interrupted and the new words get their answer. A sound with no words by twice
  `false_interruption_max_ms` (music, a fan: seen ending the answer) is talked over.
  `resume_false_interruption = false` interrupts at once instead. The rule judges the
  whole interruption, not its first utterance: one with words that looks false ("This." where
  the endpointer ended it at the speaker's first pause) keeps the answer paused for
  `false_interruption_wait_ms`, and speech in that time joins it (seen on a 2-core VM: a
  question cut to "This." was judged false and the rest of it never answered).
- A new final transcript while a turn is still thinking replaces that turn (texts joined).
- Unsure of the words (the ASR's confidence below `unsure_below`): the agent asks back
  instead of answering a question nobody asked: about the deployment's topic the words sound
  most like (`clarify_topic`: "Sorry, I'm not sure I heard you right. Did you ask about
  opening an account?"), else to say it again (`clarify_again`). A speculative answer to those
  words is dropped. The history keeps the words as heard and the question asked back, so the
  user's "yes" (or their question again) is answered by the model with both in view. Telling
  the model instead (a note beside the words) did not work: the 1.5B answered 8 of 8 misheard
  bank questions with the note as without it, asking back none (bench/RESULTS.md, hearing).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import re
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

import numpy as np

from engines.asr.text import SENTENCE_END
from engines.llm.base import ChatMessage
from engines.llm.resilience import Notice
from engines.text.vocabulary import guess_topic
from engines.tools.calls import is_tool_response
from engines.vad.loudness import SpeakerLevel
from engines.voicing import SpokenChunks
from rtc_server.acting import Acting, FollowUp
from rtc_server.config import Config
from rtc_server.engine_set import Engines
from rtc_server.events import (
    HEARING_MARKS,
    AgentText,
    State,
    Transcript,
    TurnTimings,
    UserSpeech,
)
from rtc_server.hearing import Hearing, Utterance
from rtc_server.pacing import Pacing, SentenceGate, chunk_growth
from rtc_server.session import Session
from rtc_server.speaker import Voice
from rtc_server.tool_runner import ToolRunner
from rtc_server.turn import Turn

logger = logging.getLogger(__name__)
MAX_HISTORY_MESSAGES = 40  # the LLM trims to its token budget; this bounds memory
# Said while someone else talks, they ask for nothing (English and Chinese backchannels).
BACKCHANNEL = frozenset({
    "mm", "mmm", "mhm", "mm-hm", "mm-hmm", "mmhmm", "hmm", "hm", "uh-huh", "uh", "huh", "um",
    "ah", "oh", "yeah", "yes", "yep", "ok", "okay", "right", "sure", "i see", "got it",
    "alright", "thank you", "thanks", "you", "嗯", "对", "好", "是", "哦", "嗯嗯", "对对",
    "啊", "呀", "噢", "哈", "呃", "唔", "的", "了", "行", "嗯哼",  # Chinese: one word a character
})


def _words(text: str) -> list[str]:
    # A Chinese character is a word here: Chinese has no spaces ("等一下" is three).
    return re.findall(r"[\u3400-\u9fff]|[^\W\u3400-\u9fff]+(?:['-][^\W\u3400-\u9fff]+)*",
                      text.lower())


def is_backchannel(text: str) -> bool:
    """No words, or only words that ask for nothing."""
    words = _words(text)
    if not words:
        return True
    phrase = " ".join(words)
    return phrase in BACKCHANNEL or all(w in BACKCHANNEL for w in words)


# Words that mean "stop" even in a short utterance.
INTERRUPT_WORDS = frozenset({
    "stop", "wait", "no", "hold", "pause", "sorry", "excuse", "hey", "but", "actually", "nope",
    "停", "等", "不", "别", "慢",
})


def _db(level: float | None) -> str:
    return "unknown" if level is None else f"{level:.0f} dBFS"


def is_false_interruption(text: str, voiced_s: float, short_s: float) -> bool:
    """No words, only backchannels, or a short sound with at most two words (Whisper writes
    a cough or a hum as a word or two), unless one of them means stop."""
    words = _words(text)
    if is_backchannel(text):
        return True
    return voiced_s <= short_s and len(words) <= 2 and not (set(words) & INTERRUPT_WORDS)


def is_real_interruption(text: str) -> bool:
    """Words enough to know already, before the utterance ends: more than two, or a stop."""
    words = _words(text)
    if is_backchannel(text):
        return False  # "嗯，对对": three words that ask for nothing
    return len(words) > 2 or bool(set(words) & INTERRUPT_WORDS)


# How a question or a request to the agent begins (English, and Chinese question words).
ASKING_STARTS = frozenset({
    "what", "what's", "whats", "who", "who's", "whom", "whose", "where", "where's", "when",
    "why", "how", "how's", "which", "is", "are", "am", "was", "were", "do", "does", "did",
    "can", "could", "will", "would", "should", "shall", "may", "might",
    "tell", "explain", "describe", "give", "show", "help", "please", "read",
    "say", "repeat", "find", "check", "i'd",
    "什", "怎", "为", "哪", "谁", "多", "几", "能", "可", "请", "告", "帮",
}) | INTERRUPT_WORDS
_FIRST_SENTENCE = re.compile(rf"^.*?(?:[{re.escape(''.join(SENTENCE_END))}]|$)", re.S)


def asks_something(text: str) -> bool:
    """Words addressed to the agent: three or more that begin as a question or a request
    does ("What is ...", "Tell me ...", "Wait, ..."), or a first sentence that ends in a
    question mark. A television's presenter talks in statements ("Good evening. Heavy rain
    ..."), so this lets speech that was too quiet to interrupt at once do so by its words."""
    words = _words(text)
    if len(words) < 3 or is_backchannel(text):
        return False
    first = _FIRST_SENTENCE.match(text.strip())
    return words[0] in ASKING_STARTS or bool(first and first.group().rstrip().endswith(("?", "？")))


def echoes(text: str, said: str) -> bool:
    """`text` is mostly the agent's own words heard back (`said`: what it has said): at least
    60% of its words in runs of two or more that `said` holds in the same order. A client
    without echo cancellation sends the answer back, below the user's level, and an answer
    may ask ("Would you like to know more?"): that must not interrupt it."""
    heard, spoken = _words(text), _words(said)
    if not heard or not spoken:
        return False
    blocks = difflib.SequenceMatcher(None, heard, spoken, autojunk=False).get_matching_blocks()
    return sum(b.size for b in blocks if b.size >= 2) >= 0.6 * len(heard)


def clarifying_question(heard: str, topics: tuple[str, ...], about: str, again: str) -> str:
    """What the agent asks back when unsure of `heard`: about the topic of the deployment the
    words sound most like (`about` with "{topic}"), else `again`."""
    topic = guess_topic(heard, topics)
    if topic is None:
        return again
    first, _, rest = topic.partition(" ")
    if rest and rest == rest.lower():  # a heading ("Opening an account"), not a name
        topic = f"{first.lower()} {rest}"
    return about.format(topic=topic)


def _same_words(a: str, b: str) -> bool:
    return _words(a) == _words(b)


@dataclass
class _BargeIn:
    """A user utterance that paused the agent, until it is known to be real or not."""

    utterance_id: int
    turn: Turn
    onset: float  # clock time the user's speech began
    heard: str = ""  # the words of its utterances so far, when the user went on after one
    waiting: bool = False  # looked false: the answer waits for more speech (`_hold`)
    quiet: bool = False  # under the user's level: only words that ask make it real
    words: bool = False  # a partial held words (not only backchannels): long, it is real


class AgentBehaviour:
    def __init__(self, session: Session, engines: Engines, config: Config) -> None:
        self._session = session
        self._engines = engines
        self._config = config.agent
        self._llm_max_tokens = min(config.agent.max_new_tokens, config.llm.max_new_tokens)
        self._voice = Voice(engines, session.playout.fps)
        self._hearing = Hearing(
            asr=engines.asr, vad=config.vad, turn=config.turn, turn_model=engines.turn,
            text_end=engines.text_end,
            clock=session.clock, pools=engines.pools, tasks=session.tasks, listener=self,
            on_error=session.report_error,
        )
        self.history: list[ChatMessage] = []
        tools = engines.tools
        self._acting = None if tools is None else Acting(
            tools, ToolRunner(tools, session.app_client), session, config.llm.language)
        self._turn: Turn | None = None
        self._barge: _BargeIn | None = None
        margin = config.agent.barge_in_level_margin_db
        self._level = SpeakerLevel(margin) if margin > 0 else None  # the user's, learnt
        self._too_quiet: int | None = None  # the utterance last found too quiet to interrupt
        # Quiet speech left that may pause the answer while its words are heard (`quiet_pauses`)
        self._quiet_pauses = config.agent.quiet_pauses if (
            config.agent.resume_false_interruption) else 0
        self._talked_over: int | None = None  # a sound without words the answer resumed over
        self._state: State | None = None
        self._turns = 0
        # Each user utterance gets its turn id when it starts, so its partials, its final and
        # the answer (early-started or not) all carry the same id on the data channel.
        self._utterance_turn: dict[int, int] = {}

    # --- Behaviour ------------------------------------------------------------------------

    def on_connected(self) -> None:
        self._update_state()
        if self._config.greeting:
            turn = self._new_turn(self._next_id(), "", None)
            self._begin(turn, _chunks_of(self._config.greeting, self._config.first_chunk_max_chars))

    def on_audio(self, frame: np.ndarray) -> None:
        self._hearing.push(frame)

    async def aclose(self) -> None:
        turn, self._turn = self._turn, None
        if turn is not None:
            await turn.interrupt()
        if self._acting is not None:
            await self._acting.aclose()

    def tool_result(self, call_id: str, result: object) -> bool:
        """The embedding app's result of a tool call (RTVI); False: no such call waits."""
        return self._acting is not None and self._acting.tool_result(call_id, result)

    def set_words(self, words: tuple[str, ...]) -> bool:
        """The app's names for this user (RTVI `vocabulary`): Whisper's prompt from the next
        utterance on, ahead of the deployment's words, and the names a tool call's near misses
        are mended to (a new message replaces them)."""
        prompt = self._engines.words_prompt(words)
        self._hearing.use_prompt(prompt)
        if self._acting is not None:
            self._acting.use_words(words)
        return prompt is not None

    def ask(self, text: str) -> None:
        """A typed question (RTVI `send-text`), answered like a final transcript: a running
        answer is interrupted first, as a barge-in does. Its timings count from now, the
        question being whole at once (no ASR)."""
        text = text.strip()
        if not text:
            return
        self._barge = None
        now = self._session.clock.time()
        turn = self._new_turn(self._next_id(), text, None)
        turn.mark("speech_end", now)
        turn.mark("asr_final", now)
        self._session.log.info("typed question (%d chars)", len(text))
        self._begin(turn, self._reply(turn, text))

    # --- HearingListener --------------------------------------------------------------------

    def on_speech_start(self, utterance_id: int) -> None:
        barge = self._barge
        if barge is not None and barge.waiting:  # more of the same interruption
            self._barge = dataclasses.replace(barge, utterance_id=utterance_id, waiting=False)
        self._utterance_turn = {utterance_id: self._next_id()}
        self._session.emit(UserSpeech(turn_id=self._utterance_turn[utterance_id], speaking=True))
        if self._config.warm_llm and self._turn is None and self.history:
            # The history as written (the answer as heard, its markup gone) is not what the
            # model generated, so its KV cache diverges there: read it again now, while the
            # user talks, not after a question too short to have a partial transcript.
            self._engines.llm.warm([*self.history, ChatMessage("user", "")])
        phase = self._turn.phase if self._turn else "idle"
        # Over the agent's voice at INFO: where a barge-in was expected and none came, the log
        # tells whether the speech was heard at all (then its level or length held it back).
        self._session.log.log(logging.INFO if phase == "speaking" else logging.DEBUG,
                              "user speech %d started (agent: %s)", utterance_id, phase)

    def on_voice(self, utterance_id: int, voiced_ms: float, level_db: float | None = None) -> None:
        barge, turn = self._barge_of(utterance_id), self._turn
        long = voiced_ms >= self._config.false_interruption_max_ms
        short_db = self._level.below(level_db) if self._level is not None else None
        if barge is not None:
            if barge.quiet and short_db is None:  # it grew loud enough: the user's after all
                self._barge = barge = dataclasses.replace(barge, quiet=False)
            if long and (barge.quiet or not barge.words):
                if voiced_ms >= 2 * self._config.false_interruption_max_ms:
                    self._talk_over(barge)
            elif long:
                self._real_interruption("long speech")
            return
        if utterance_id == self._talked_over:
            return  # (its words may still ask something: its pauses and final are heard)
        if turn is None or turn.phase != "speaking" or voiced_ms < self._config.barge_in_min_ms:
            return
        metrics = self._session.metrics
        if short_db is not None:
            if self._too_quiet != utterance_id:  # once per utterance: it is asked every frame
                self._too_quiet = utterance_id
                metrics.quiet_interruptions.inc()
                if self._quiet_pauses > 0:  # (paused, its partials stall no voice)
                    self._session.log.info("speech over the answer %.0f dB too quiet to be the "
                                           "user's: paused while its words are heard", short_db)
                    now = self._session.clock.time()
                    self._barge = _BargeIn(utterance_id, turn, onset=now - voiced_ms / 1000,
                                           quiet=True)
                    turn.pause()
                    return
                self._hearing.set_background(utterance_id, True)
                self._session.log.info("speech over the answer %.0f dB too quiet to be the "
                                       "user's: not interrupting", short_db)
            elif long:
                self._hearing.look(utterance_id)  # words enough: one partial says if it asks
            return
        if self._too_quiet == utterance_id:  # it grew loud enough: the user's after all
            self._hearing.set_background(utterance_id, False)
        metrics.barge_ins.inc()
        metrics.barge_in_ms.observe(voiced_ms)
        turn.barge_in_ms = round(voiced_ms, 1)
        user_db = self._level.db if self._level is not None else None
        self._session.log.info("barge-in after %.0f ms of user speech (level %s, the user's %s)",
                               voiced_ms, _db(level_db), _db(user_db))
        now = self._session.clock.time()
        self._barge = _BargeIn(utterance_id, turn, onset=now - voiced_ms / 1000)
        if self._config.resume_false_interruption:
            turn.pause()
        else:
            self._real_interruption("barge-in")

    def on_partial(self, utterance_id: int, text: str) -> None:
        self._session.emit(Transcript(turn_id=self._turn_id(utterance_id), text=text, final=False))
        if self._config.warm_llm and (self._turn is None or self._turn.phase == "waiting") and (
            not self._hearing.pause_coming
        ):
            # While the user talks, let the LLM read their words so far: at the end of the
            # turn only what changed is left to prefill. Not once they fall silent: the pause
            # decode follows within 80 ms, and a warm beside it slowed both (measured live: a
            # 6-token warm took 450 ms, the pause text came ~120 ms late and the answer
            # waited for the warm; 2 of 12 questions).
            self._engines.llm.warm([*self.history, ChatMessage("user", text)])
        barge = self._barge_of(utterance_id)
        if barge is not None and barge.quiet:
            self._judge_quiet(barge, text, final=False)
        elif barge is not None:
            if is_real_interruption(text):
                self._real_interruption(f"heard {text!r}")
            elif not is_backchannel(text):
                self._barge = dataclasses.replace(barge, words=True)
        elif self._quiet_asks(utterance_id, text):
            self._quiet_question(utterance_id, text)

    def on_early_text(self, utterance_id: int, text: str) -> None:
        if not self._config.start_on_early_decode or self._barge_of(utterance_id) is not None:
            return  # (a barge-in: its pause decides whether it interrupts)
        self._session.log.debug("early text in %d: %r", utterance_id, text)
        self._speculate(utterance_id, text)

    def on_pause(self, utterance_id: int, text: str) -> None:
        self._session.log.debug("pause in %d: %r", utterance_id, text)
        barge = self._barge_of(utterance_id)
        if barge is not None and barge.quiet:
            if not self._judge_quiet(barge, text, final=False):
                return
        elif barge is not None:
            if not is_real_interruption(text):
                return  # the final decides (a short sound may be a false interruption)
            self._real_interruption(f"heard {text!r}")
        elif self._quiet_asks(utterance_id, text):
            self._quiet_question(utterance_id, text)
        self._speculate(utterance_id, text)

    def _quiet_asks(self, utterance_id: int, text: str) -> bool:
        """Speech found too quiet to interrupt asks something, and not in the agent's own
        words (an echo of the answer)."""
        if self._too_quiet != utterance_id or not asks_something(text):
            return False
        turn = self._turn
        said = "".join(c.text for c in turn.chunks if c.started) if turn is not None else ""
        if echoes(text, said):
            self._session.log.info("quiet speech in the answer's own words (an echo?): %r", text)
            return False
        return True

    def _barge_of(self, utterance_id: int) -> _BargeIn | None:
        """The barge-in this utterance made, if it made the one pending."""
        barge = self._barge
        return barge if barge is not None and barge.utterance_id == utterance_id else None

    def _judge_quiet(self, barge: _BargeIn, text: str, final: bool) -> bool:
        """Words of quiet speech that paused the answer (a partial, a pause or its final): a
        question stops it (True: it was the user's); three words or more that ask nothing, or
        whatever the final holds, resume it, one of the session's `quiet_pauses` spent (words
        that ask later still stop it, as they would have without the pause)."""
        if self._quiet_asks(barge.utterance_id, text):
            self._barge = None
            self._quiet_question(barge.utterance_id, text)
            return True
        if final or len(_words(text)) >= 3:
            self._barge = None
            self._quiet_pauses -= 1
            self._hearing.set_background(barge.utterance_id, True)  # its partials would stall
            self._resume(barge, text)
        return False

    def _talk_over(self, barge: _BargeIn) -> None:
        """A barge-in with no words (or none that ask, if quiet) after twice
        `false_interruption_max_ms` of voice: music, a fan, a television. The answer resumes
        and the rest of that sound talks over it; words that ask in it still stop it."""
        self._barge = None
        if barge.quiet:
            self._quiet_pauses -= 1
        self._talked_over = self._too_quiet = barge.utterance_id
        self._hearing.set_background(barge.utterance_id, True)
        self._session.log.info("no words yet after %.0f ms: talking over it",
                               2 * self._config.false_interruption_max_ms)
        self._resume(barge, "")

    def _quiet_question(self, utterance_id: int, text: str) -> None:
        """Speech too quiet to interrupt that asks something: the user's after all (another
        microphone, a voice quieter than their first question's), so it interrupts now (at
        the one partial it gets after `false_interruption_max_ms`, or at its first pause)
        rather than being ignored as a remark under the answer. Answered, its level then
        counts as the user's, and their next interruption is taken at once."""
        self._hearing.set_background(utterance_id, False)
        turn = self._turn
        if turn is None or turn.phase not in ("speaking", "paused"):
            return  # the answer has ended: the words are answered as any others
        self._session.log.info("a question under the answer (%r): the user's, interrupting",
                               text)
        self._session.metrics.barge_ins.inc()
        self._interrupt(turn, "a question under the answer")

    def _speculate(self, utterance_id: int, text: str) -> None:
        """Start answering `text` before the endpoint; nothing plays until the final confirms
        it. A speculative answer to other words of the same utterance is replaced."""
        if not (self._config.start_early and text) or (
            self._acting is not None and self._acting.pending is not None
        ):
            return  # (a read-back waits: the final words decide, never a guess)
        turn = self._turn
        if turn is not None:
            if not (turn.speculative and turn.utterance_id == utterance_id) or _same_words(
                text, turn.user_text
            ):
                return
            self._discard(turn)
        turn = self._new_turn(self._turn_id(utterance_id), text, utterance_id, speculative=True)
        self._begin(turn, self._answer(turn, [*self.history, ChatMessage("user", text)]))

    def on_resume(self, utterance_id: int) -> None:
        turn = self._turn
        if turn is not None and turn.speculative and turn.utterance_id == utterance_id:
            self._discard(turn)  # the user went on talking: that guess is stale

    def on_final(self, utterance: Utterance) -> None:
        session = self._session
        session.log.debug("final %d: %r", utterance.id, utterance.text)
        session.emit(UserSpeech(turn_id=self._turn_id(utterance.id), speaking=False))
        session.emit(
            Transcript(turn_id=self._turn_id(utterance.id), text=utterance.text, final=True)
        )
        barge = self._barge_of(utterance.id)
        heard = utterance.text
        if barge is not None and barge.quiet:
            if not self._judge_quiet(barge, utterance.text, final=True):
                return
        elif barge is not None:
            self._barge = None
            heard = f"{barge.heard} {utterance.text}".strip()
            voiced_s = utterance.voice_end - barge.onset
            short_s = self._config.false_interruption_short_ms / 1000
            if is_false_interruption(heard, voiced_s, short_s) and barge.turn is self._turn:
                wait_s = self._config.false_interruption_wait_ms / 1000
                if utterance.text and wait_s > 0:  # words: the user may be going on
                    self._barge = dataclasses.replace(barge, heard=heard, waiting=True)
                    session.tasks.spawn(f"barge-{utterance.id}-hold",
                                        self._hold(self._barge, wait_s))
                    return
                self._resume(barge, heard)
                return
            if barge.turn is self._turn:
                self._stop(barge.turn)
        turn = self._turn
        unsure = self._unsure(utterance)
        if turn is not None and turn.speculative and turn.utterance_id == utterance.id:
            if utterance.text and _same_words(utterance.text, turn.user_text) and not unsure:
                turn.user_text = utterance.text
                self._learn_level(utterance)
                self._confirm(turn, utterance)
                return
            self._discard(turn)
            turn = None
        if not utterance.text:
            self._update_state()
            return
        if turn is not None and turn.phase in ("speaking", "paused"):
            if not self._quiet_asks(utterance.id, utterance.text):
                session.log.info("ignored a short remark while speaking: %r", utterance.text)
                return
            self._quiet_question(utterance.id, utterance.text)
        text = heard
        if turn is not None and turn.phase == "thinking" and turn.utterance_id is not None:
            text = f"{turn.user_text} {text}".strip()  # a new final replaces the thinking turn
            self._discard(turn)
        new = self._new_turn(self._turn_id(utterance.id), text, utterance.id)
        self._learn_level(utterance)
        self._confirm(new, utterance)
        if unsure:
            session.log.info("unsure of the words (confidence %.2f): asking back",
                             utterance.confidence)
            session.metrics.unsure_turns.inc()
            config = self._config
            asked = clarifying_question(text, self._engines.topics, config.clarify_topic,
                                        config.clarify_again)
            self._begin(new, _chunks_of(asked, config.first_chunk_max_chars))
            return  # (a call read back still waits for a clear yes)
        self._begin(new, self._reply(new, text))

    async def _hold(self, barge: _BargeIn, wait_s: float) -> None:
        """A false-looking interruption with words: the answer resumes unless the user goes
        on within `wait_s` (then `on_speech_start` has made that speech part of it)."""
        clock = self._session.clock
        await clock.sleep_until(clock.time() + wait_s)
        if self._barge is barge:
            self._barge = None
            self._resume(barge, barge.heard)

    def _resume(self, barge: _BargeIn, heard: str) -> None:
        session = self._session
        if barge.turn is not self._turn:
            return
        session.log.info("false interruption (%r): resuming", heard)
        session.metrics.false_interruptions.inc()
        barge.turn.resume()
        self._update_state()

    def _learn_level(self, utterance: Utterance) -> None:
        """The user's words get a reply: their level is the user's (not a television's)."""
        if self._level is not None:
            self._level.heard(utterance.level_db)

    def _unsure(self, utterance: Utterance) -> bool:
        """The ASR was unsure of these words (`[agent] unsure_below`): ask back rather than
        answer a misheard question."""
        confidence = utterance.confidence
        return bool(utterance.text) and confidence is not None and (
            confidence < self._config.unsure_below)

    # --- TurnHost ---------------------------------------------------------------------------

    def turn_changed(self, turn: Turn) -> None:
        if turn.phase == "speaking" and not turn.announced:
            # Early marks, so the page shows the latency as soon as the voice starts; the
            # complete set follows when the turn ends.
            turn.announced = True
            self._session.emit(TurnTimings(turn_id=turn.id, marks_ms=turn.timings_ms(),
                                           evidence=turn.evidence))
        if turn.phase == "done":
            self._record(turn)
            if self._turn is turn:
                self._turn = None
            if self._barge is not None and self._barge.turn is turn:
                self._barge = None
        self._update_state()

    def turn_said(self, turn: Turn, text: str) -> None:
        self._session.emit(AgentText(turn_id=turn.id, text=text, final=False))

    def turn_failed(self, turn: Turn, exc: Exception) -> None:
        self._session.report_error("turn_failed", exc)

    # --- turns ------------------------------------------------------------------------------

    def _next_id(self) -> int:
        self._turns += 1
        return self._turns

    def _turn_id(self, utterance_id: int) -> int:
        if utterance_id not in self._utterance_turn:
            self._utterance_turn = {utterance_id: self._next_id()}
        return self._utterance_turn[utterance_id]

    def _new_turn(
        self, turn_id: int, user_text: str, utterance_id: int | None, *, speculative: bool = False
    ) -> Turn:
        return Turn(
            turn_id, user_text, self._session.playout, self._voice, self,
            utterance_id=utterance_id, speculative=speculative,
            lead_s=self._config.lead_ms / 1000, apology=self._config.apology,
        )

    def _begin(self, turn: Turn, chunks: AsyncGenerator[str, None]) -> None:
        """Make `turn` the current one; it starts once the previous one has fully stopped."""
        previous, self._turn = self._turn, turn
        self._session.tasks.spawn(f"turn-{turn.id}-begin", self._switch(previous, turn, chunks))
        self._update_state()

    async def _switch(
        self, previous: Turn | None, turn: Turn, chunks: AsyncGenerator[str, None]
    ) -> None:
        if previous is not None:
            await previous.interrupt()
        if self._turn is turn:
            turn.start(chunks)
        else:  # replaced before it began
            await chunks.aclose()

    def _confirm(self, turn: Turn, utterance: Utterance) -> None:
        clock = self._session.clock
        turn.mark("voice_end", utterance.voice_end)
        for stage, t in utterance.marks.items():  # what the end of turn waited for
            turn.mark(stage, t)
        turn.evidence = dict(utterance.evidence)
        turn.mark("speech_end", utterance.speech_end)
        turn.mark("asr_final", clock.time())
        turn.confirm()

    def _stop(self, turn: Turn) -> None:
        """Interrupt `turn` (it records what was heard when it has stopped)."""
        if self._turn is turn:
            self._turn = None
        self._session.tasks.spawn(f"turn-{turn.id}-stop", turn.interrupt())
        self._update_state()

    def _discard(self, turn: Turn) -> None:
        """Stop a turn that must leave no trace: an early start proved wrong or replaced."""
        turn.discarded = True
        self._stop(turn)

    def _real_interruption(self, why: str) -> None:
        barge, self._barge = self._barge, None
        if barge is None:
            if self._acting is not None:
                self._acting.cancel(f"interrupted ({why})")
            return
        self._interrupt(barge.turn, why)

    def _interrupt(self, turn: Turn, why: str) -> None:
        """The user's words end `turn` (and any tool call it read back)."""
        if self._acting is not None:
            self._acting.cancel(f"interrupted ({why})")
        if not turn.is_done:
            self._session.log.info("interrupted (%s)", why)
            self._stop(turn)

    def _update_state(self) -> None:
        """The session's state, derived from the current turn: the one place it is emitted."""
        turn = self._turn
        state: State = "listening"
        if turn is not None and turn.phase in ("thinking", "speaking"):
            state = turn.phase
        if state != self._state:
            self._state = state
            self._session.set_state(state)

    def _reply(self, turn: Turn, text: str) -> AsyncGenerator[str, None]:
        """The answer to the user's `text`: from the model, unless a tool call read back
        waits for it (a clear yes runs it, a no cancels it, anything else cancels it and is
        answered as usual)."""
        messages = [*self.history, ChatMessage("user", text)]
        acting = self._acting
        reply = acting.reply(text) if acting is not None else None
        if acting is None or reply is None:
            return self._answer(turn, messages)
        if reply == "yes":
            return self._act(turn, acting.run_pending(turn, messages))
        acting.cancel("the user said no" if reply == "no" else "no clear yes")
        if reply == "no":
            return _chunks_of(acting.tools.phrases.cancelled, self._config.first_chunk_max_chars)
        return self._answer(turn, messages)

    async def _act(
        self, turn: Turn, items: AsyncGenerator[str | FollowUp, None]
    ) -> AsyncGenerator[str, None]:
        """Say what a tool call gives to say; then let the model answer what follows."""
        follow = None
        async with aclosing(items):
            async for item in items:
                if isinstance(item, FollowUp):
                    follow = item
                    continue
                turn.mark("tool_said", self._session.clock.time())
                async for chunk in _chunks_of(_phrase(item), self._config.first_chunk_max_chars):
                    yield chunk
        if follow is not None:  # (a bridge or a read-back was said: no holding phrase)
            async for chunk in self._answer(turn, follow.messages, tools=follow.tools,
                                            holding=False):
                yield chunk

    async def _answer(
        self, turn: Turn, messages: list[ChatMessage], *, tools: bool = True,
        holding: bool = True,
    ) -> AsyncGenerator[str, None]:
        clock = self._session.clock
        call: str | None = None  # a tool call the model wrote instead of words
        bridged = False
        pace = self._engines.fit.pace
        # No code or markdown spoken; the answer ends at `max_sentences`.
        chunks = SpokenChunks(self._config.first_chunk_max_chars, self._config.max_sentences,
                              growth=chunk_growth(pace))
        # A sentence starts once what is decoded carries the voice to its end (pacing.py).
        gate = SentenceGate(chunks, Pacing(pace, clock.time), hold=pace.hold_sentences)
        runway_s = self._config.runway_ms / 1000
        deltas = aiter(self._engines.llm.stream(messages, max_new_tokens=self._llm_max_tokens))
        # aclosing: a cancelled turn closes the stream at once, which stops the generation.
        async with aclosing(deltas):  # type: ignore[type-var]
            async for delta in deltas:
                if isinstance(delta, Notice) and delta.kind == "tool_start":
                    # The model began a call: the bridge phrase now, while it writes the rest
                    # (its first token comes when a word answer's would).
                    if self._acting is not None and tools and not bridged:
                        bridged = True
                        turn.mark("tool_bridge", clock.time())
                        yield _phrase(self._acting.tools.phrases.bridge)
                    continue
                if isinstance(delta, Notice) and (
                    delta.kind == "tool_progress" or (delta.kind == "holding" and not holding)
                ):
                    continue
                if isinstance(delta, Notice) and delta.kind == "tool_call":
                    turn.mark("tool_call", clock.time())
                    call = str(delta)
                    break  # closing the stream stops the generation
                if isinstance(delta, Notice):
                    # A holding phrase, cached answer or apology: a whole sentence, spoken at
                    # once, leaving the chunker fresh so the answer's first clause is early.
                    turn.mark(f"llm_{delta.kind}", clock.time())
                    yield str(delta)
                    continue
                turn.mark("llm_first_token", clock.time())
                gate.decoded(delta)
                for chunk in gate.push(chunks.push(delta)):
                    turn.mark("first_chunk", clock.time())
                    yield chunk
                # The voice's preparation per character: measured, or as this answer showed it.
                per_char = max(pace.tts_s_per_char, turn.prepare_s_per_char or 0.0)
                if runway_s and turn.runs_dry_within(runway_s + chunks.pending_size * per_char):
                    for chunk in gate.runway():
                        turn.mark("first_chunk", clock.time())
                        yield chunk
                if chunks.done:
                    break  # closing the stream stops the generation
        for chunk in gate.flush(chunks.flush()):
            turn.mark("first_chunk", clock.time())
            yield chunk
        if call is not None and self._acting is not None:
            acted = self._acting.on_call(turn, call, messages, allowed=tools, bridged=bridged)
            async for chunk in self._act(turn, acted):
                yield chunk

    def _record(self, turn: Turn) -> None:
        """Keep the exchange in the history, cut to what the user heard: once per turn, and
        never for a discarded or never confirmed one."""
        if turn.discarded or turn.speculative:
            return
        heard = turn.heard_text()
        if turn.user_text:
            last = self.history[-1] if self.history else None
            if last is not None and last.role == "user" and not is_tool_response(last.content):
                previous = self.history.pop()
                self.history.append(ChatMessage("user", f"{previous.content} {turn.user_text}"))
            else:
                self.history.append(ChatMessage("user", turn.user_text))
        self.history.extend(turn.tool_messages)  # each call and its result, as the model read
        if heard:
            self.history.append(ChatMessage("assistant", heard))
        del self.history[:-MAX_HISTORY_MESSAGES]
        if turn.chunks:
            self._session.emit(AgentText(turn_id=turn.id, text="", final=True))
        if "first_audio_sent" in turn.marks:
            timings, stall_ms = turn.timings_ms(), round(turn.stall_ms, 1)
            self._session.emit(
                TurnTimings(turn_id=turn.id, marks_ms=timings, barge_in_ms=turn.barge_in_ms,
                            stall_ms=stall_ms, evidence=turn.evidence)
            )
            self._session.metrics.turn_stall_ms.observe(turn.stall_ms)
            if "speech_end" in turn.marks:
                self._session.metrics.observe_turn(
                    {s: ms for s, ms in timings.items() if s not in HEARING_MARKS}
                )
            fields = {f"ms_{stage}": ms for stage, ms in timings.items()}
            self._session.log.info(
                "turn %d done", turn.id,
                extra={"heard_words": len(heard.split()), "interrupted": turn.interrupted,
                       "stall_ms": stall_ms, **fields},
            )


def _phrase(text: str) -> str:
    """A whole phrase said between the model's chunks, ending as they do (with a space)."""
    return text.strip() + " "


async def _chunks_of(text: str, first_max_chars: int) -> AsyncGenerator[str, None]:
    for chunk in SpokenChunks(first_max_chars).all(text):
        yield chunk
