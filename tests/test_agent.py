"""End to end on the embedded defaults: a loopback peer talks to the agent and checks what it
really receives (transcripts, answers, speech, lips in sync with the voice, barge-in)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engines.asr.text import word_error_rate
from rtc_server.agent import AgentBehaviour
from rtc_server.app import Server
from rtc_server.engine_set import Engines
from rtc_server.events import EVIDENCE
from rtc_server.session import Session
from testkit.agent import (
    MouthMeter,
    agent_config,
    audio_timeline,
    best_lag,
    transcribe,
    video_timeline,
)
from testkit.peer import LoopbackPeer, PcmMicrophone
from testkit.speech import synth
from tests.support.server import running_server

pytestmark = [pytest.mark.webrtc, pytest.mark.slow]
QUESTION = "What is the capital of France?"


def speech_with_lead(text: str, lead_s: float = 0.5) -> np.ndarray:
    return np.concatenate([np.zeros(int(16000 * lead_s), np.int16), synth(text, engine="piper")])


def turn_done(turn_id: int) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"] == "agent_text" and e["turn_id"] == turn_id and e["final"]


def agent_of(server: Server, peer: LoopbackPeer) -> AgentBehaviour:
    session = server.registry.get(peer.session_id or "")
    assert isinstance(session, Session) and isinstance(session.behaviour, AgentBehaviour)
    return session.behaviour


async def test_greeting_lips_move_with_the_voice(agent_engines: Engines) -> None:
    """The greeting proves the speaking path; the mouth opening seen in the received video
    follows the received audio envelope, with the best lag within +-80 ms."""
    config = agent_config(greeting="Hello! I am your assistant, and I am happy to help you today.")
    async with running_server(config, agent_engines) as (server, url):
        peer = LoopbackPeer(url, video_summary=MouthMeter(server.renderer.landmarks))
        await peer.connect()
        await peer.wait_event(turn_done(1), 40)
        await asyncio.sleep(0.5)
        texts = [e["text"] for e in peer.received.events_of("agent_text") if e["text"]]
        assert " ".join(texts).startswith("Hello!")
        a_t, rms = audio_timeline(peer.received)
        v_t, mouth = video_timeline(peer.received, config.media.fps)
        assert mouth.max() > 0.02, "the mouth never opened"
        lag, corr = best_lag(a_t, rms, v_t, mouth)
        assert corr > 0.4, f"mouth/voice correlation {corr:.2f}"
        assert abs(lag) <= 0.080, f"best lag {lag * 1000:.0f} ms"
        # closed in silence: the quietest stretch shows the smallest opening
        quiet = np.interp(v_t, a_t, rms) < 50
        assert mouth[quiet].mean() < mouth[~quiet].mean()
        await peer.close()


async def test_question_gets_a_spoken_answer(agent_engines: Engines) -> None:
    """Heard, answered, spoken: the final transcript matches the question, the agent answers
    in words its own ASR can read back from the received audio, every stage is timed, and
    the history holds the exchange. (No trivia: a model's wording may vary.)"""
    config = agent_config()
    async with running_server(config, agent_engines) as (server, url):
        peer = LoopbackPeer(url, microphone=PcmMicrophone(speech_with_lead(QUESTION), 16000))
        await peer.connect()
        final = await peer.wait_event(lambda e: e["type"] == "transcript" and e["final"], 30)
        assert word_error_rate([QUESTION], [final["text"]]) <= 0.2, final["text"]
        await peer.wait_event(turn_done(final["turn_id"]), 60)
        await asyncio.sleep(0.3)
        answer = " ".join(e["text"] for e in peer.received.events_of("agent_text") if e["text"])
        assert len(answer.split()) >= 2, answer
        timings = peer.received.events_of("timings")[-1]["marks_ms"]
        for stage in ("speech_end", "asr_final", "llm_first_token", "first_chunk",
                      "tts_first_audio", "face_first_frame", "first_audio_sent"):
            assert stage in timings, timings
        # The first sample left after the answer's first chunk was ready, whatever the clock.
        assert timings["first_audio_sent"] > timings["first_chunk"], timings
        # The end of turn's evidence travels with its marks: the turn model's probability
        # wherever its mark is (the verdict was computed on it).
        evidence = peer.received.events_of("timings")[-1]["evidence"]
        assert set(evidence) <= set(EVIDENCE) and ("turn" in evidence) == (
            "turn_model" in timings), (evidence, timings)
        assert all(0.0 <= v <= 1.0 for v in evidence.values()), evidence
        # the agent's audio is speech: the project's own ASR hears the answer's words in it
        heard = transcribe(agent_engines, peer.received.audio_pcm())
        overlap = set(_words(heard)) & set(_words(answer))
        assert len(overlap) >= 2, (heard, answer)
        states = [e["state"] for e in peer.received.events_of("state")]
        assert states[-3:] == ["thinking", "speaking", "listening"]
        history = agent_of(server, peer).history
        assert [m.role for m in history] == ["user", "assistant"]
        assert history[0].content == final["text"] and history[1].content
        await peer.close()


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


async def asking_for_a_story(url: str) -> tuple[PcmMicrophone, LoopbackPeer]:
    """A peer connected to `url` that asks for a long answer (time to talk over it)."""
    mic = PcmMicrophone(
        speech_with_lead("Tell me a long story about a brave knight and a dragon."), 16000)
    peer = LoopbackPeer(url, microphone=mic)
    await peer.connect()
    return mic, peer


async def test_barge_in_stops_the_answer_and_the_next_answer_follows(
    agent_engines: Engines,
) -> None:
    """Talking over a long answer: the agent's audio stops soon after the user starts (a
    tolerant bound; the benchmark measures it), the interrupting question is heard whole,
    the history keeps only what was heard of the first answer, and the next answer is to
    the new question."""
    async with running_server(agent_config(), agent_engines) as (server, url):
        mic, peer = await asking_for_a_story(url)
        # barge in once the story is well under way (its second chunk has started playing)
        await peer.wait_event(lambda e: len(
            [x for x in peer.received.events_of("agent_text") if x["text"]]) >= 2, 60)
        lead = 0.3
        mic.set_audio(speech_with_lead(QUESTION, lead), 16000)
        await asyncio.wait_for(mic.playing.wait(), 5)
        assert mic.started_at is not None
        user_speech_start = mic.started_at + lead
        second = await peer.wait_event(
            lambda e: e["type"] == "transcript" and e["final"] and e["turn_id"] > 1, 30
        )
        assert word_error_rate([QUESTION], [second["text"]]) <= 0.2, second["text"]
        await peer.wait_event(turn_done(second["turn_id"]), 60)
        a_t, rms = audio_timeline(peer.received)
        # the agent's answer was under way (a gap between two chunks is still its turn)
        before = (a_t > user_speech_start - 1.5) & (a_t < user_speech_start)
        assert rms[before].max() > 200, "the agent was not speaking when the user started"
        barge_ins = [ln for ln in server.metrics.render()[0].decode().splitlines()
                     if ln.startswith("rtc_barge_ins_total")]
        assert barge_ins == ["rtc_barge_ins_total 1.0"], barge_ins
        after = a_t >= user_speech_start
        loud = (rms > 200) & after
        # the first silence of >= 0.6 s after the user started talking marks the cut
        frames = np.flatnonzero(after)
        quiet_run, cut = 0, None
        for i in frames:
            quiet_run = quiet_run + 1 if not loud[i] else 0
            if quiet_run * 0.02 >= 0.6:
                cut = a_t[i - quiet_run + 1]
                break
        assert cut is not None
        assert cut - user_speech_start <= 1.0, f"agent kept talking {cut - user_speech_start:.2f} s"
        answer = " ".join(
            e["text"] for e in peer.received.events_of("agent_text")
            if e["turn_id"] == second["turn_id"]
        )
        assert len(answer.split()) >= 2, answer
        history = agent_of(server, peer).history
        story_sent = " ".join(
            e["text"] for e in peer.received.events_of("agent_text") if e["turn_id"] == 1
        )
        assert [m.role for m in history] == ["user", "assistant", "user", "assistant"], history
        story_heard = history[1].content
        assert story_heard and len(story_heard) < len(story_sent)
        assert story_sent.startswith(story_heard.split()[0])
        assert history[2].content == second["text"]  # the reply answered the new question
        timings = [e for e in peer.received.events_of("timings") if e["turn_id"] == 1]
        assert timings[-1]["barge_in_ms"] is not None
        await peer.close()


async def test_a_question_asked_well_under_the_user_s_level_still_interrupts(
    agent_engines: Engines,
) -> None:
    """The independent check's barge-in that was never detected: the interrupting voice came
    more than `barge_in_level_margin_db` under the first question's, so it was taken for a
    television and ignored. Asked 16 dB under, it is counted as quiet speech, pauses the
    answer while its words are heard (`quiet_pauses`), and they ask something, so it stops
    the answer, is heard, and answered."""
    async with running_server(agent_config(), agent_engines) as (server, url):
        mic, peer = await asking_for_a_story(url)
        await peer.wait_event(lambda e: e["type"] == "agent_text" and e["turn_id"] == 1
                              and e["text"], 60)
        quiet = (speech_with_lead(QUESTION, 0.3) * 10 ** (-16 / 20)).astype(np.int16)
        mic.set_audio(quiet, 16000)
        second = await peer.wait_event(
            lambda e: e["type"] == "transcript" and e["final"] and e["turn_id"] > 1, 30
        )
        assert word_error_rate([QUESTION], [second["text"]]) <= 0.2, second["text"]
        await peer.wait_event(turn_done(second["turn_id"]), 60)
        metrics = {ln.split()[0]: ln.split()[1] for ln in
                   server.metrics.render()[0].decode().splitlines()
                   if ln.startswith(("rtc_barge_ins_total", "rtc_quiet_interruptions_total"))}
        assert metrics == {"rtc_barge_ins_total": "1.0",
                           "rtc_quiet_interruptions_total": "1.0"}, metrics
        history = agent_of(server, peer).history
        assert [m.role for m in history] == ["user", "assistant", "user", "assistant"], history
        story_sent = " ".join(
            e["text"] for e in peer.received.events_of("agent_text") if e["turn_id"] == 1
        )
        assert len(history[1].content) < len(story_sent)  # the story was cut
        assert history[2].content == second["text"]  # and the question answered
        await peer.close()


async def test_two_sessions_never_hear_each_other(agent_engines: Engines) -> None:
    config = agent_config()
    async with running_server(config, agent_engines) as (server, url):
        asker = LoopbackPeer(url, microphone=PcmMicrophone(speech_with_lead(QUESTION), 16000))
        quiet = LoopbackPeer(url)
        await asker.connect()
        await quiet.connect()
        final = await asker.wait_event(lambda e: e["type"] == "transcript" and e["final"], 30)
        await asker.wait_event(turn_done(final["turn_id"]), 60)
        assert np.sqrt(np.mean(asker.received.audio_pcm().astype(float) ** 2)) > 100
        assert np.abs(quiet.received.audio_pcm()).max() < 50
        kinds = {e["type"] for e in quiet.received.events}
        assert not kinds & {"transcript", "agent_text", "timings"}
        await asker.close()
        await quiet.close()


async def test_a_peer_that_sends_no_audio_gets_the_greeting_and_stays(
    agent_engines: Engines,
) -> None:
    """No microphone at all: the session still greets, then listens, and stays open."""
    config = agent_config(greeting="Hello there, I am listening.")
    async with running_server(config, agent_engines) as (server, url):
        peer = LoopbackPeer(url, send_audio=False)
        await peer.connect()
        await peer.wait_event(turn_done(1), 40)
        await asyncio.sleep(2.0)
        states = [e["state"] for e in peer.received.events_of("state")]
        assert states == ["listening", "thinking", "speaking", "listening"], states
        assert np.sqrt(np.mean(peer.received.audio_pcm().astype(float) ** 2)) > 50
        assert len(server.registry) == 1 and not peer.received.events_of("error")
        await peer.close()
