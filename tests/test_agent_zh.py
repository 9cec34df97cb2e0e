"""A Chinese conversation end to end through a real aiortc peer (`[conversation] language =
"zh"`): the greeting's lips follow the Kokoro voice, and a Mandarin question spoken by another
Kokoro voice (zm_yunxi) gets a Chinese answer, in Simplified characters, that the ASR reads
back from the audio the peer received. (No wording is asserted: a model's answer may vary.)"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest

from engines.asr.text import char_error_rate
from engines.text.zh_numbers import has_cjk
from engines.text.zh_script import to_simplified
from rtc_server.config import Config, localize
from rtc_server.engine_set import Engines, load_engines
from rtc_server.language import ConversationConfig
from testkit.agent import (
    MouthMeter,
    agent_config,
    audio_timeline,
    best_lag,
    transcribe,
    video_timeline,
)
from testkit.peer import LoopbackPeer, PcmMicrophone
from testkit.sentences import spoken_reference
from testkit.speech import synth
from tests.support.server import SMALL_VIDEO, running_server

pytestmark = [pytest.mark.webrtc, pytest.mark.slow]
QUESTION = "中国的首都是哪个城市？"
GREETING = "你好，我是小艾，很高兴认识你。"


def zh_config(greeting: str = "", *, small_video: bool = False) -> Config:
    base = agent_config(greeting=greeting)
    if small_video:  # the answer is checked by ear: little video leaves the cores to it
        base = dataclasses.replace(base, media=SMALL_VIDEO)
    return localize(dataclasses.replace(base, conversation=ConversationConfig(language="zh")))


@pytest.fixture(scope="module")
def zh_engines() -> Iterator[Engines]:
    engines = load_engines(zh_config())
    yield engines
    engines.close()


async def test_chinese_greeting_lips_follow_the_kokoro_voice(zh_engines: Engines) -> None:
    config = zh_config(greeting=GREETING)
    async with running_server(config, zh_engines) as (server, url):
        peer = LoopbackPeer(url, video_summary=MouthMeter(server.renderer.landmarks))
        await peer.connect()
        await peer.wait_event(lambda e: e["type"] == "agent_text" and e["final"], 180)
        await asyncio.sleep(0.5)
        said = "".join(e["text"] for e in peer.received.events_of("agent_text"))
        assert said == GREETING  # exact: no spaces put between Chinese chunks
        a_t, rms = audio_timeline(peer.received)
        v_t, mouth = video_timeline(peer.received, config.media.fps)
        assert mouth.max() > 0.02, "the mouth never opened"
        lag, corr = best_lag(a_t, rms, v_t, mouth)
        assert corr > 0.4, f"mouth/voice correlation {corr:.2f}"
        assert abs(lag) <= 0.080, f"best lag {lag * 1000:.0f} ms"
        await peer.close()


async def test_a_mandarin_question_gets_a_spoken_chinese_answer(zh_engines: Engines) -> None:
    question = np.concatenate([np.zeros(8000, np.int16), synth(QUESTION, "kokoro",
                                                                voice="zm_yunxi")])
    async with running_server(zh_config(small_video=True), zh_engines) as (server, url):
        peer = LoopbackPeer(url, microphone=PcmMicrophone(question, 16000))
        await peer.connect()
        final = await peer.wait_event(lambda e: e["type"] == "transcript" and e["final"], 120)
        heard_question = final["text"]
        assert char_error_rate([spoken_reference(QUESTION)], [spoken_reference(heard_question)]
                               ) <= 0.3, heard_question
        await peer.wait_event(lambda e: e["type"] == "agent_text" and e["final"]
                              and e["turn_id"] == final["turn_id"], 240)
        await asyncio.sleep(0.3)
        answer = "".join(e["text"] for e in peer.received.events_of("agent_text")
                         if e["turn_id"] == final["turn_id"]).strip()
        assert has_cjk(answer) and to_simplified(answer) == answer, answer
        heard = transcribe(zh_engines, peer.received.audio_pcm())
        cer = char_error_rate([spoken_reference(answer)], [spoken_reference(heard)])
        assert cer <= 0.5, (answer, heard, cer)
        await peer.close()
