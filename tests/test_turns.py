"""Turn-taking on a fake clock with scripted fake engines: state sequences, the history after
every kind of ending, start-early kept and discarded, barge-in then a new answer, false
interruptions that resume, failures answered with an apology.

The session is real (its peer connection is never negotiated) and runs on a `FakeTimer`;
the test is the far end: it pulls 20 ms frames from an audio track on the session's playout,
as aiortc's sender would, so "the voice started" and "it played to the end" are what a track
really sent. Engines are test doubles and executors run inline: no threads, no sleeping (the
rig: `tests/support/turns.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from engines.llm.base import ChatMessage
from rtc_server.agent import (
    asks_something,
    clarifying_question,
    echoes,
    is_backchannel,
    is_false_interruption,
    is_real_interruption,
)
from rtc_server.hearing import Utterance
from rtc_server.turn import Turn
from tests.support.fakes import use_level_detector, words
from tests.support.turns import REPLY, Harness, speech_duration


@pytest.fixture(autouse=True)
def level_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    use_level_detector(monkeypatch)


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    await harness.close()


async def test_a_question_goes_listening_thinking_speaking_listening(h: Harness) -> None:
    await h.ask(1, "What is the answer?")
    assert h.states() == ["listening", "thinking"]
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None and "first_audio_sent" not in turn.marks
    await h.listen(speech_duration(REPLY) + 1.0)
    assert h.states() == ["listening", "thinking", "speaking", "listening"]
    assert h.loud_s() == pytest.approx(0.08 * len(REPLY.split()), abs=0.1)
    assert h.agent.history == [
        ChatMessage("user", "What is the answer?"), ChatMessage("assistant", REPLY),
    ]
    timings = h.sent("timings")[-1]["marks_ms"]
    assert timings["first_audio_sent"] > 0 and timings["first_audio_sent"] >= timings["asr_final"]
    # The chunks as written, spaces included: joined as they are, they are the answer (they
    # were stripped, and the page put a space between any two, wrong for Chinese).
    texts = [e["text"] for e in h.sent("agent_text") if e["text"]]
    assert "".join(texts).strip() == REPLY


async def test_nothing_counts_as_said_until_the_track_sends_it(h: Harness) -> None:
    """Regression: first_audio_sent was taken when an announce task woke up, not when the
    track sent the first sample; a track that never pulls must never report speaking."""
    await h.ask(1, "Hello?")
    await h.settle()
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None and turn.chunks  # scheduled ...
    assert "first_audio_sent" not in turn.marks and "speaking" not in h.states()  # ... not sent
    await h.listen(0.2)
    assert "first_audio_sent" in turn.marks and h.states()[-1] == "speaking"


async def test_start_early_is_kept_when_the_final_matches(h: Harness) -> None:
    h.agent.on_speech_start(1)
    h.agent.on_pause(1, "what is the answer")
    await h.settle()
    assert h.tts.texts and not h.session.playout.busy_until()  # prepared, nothing scheduled
    assert h.states() == ["listening"]
    await h.listen(0.3)  # the endpointer's hangover
    h.agent.on_final(h.utterance(1, "What is the answer?"))
    await h.listen(speech_duration(REPLY) + 1.0)
    assert len(h.llm.calls) == 1  # the early generation was kept, not redone
    assert h.agent.history[0] == ChatMessage("user", "What is the answer?")
    assert len(h.agent.history) == 2
    assert h.sent("timings")[-1]["marks_ms"]["llm_first_token"] < 0  # before the endpoint


async def test_start_early_is_discarded_without_trace_when_the_final_differs(
    h: Harness,
) -> None:
    """Regression: a discarded early turn wrote "what is the" into the history before the
    real question."""
    h.llm.release.clear()
    h.agent.on_speech_start(1)
    h.agent.on_pause(1, "what is the")
    await h.settle()
    h.agent.on_final(h.utterance(1, "What is the weather like?"))
    h.llm.release.set()
    await h.listen(speech_duration(REPLY) + 1.0)
    assert [c[-1].content for c in h.llm.calls] == ["what is the", "What is the weather like?"]
    assert h.agent.history == [
        ChatMessage("user", "What is the weather like?"), ChatMessage("assistant", REPLY),
    ]


async def test_the_early_decode_starts_the_answer_only_when_configured(h: Harness) -> None:
    h.agent.on_speech_start(1)
    h.agent.on_early_text(1, "what is the answer")
    await h.settle()
    assert h.agent._turn is None and not h.llm.calls  # noqa: SLF001 - off by default


async def test_an_answer_started_on_the_early_decode_is_kept_or_replaced_by_the_pause() -> None:
    h = Harness(start_on_early_decode=True)
    try:
        h.llm.release.clear()
        h.agent.on_speech_start(1)
        h.agent.on_early_text(1, "what is the")
        await h.settle()
        early = h.agent._turn  # noqa: SLF001
        assert early is not None and early.speculative and h.states() == ["listening"]
        h.agent.on_pause(1, "What is the...")  # the same words: kept
        await h.settle()
        assert h.agent._turn is early  # noqa: SLF001
        h.agent.on_pause(1, "what is the weather")  # decoded again, other words: replaced
        await h.settle()
        assert early.is_done and early.discarded
        h.llm.release.set()
        h.agent.on_final(h.utterance(1, "What is the weather?"))
        await h.listen(speech_duration(REPLY) + 1.0)
        assert [c[-1].content for c in h.llm.calls] == ["what is the", "what is the weather"]
        assert h.agent.history == [
            ChatMessage("user", "What is the weather?"), ChatMessage("assistant", REPLY),
        ]
    finally:
        await h.close()


async def test_speech_resuming_discards_the_early_start(h: Harness) -> None:
    h.llm.release.clear()
    h.agent.on_speech_start(1)
    h.agent.on_pause(1, "tell me")
    await h.settle()
    turn = h.agent._turn  # noqa: SLF001
    h.agent.on_resume(1)
    await h.settle()
    assert turn is not None and turn.is_done and h.agent._turn is None  # noqa: SLF001
    assert h.llm.closed_early == 1 and h.agent.history == []
    assert h.states() == ["listening"]


async def test_a_new_final_while_thinking_replaces_the_turn(h: Harness) -> None:
    h.llm.release.clear()
    await h.ask(1, "What is")
    await h.ask(2, "the capital of Peru?")
    h.llm.release.set()
    await h.listen(speech_duration(REPLY) + 1.0)
    assert h.llm.calls[-1][-1].content == "What is the capital of Peru?"
    assert h.agent.history == [
        ChatMessage("user", "What is the capital of Peru?"), ChatMessage("assistant", REPLY),
    ]


async def test_barge_in_stops_the_voice_and_the_new_question_is_answered(h: Harness) -> None:
    await h.ask(1, "Count for me.")
    await h.listen(0.5)
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None and turn.phase == "speaking"
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, voiced_ms=100)  # too short: nothing happens
    assert turn.phase == "speaking"
    h.agent.on_voice(2, voiced_ms=200)  # a barge-in: the voice stops at once
    assert turn.phase == "paused" and h.states()[-1] == "listening"
    assert h.session.playout.busy_until() <= h.session.clock.time() + 1e-6
    before = len(h.heard)
    await h.listen(0.3)
    assert all(np.abs(f).max() == 0 for f in h.heard[before:])  # silence after the cut
    h.agent.on_partial(2, "what time is")  # three words: a real interruption
    await h.settle()
    assert turn.is_done and turn.interrupted
    heard = h.agent.history[-1].content
    assert h.agent.history[0] == ChatMessage("user", "Count for me.")
    assert heard and REPLY.startswith(heard) and len(heard) < len(REPLY)
    h.agent.on_final(h.utterance(2, "What time is it?"))
    await h.listen(speech_duration(REPLY) + 1.0)
    assert h.llm.calls[-1] == [
        ChatMessage("user", "Count for me."), ChatMessage("assistant", heard),
        ChatMessage("user", "What time is it?"),
    ]
    assert h.states() == ["listening", "thinking", "speaking", "listening", "thinking",
                          "speaking", "listening"]
    assert h.sent("timings")[1]["barge_in_ms"] == 200  # the interrupted turn's timings
    assert h.session.metrics.barge_ins._value.get() == 1  # noqa: SLF001


@pytest.mark.parametrize("remark", ["mm-hm", "", "Yeah.", "uh huh"])
async def test_a_false_interruption_resumes_where_it_was_cut(h: Harness, remark: str) -> None:
    await h.ask(1, "Tell me.")
    await h.listen(0.55)  # into the middle of a word
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, voiced_ms=200)
    assert turn.phase == "paused"
    await h.listen(0.4)
    h.agent.on_final(h.utterance(2, remark))
    await h.settle()  # (words: after `false_interruption_wait_ms` without more speech)
    assert turn.phase == "speaking" and h.states()[-2:] == ["listening", "speaking"]
    await h.listen(speech_duration(REPLY) + 1.5)
    assert turn.is_done and not turn.interrupted
    assert h.agent.history == [ChatMessage("user", "Tell me."), ChatMessage("assistant", REPLY)]
    # Every word was heard whole: the cut word was played again from its start.
    assert h.loud_s() >= 0.08 * len(REPLY.split())
    assert h.session.metrics.false_interruptions._value.get() == 1  # noqa: SLF001
    # Each chunk announced once, though one of them was played twice.
    assert [e["text"] for e in h.sent("agent_text") if e["text"]] == [
        c.text for c in turn.chunks]


async def test_a_false_interruption_resumes_at_once_while_the_answer_is_still_thought(
    h: Harness,
) -> None:
    """The model has not written the next sentence yet when a backchannel pauses the answer:
    the rest of the cut chunk plays as soon as it is judged false, not when the next chunk
    comes (seen on 2 cores: seconds of silence after every "okay")."""
    h.llm.hold_at = 7  # "Sure. The answer is forty two," then the model stalls
    await h.ask(1, "Tell me.")
    await h.listen(0.25)
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None and turn.phase == "speaking"
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, voiced_ms=200)
    assert turn.phase == "paused"
    await h.listen(0.3)
    h.agent.on_final(h.utterance(2, ""))  # no words: resumed at once
    await h.settle()
    assert turn.phase == "speaking"
    before = len(h.heard)
    await h.listen(0.3)
    assert any(np.abs(f).max() > 1000 for f in h.heard[before:])  # the voice goes on now
    h.llm.go_on.set()
    await h.listen(speech_duration(REPLY) + 1.5)
    assert turn.is_done and not turn.interrupted


async def barged_in(h: Harness, into_s: float) -> Turn:
    """The answer to "Tell me." `into_s` into its voice, paused by 200 ms of utterance 2."""
    await h.ask(1, "Tell me.")
    await h.listen(into_s)
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, voiced_ms=200)
    return turn


async def test_an_interruption_is_judged_on_all_its_words_not_its_first(h: Harness) -> None:
    """The endpointer ended the interrupting question at its first pause ("This."): alone
    it looks false, but the user goes on within `false_interruption_wait_ms`, so the rest joins
    it, the answer stops and the whole question is answered."""
    turn = await barged_in(h, 0.5)
    h.agent.on_final(h.utterance(2, "This."))
    assert turn.phase == "paused"  # not resumed yet: the user may go on
    h.agent.on_speech_start(3)  # ... and does, before the wait ran out
    await h.settle()
    assert turn.phase == "paused" and not h.session.metrics.false_interruptions._value.get()  # noqa: SLF001
    h.agent.on_voice(3, voiced_ms=300)
    h.agent.on_final(h.utterance(3, "is the capital of Japan?"))
    await h.listen(speech_duration(REPLY) + 1.0)
    assert turn.is_done and turn.interrupted
    assert h.llm.calls[-1][-1] == ChatMessage("user", "This. is the capital of Japan?")


async def answering(h: Harness, level_db: float) -> Turn:
    """The answer to a question the user asked at `level_db`, playing."""
    h.agent.on_speech_start(1)
    h.agent.on_final(dataclasses.replace(h.utterance(1, "Tell me."), level_db=level_db))
    await h.settle()
    await h.listen(0.4)
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None and turn.phase == "speaking"
    return turn


async def talked_over(h: Harness, turn: Turn, uid: int, text: str) -> None:
    """Speech 15 dB under the user's (-20 dB) goes on over `turn` and ends: it plays on."""
    h.agent.on_speech_start(uid)
    for voiced_ms in (200, 400, 1300):
        h.agent.on_voice(uid, voiced_ms, level_db=-35.0)
    assert turn.phase == "speaking"
    h.agent.on_final(dataclasses.replace(h.utterance(uid, text), level_db=-35.0))
    await h.listen(0.3)
    assert turn.phase == "speaking" and len(h.llm.calls) == 1


async def test_speech_far_below_the_user_s_level_pauses_once_then_talks_over(
    h: Harness,
) -> None:
    """A television under the answer: speech 15 dB below the level of the user's answered
    question pauses it while its words are heard (counted once), and its statement resumes
    it; the session's one quiet pause spent, the next such speech talks over the answer and,
    ending while it plays, is not taken for a question; the user's own level interrupts as
    always."""
    turn = await answering(h, level_db=-20.0)
    h.agent.on_speech_start(2)
    for voiced_ms in (200, 220, 400, 1300):  # long, but quiet: its words decide
        h.agent.on_voice(2, voiced_ms, level_db=-35.0)
    assert turn.phase == "paused"
    assert h.session.metrics.quiet_interruptions._value.get() == 1  # noqa: SLF001
    h.agent.on_partial(2, "And")  # (the look) a word: too few to tell
    assert turn.phase == "paused"
    h.agent.on_pause(2, "And now the weather.")
    assert turn.phase == "speaking"
    h.agent.on_final(dataclasses.replace(h.utterance(2, "And now the weather for the week."),
                                         level_db=-35.0))
    await talked_over(h, turn, 3, "Rain is on its way to the north.")
    h.agent.on_speech_start(4)
    h.agent.on_voice(4, 200, level_db=-24.0)  # 4 dB under the user's: theirs
    assert turn.phase == "paused"


@pytest.mark.parametrize("agent", [{"quiet_pauses": 0}, {"resume_false_interruption": False}])
async def test_without_quiet_pauses_quiet_speech_never_pauses_the_answer(
    agent: dict[str, Any],
) -> None:
    h = Harness(**agent)
    try:
        await talked_over(h, await answering(h, level_db=-20.0), 2, "And now the weather.")
    finally:
        await h.close()


@pytest.mark.parametrize("at", ["partial", "pause"])
async def test_a_question_too_quiet_to_interrupt_at_once_interrupts_by_its_words(
    h: Harness, at: str,
) -> None:
    """Seen in an independent check: the interrupting voice came >10 dB under the first
    question's and was ignored as a remark. Speech under the user's level that asks something
    stops the answer at its one partial or its first pause, is answered, and its level counts
    as the user's: the next interruption at that level is taken at once. It pauses the
    answer at once (the session's one quiet pause), as a loud barge-in does."""
    turn = await answering(h, level_db=-10.0)
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, 200, level_db=-24.0)  # 14 dB under: paused at once, its words decide
    assert turn.phase == "paused" and not turn.is_done
    for voiced_ms in (600, 1300):
        h.agent.on_voice(2, voiced_ms, level_db=-24.0)
    assert turn.phase == "paused" and not turn.is_done  # not ended by its length
    if at == "partial":  # the one look a quiet utterance gets (Hearing.look)
        h.agent.on_partial(2, "What is the capital")
    else:
        h.agent.on_pause(2, "What is the capital of Japan?")
    await h.settle()
    assert turn.is_done and turn.interrupted
    h.agent.on_final(dataclasses.replace(h.utterance(2, "What is the capital of Japan?"),
                                         level_db=-24.0))
    await h.listen(0.6)
    assert h.llm.calls[-1][-1] == ChatMessage("user", "What is the capital of Japan?")
    answer = h.agent._turn  # noqa: SLF001
    assert answer is not None and answer.phase == "speaking"
    h.agent.on_speech_start(3)
    h.agent.on_voice(3, 200, level_db=-24.0)  # the user's level now spans both
    assert answer.phase == "paused"


async def test_quiet_speech_in_the_answer_s_own_words_is_an_echo_not_a_question(
    h: Harness,
) -> None:
    """A client without echo cancellation sends the answer back, under the user's level; the
    words it asks in are the agent's own: not an interruption."""
    turn = await answering(h, level_db=-10.0)
    await h.listen(0.3)
    assert any(c.started and "forty two" in c.text for c in turn.chunks)
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, 1300, level_db=-30.0)
    assert turn.phase == "paused"  # its words decide
    echo = "Is the answer forty two, and that is all?"
    h.agent.on_partial(2, echo)
    h.agent.on_pause(2, echo)
    await h.settle()
    assert turn.phase == "speaking" and len(h.llm.calls) == 1


def test_what_echoes_the_answer() -> None:
    said = "Sure. The answer is forty two, and that is all. Anything else?"
    assert echoes("the answer is forty two and that", said)
    assert echoes("Is the answer forty-two, and that is all?", said)  # misheard a little
    assert not echoes("What is the capital of Japan?", said)
    assert not echoes("Is the answer forty two?", "")
    assert not echoes("What else is there?", said)  # one word in common is not an echo


@pytest.mark.parametrize("text", [
    "Good evening. Heavy rain is on its way to the north.",
    "Markets closed higher after a difficult week.", "Yeah, okay, right.", "What?",
])
async def test_quiet_speech_that_asks_nothing_still_talks_over_the_answer(
    h: Harness, text: str,
) -> None:
    """A presenter's statements, backchannels, a word or two: not a question to the agent,
    at the pause or at the end. The answer, paused while they are heard, resumes."""
    turn = await answering(h, level_db=-10.0)
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, 400, level_db=-26.0)
    assert turn.phase == "paused"
    h.agent.on_partial(2, text)
    h.agent.on_pause(2, text)
    h.agent.on_final(dataclasses.replace(h.utterance(2, text), level_db=-26.0))
    await h.listen(0.3)
    assert turn.phase == "speaking" and len(h.llm.calls) == 1


async def test_the_greeting_is_interrupted_like_any_answer() -> None:
    """Talking over the greeting pauses it at once, and a question stops it and is answered."""
    h = Harness(greeting="Hello there, I am Ava, and I can tell you about many things today.")
    try:
        await h.listen(0.6)
        turn = h.agent._turn  # noqa: SLF001
        assert turn is not None and turn.phase == "speaking"
        h.agent.on_speech_start(1)
        h.agent.on_voice(1, 200, level_db=-20.0)
        assert turn.phase == "paused"
        h.agent.on_partial(1, "what time is")
        h.agent.on_final(h.utterance(1, "What time is it?"))
        await h.listen(speech_duration(REPLY) + 1.0)
        assert turn.is_done and turn.interrupted
        assert h.llm.calls[-1][-1] == ChatMessage("user", "What time is it?")
    finally:
        await h.close()


async def test_before_any_answered_turn_any_level_may_interrupt() -> None:
    """Nothing is known of the user yet (the greeting plays): a quiet voice interrupts; with
    the margin at 0 it always does."""
    for margin, level in ((10.0, None), (0.0, -60.0)):
        h = Harness(barge_in_level_margin_db=margin)
        try:
            await h.ask(1, "Tell me.")  # (a test utterance carries no level)
            await h.listen(0.4)
            turn = h.agent._turn  # noqa: SLF001
            assert turn is not None
            h.agent.on_speech_start(2)
            h.agent.on_voice(2, 200, level_db=-60.0 if level is None else level)
            assert turn.phase == "paused"
        finally:
            await h.close()


async def test_a_long_barge_in_with_a_word_is_a_real_interruption(h: Harness) -> None:
    await h.ask(1, "Tell me.")
    await h.listen(0.4)
    turn = h.agent._turn  # noqa: SLF001
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, voiced_ms=200)
    h.agent.on_partial(2, "This")
    h.agent.on_voice(2, voiced_ms=1300)
    await h.settle()
    assert turn is not None and turn.interrupted and turn.is_done


async def test_a_long_sound_without_words_is_talked_over(h: Harness) -> None:
    """Music or a fan taken for speech over the answer (seen: it ended the answer once it
    went on past `false_interruption_max_ms`): paused while its words may show, then, with
    none by twice that, the answer resumes and the sound talks over it for good; words that
    ask something in it still stop the answer."""
    await h.ask(1, "Tell me.")
    await h.listen(0.4)
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None
    h.agent.on_speech_start(2)
    h.agent.on_voice(2, voiced_ms=200)
    h.agent.on_partial(2, "Mm.")  # what Whisper writes for a hum: no words
    h.agent.on_voice(2, voiced_ms=1300)
    await h.settle()
    assert turn.phase == "paused" and not turn.is_done
    for voiced_ms in (2400, 2420, 5000):
        h.agent.on_voice(2, voiced_ms=voiced_ms)
        assert turn.phase == "speaking"
    h.agent.on_pause(2, "What time is it?")
    await h.settle()
    assert turn.interrupted and turn.is_done


async def test_without_resume_every_barge_in_ends_the_answer() -> None:
    h = Harness(resume_false_interruption=False)
    try:
        await h.ask(1, "Tell me.")
        await h.listen(0.4)
        turn = h.agent._turn  # noqa: SLF001
        h.agent.on_speech_start(2)
        h.agent.on_voice(2, voiced_ms=200)
        await h.settle()
        assert turn is not None and turn.interrupted
        h.agent.on_final(h.utterance(2, "mm-hm"))
        await h.listen(0.5)
        assert len(h.llm.calls) == 2  # "mm-hm" is a question of its own then
    finally:
        await h.close()


async def test_a_failing_llm_is_answered_with_an_apology(h: Harness) -> None:
    h.llm.deltas, h.llm.error = [], RuntimeError("model exploded")
    await h.ask(1, "Hello?")
    await h.listen(3.0)
    assert any("Sorry" in t for t in h.tts.texts)
    assert h.sent("error")[0]["code"] == "turn_failed"
    assert h.states()[-1] == "listening"


async def test_an_answer_that_keeps_up_with_its_voice_has_no_stall(h: Harness) -> None:
    await h.ask(1, "What is the answer?")
    await h.listen(speech_duration(REPLY) + 1.0)
    assert h.sent("timings")[-1]["stall_ms"] == 0.0
    assert h.sent("timings")[0]["stall_ms"] is None  # the early marks, sent as the voice starts


async def test_a_chunk_ready_after_the_last_one_played_is_a_stall(h: Harness) -> None:
    h.llm.hold_at = 2  # "Sure. " is said, the rest waits
    await h.ask(1, "What is the answer?")
    await h.listen(1.0)  # "Sure." (0.1 s) has long played
    h.llm.go_on.set()
    await h.listen(speech_duration(REPLY) + 1.0)
    stall = h.sent("timings")[-1]["stall_ms"]
    assert 700 <= stall <= 1000  # from the end of "Sure." to the next chunk, within the 1 s


@pytest.mark.parametrize("runway_ms", [0, 700])
async def test_a_voice_about_to_run_dry_says_the_sentence_so_far(runway_ms: int) -> None:
    h = Harness(runway_ms=runway_ms)
    try:
        h.llm.hold_at = 2  # the sentence after "Sure." comes once "Sure." has played
        await h.ask(1, "What is the answer?")
        await h.listen(0.5)
        h.llm.go_on.set()
        await h.listen(speech_duration(REPLY) + 1.0)
        said = [e["text"] for e in h.sent("agent_text") if e["text"]]
        assert "".join(said).strip() == REPLY
        said = [text.strip() for text in said]
        whole = "The answer is forty two, and that is all."
        if runway_ms:
            assert said[1] != whole and whole.startswith(said[1])  # cut: nothing to wait for
        else:
            assert said[1] == whole  # later chunks end at sentence ends
    finally:
        await h.close()


async def test_an_answer_ends_at_max_sentences_and_its_generation_stops() -> None:
    h = Harness(max_sentences=2)
    try:
        await h.ask(1, "What is the answer?")
        await h.listen(speech_duration(REPLY) + 1.0)
        said = "".join(e["text"] for e in h.sent("agent_text") if e["text"]).strip()
        assert said == "Sure. The answer is forty two, and that is all."
        assert h.llm.closed_early == 1 and not h.llm.finished  # stopped, not read to the end
        assert h.agent.history[-1] == ChatMessage("assistant", said)
    finally:
        await h.close()


async def test_an_utterance_and_its_answer_share_one_turn_id(h: Harness) -> None:
    """Regression: partials were numbered ahead of an early-started turn, so the page showed
    the user's words under a turn that never answered."""
    h.agent.on_speech_start(1)
    h.agent.on_partial(1, "what is")
    h.agent.on_pause(1, "what is the answer")
    h.agent.on_partial(1, "what is the answer")
    h.agent.on_final(h.utterance(1, "What is the answer?"))
    await h.listen(1.0)
    ids = {m["turn_id"] for m in h.sent("transcript")} | {m["turn_id"] for m in
                                                           h.sent("agent_text")}
    assert len(ids) == 1


async def test_interrupt_returns_once_every_task_of_the_turn_has_stopped(h: Harness) -> None:
    h.llm.deltas = words("One, two, three, four, five, six, seven, eight.")
    h.llm.stall_after = 6
    await h.ask(1, "Talk.")
    await h.listen(0.3)
    turn = h.agent._turn  # noqa: SLF001
    assert turn is not None
    await turn.interrupt()
    assert turn.is_done and len(turn._tasks) == 0  # noqa: SLF001
    assert h.llm.closed_early == 1
    assert h.session.playout.busy_until() <= h.session.clock.time() + 1e-6


def test_backchannels_and_false_interruptions() -> None:
    for text in ["", "Mm-hm.", "yeah", "Uh huh", "OK.", "嗯", "Thank you."]:
        assert is_backchannel(text), text
    for text in ["Stop.", "What time is it?", "yeah but why", "no"]:
        assert not is_backchannel(text), text
    # Whisper's words for a short hum or cough are not a question ...
    assert is_false_interruption("Emma Chen.", voiced_s=0.5, short_s=0.7)
    # ... but a short "stop" is, and so is anything long.
    assert not is_false_interruption("Stop it.", voiced_s=0.4, short_s=0.7)
    assert not is_false_interruption("Emma Chen.", voiced_s=1.0, short_s=0.7)
    assert is_real_interruption("wait") and is_real_interruption("what time is")
    assert not is_real_interruption("Emma Chen")


def test_what_asks_something_of_the_agent() -> None:
    for text in ["What is the capital of Japan?", "Tell me about my card.", "So, the rate is?",
                 "Wait, I meant the other one.", "请问现在几点", "能不能帮我查一下"]:
        assert asks_something(text), text
    for text in ["Good evening. Heavy rain tonight? Maybe.", "Shares closed higher.", "What?",
                 "Uh huh okay", "", "今天天气很好。"]:
        assert not asks_something(text), text


async def test_a_short_sound_heard_as_two_words_resumes_but_stop_ends(h: Harness) -> None:
    turn = await barged_in(h, 0.4)
    h.agent.on_partial(2, "Emma")  # not enough to decide
    assert turn.phase == "paused"
    h.agent.on_final(h.utterance(2, "Emma Chen."))  # 0.2 s of voice + the pause: short
    await h.settle()  # no more speech within `false_interruption_wait_ms`: resumed
    assert turn.phase == "speaking"
    await h.listen(0.3)
    h.agent.on_speech_start(3)
    h.agent.on_voice(3, voiced_ms=200)
    h.agent.on_partial(3, "stop")
    await h.settle()
    assert turn.interrupted


def consistent(states: list[str]) -> None:
    """Each state event is a change to a known state."""
    assert all(a != b for a, b in zip(states, states[1:], strict=False)), states
    assert set(states) <= {"listening", "thinking", "speaking"}, states


async def test_a_minute_of_talk_without_a_pause(h: Harness) -> None:
    """The endpointer ends it at its 30 s limit and a new utterance begins at once; the agent
    answers, is talked over, and nothing breaks: no error, one turn at a time."""
    await h.talk(60.0, 2.0)
    await h.listen(REPLY.count(" ") * 0.1 + 2.0)
    assert not h.sent("error")
    finals = [e for e in h.sent("transcript") if e["final"]]
    assert len(finals) >= 2 and all(e["text"] for e in finals[:2])
    assert h.session.metrics.barge_ins._value.get() >= 1  # noqa: SLF001 - talked over it
    consistent(h.states())
    assert h.states()[-1] == "listening" and h.agent._turn is None  # noqa: SLF001
    assert len(h.agent.history) <= 40


async def test_ten_minutes_of_silence_is_nothing(h: Harness) -> None:
    await h.talk(0.0, 600.0, frame=960)
    assert h.states() == ["listening"] and not h.llm.calls
    assert not h.sent("transcript") and not h.asr.streams
    assert len(h.agent._hearing._ops) == 0  # noqa: SLF001


@pytest.mark.parametrize("frame", [112, 528, 1])
async def test_frames_of_odd_sizes_are_heard(h: Harness, frame: int) -> None:
    await h.talk(0.3 if frame == 1 else 1.0, 0.6, frame=frame)
    finals = [e for e in h.sent("transcript") if e["final"]]
    assert len(finals) == 1 and finals[0]["text"].startswith("word")
    await h.listen(REPLY.count(" ") * 0.1 + 1.0)
    assert len(h.llm.calls) == 1 and h.states()[-1] == "listening"


async def test_a_partial_heard_in_the_silence_before_a_pause_does_not_warm() -> None:
    """The pause's decode starts 80 ms into a silence: a warm begun then ran beside it and
    slowed both (measured live), so partials warm the LLM only while the user speaks."""
    h = Harness(warm_llm=True)
    voice = (np.arange(int(0.6 * 16000)) % 200 + 100).astype(np.int16)
    for i in range(0, len(voice), 320):
        h.agent.on_audio(voice[i : i + 320])
    h.agent.on_partial(1, "what is the capital")
    h.agent.on_audio(np.zeros(320, np.int16))  # 20 ms: a gap between words
    h.agent.on_partial(1, "what is the capital of")
    h.agent.on_audio(np.zeros(2 * 320, np.int16))  # 60 ms: half-way to the pause decode
    h.agent.on_partial(1, "what is the capital of France")
    assert h.llm.warmed == ["what is the capital", "what is the capital of"]
    await h.close()


async def test_partials_warm_the_llm_while_the_user_talks() -> None:
    h = Harness(warm_llm=True)
    h.agent.on_speech_start(1)
    h.agent.on_partial(1, "what is the capital")
    assert h.llm.warmed == ["what is the capital"]  # no history yet: nothing at the start
    await h.ask(2, "Hello?")
    h.agent.on_partial(3, "tell me more")  # the agent is answering: no hint then
    assert h.llm.warmed == ["what is the capital"]
    await h.listen(speech_duration(REPLY) + 1.0)
    h.agent.on_speech_start(4)  # the answer is in the history: read it while the user talks
    assert h.llm.warmed == ["what is the capital", ""]
    await h.close()


async def test_a_first_chunk_is_due_now_and_later_ones_when_the_audio_ahead_runs_out(
    h: Harness,
) -> None:
    """The speech queue (rtc_server/speech_queue.py) orders the sessions' TTS calls by when
    their audio is needed: the turn says how much audio it has ready ahead of each chunk."""
    queue, slacks = h.engines.pools.speech, []
    real_run = queue.run

    async def run(slack_s: float, fn: Any, *args: Any, **kwargs: Any) -> Any:
        slacks.append(slack_s)
        return await real_run(slack_s, fn, *args, **kwargs)

    queue.run = run  # type: ignore[method-assign]
    await h.ask(1, "What is the answer?")
    await h.listen(speech_duration(REPLY) + 1.0)
    turn_marks = h.sent("timings")[-1]["marks_ms"]
    assert len(slacks) >= 3 and slacks[0] == 0.0
    assert all(s > 0.05 for s in slacks[1:])  # at least a word of audio ahead of each
    assert turn_marks["tts_start"] <= turn_marks["tts_first_audio"]


def unsure_utterance(h: Harness, uid: int, text: str, confidence: float) -> Utterance:
    return dataclasses.replace(h.utterance(uid, text), confidence=confidence)


BANK_TOPICS = ("Harbor Street Bank", "Phone support", "Opening an account", "Easy Saver")
AGAIN = "Sorry, I didn't quite catch that. Could you say it again?"


def test_the_question_asked_back_names_the_topic_the_words_sound_like() -> None:
    about = "Did you ask about {topic}?"
    assert clarifying_question("How bold do I need to be two open a count?", BANK_TOPICS,
                               about, AGAIN) == "Did you ask about opening an account?"
    assert clarifying_question("Win does phone sup port clothes?", BANK_TOPICS, about,
                               AGAIN) == "Did you ask about phone support?"
    assert clarifying_question("What's the rate on the easy saver?", BANK_TOPICS, about,
                               AGAIN) == "Did you ask about Easy Saver?"  # a name keeps its case
    assert clarifying_question("Tell me a joke.", BANK_TOPICS, about, AGAIN) == AGAIN
    assert clarifying_question("Anything at all", (), about, AGAIN) == AGAIN


async def test_words_the_asr_was_unsure_of_are_asked_back_not_answered() -> None:
    """Below `unsure_below` the agent asks back (no answer from the model); the history keeps
    the words as heard and the question, so the model answers the user's reply with both;
    words it is sure of are answered as always."""
    h = Harness(unsure_below=0.6)
    h.engines.topics = BANK_TOPICS
    try:
        h.agent.on_speech_start(1)
        h.agent.on_final(unsure_utterance(h, 1, "How bold do I need to be two open a count?",
                                          0.45))
        await h.listen(3.0)
        assert not h.llm.calls  # not answered
        said = "Sorry, I'm not sure I heard you right. Did you ask about opening an account?"
        assert h.agent.history == [
            ChatMessage("user", "How bold do I need to be two open a count?"),
            ChatMessage("assistant", said)]
        finals = [e["text"] for e in h.sent("transcript") if e["final"]]
        assert finals == ["How bold do I need to be two open a count?"]
        h.agent.on_speech_start(2)
        h.agent.on_final(unsure_utterance(h, 2, "Yes.", 0.9))  # sure: answered, history in view
        await h.listen(speech_duration(REPLY) + 1.0)
        assert [m.content for m in h.llm.calls[-1]] == [
            "How bold do I need to be two open a count?", said, "Yes."]
        assert h.session.metrics.unsure_turns._value.get() == 1  # noqa: SLF001
    finally:
        await h.close()


async def test_an_early_answer_to_unsure_words_is_replaced() -> None:
    """The answer started at the pause took the words as heard; unsure of them at the final,
    it is dropped and the agent asks back."""
    h = Harness(unsure_below=0.6)
    try:
        h.agent.on_speech_start(1)
        h.agent.on_pause(1, "what is my car limit")
        await h.settle()
        h.agent.on_final(unsure_utterance(h, 1, "What is my car limit?", 0.3))
        await h.listen(3.0)
        assert [c[-1].content for c in h.llm.calls] == ["what is my car limit"]
        assert h.agent.history == [
            ChatMessage("user", "What is my car limit?"), ChatMessage("assistant", AGAIN)]
    finally:
        await h.close()


async def test_without_a_confidence_or_with_the_rule_off_nothing_is_marked() -> None:
    h = Harness(unsure_below=0.0)  # never
    try:
        h.agent.on_speech_start(1)
        h.agent.on_final(unsure_utterance(h, 1, "What is my car limit?", 0.1))
        await h.listen(0.5)
        assert h.llm.calls[-1][-1].content == "What is my car limit?"
    finally:
        await h.close()
    h = Harness()
    try:
        h.agent.on_speech_start(1)
        h.agent.on_final(h.utterance(1, "What is my car limit?"))  # no confidence known
        await h.listen(0.5)
        assert h.llm.calls[-1][-1].content == "What is my car limit?"
    finally:
        await h.close()
