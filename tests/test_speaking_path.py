"""One speaking path: a text gives the same chunks, speech and lips in the offline renderer
(`media.avatar`'s `voice_text`) as in the live agent (`rtc_server.speaker.Voice`, fed the answer
token by token through `engines.voicing.SpokenChunks`).

Real TTS and face model. Piper samples its noise afresh on every call, so the voice is
memoized per chunk text: both paths hear identical speech for identical chunks, and any
difference left is in the chunking, the face call, the smoothing or the re-timing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pytest

from engines.face import FaceConfig, create_smoother
from engines.tts.base import Speech
from engines.voicing import SpokenChunks
from media.avatar.__main__ import voice_text
from rtc_server.engine_set import Engines
from rtc_server.speaker import Voice

# A first clause longer than the first chunk's limit, markup and a web address: the chunking
# and the spoken filter must agree as well as the face and the smoothing.
ANSWER = ("Our **branch** on the main street opens at nine in the morning, and you can visit "
          "www.example.com for the full list. Is there anything else I can help with today?")


class SameVoice:
    """The real TTS, one synthesis per distinct text (a test double around a real engine)."""

    def __init__(self, tts: Any) -> None:
        self._tts = tts
        self._said: dict[str, list[Speech]] = {}
        self.sample_rate = tts.sample_rate

    def synthesize(self, text: str) -> list[Speech]:
        if text not in self._said:
            self._said[text] = list(self._tts.synthesize(text))
        return self._said[text]


class NoLLM:
    def close(self) -> None:
        pass


@pytest.fixture
def engines(agent_engines: Engines) -> Iterator[Engines]:
    made = Engines(asr=agent_engines.asr, llm=cast(Any, NoLLM()),
                   tts=cast(Any, SameVoice(agent_engines.tts)), face=agent_engines.face,
                   make_smoother=lambda: create_smoother(FaceConfig()))
    yield made
    made.pools.shutdown()


def tokens(text: str) -> list[str]:
    """Roughly how an LLM streams: words with their leading space, punctuation apart."""
    return re.findall(r"\s*\w+|\s*[^\w\s]+", text)


async def test_offline_and_live_give_the_same_lips(engines: Engines) -> None:
    fps = 25
    offline = voice_text(engines.tts, engines.face, ANSWER, fps)

    chunks = SpokenChunks()
    live_chunks = [c for t in tokens(ANSWER) for c in chunks.push(t)] + chunks.flush()
    voice = Voice(engines, fps)
    smoother = voice.smoother()  # one per turn
    live = [await voice.prepare(c, smoother) for c in live_chunks]

    assert len(live) == len(offline) >= 3  # a short first chunk, then sentences
    assert len(live_chunks[0]) < 30
    assert all("www" not in c and "*" not in c for c in live_chunks)
    for voiced, (speech, lips) in zip(live, offline, strict=True):
        assert voiced is not None
        assert np.array_equal(voiced.pcm, speech.pcm)
        assert voiced.offsets.shape == lips.shape and len(lips) > 5
        np.testing.assert_allclose(voiced.offsets, lips, atol=1e-6)
    # The lips move and carry across chunks (one smoother): not a constant or a reset pose.
    moving = np.concatenate([lips for _, lips in offline])
    assert float(np.ptp(moving[:, 48:68, 1])) > 0.01


async def test_a_second_turn_starts_from_the_neutral_face(engines: Engines) -> None:
    """The smoother is the turn's: the same chunk in a new turn gives the same lips again."""
    voice = Voice(engines, 25)
    first = await voice.prepare("Nine o'clock.", voice.smoother())
    again = await voice.prepare("Nine o'clock.", voice.smoother())
    assert first is not None and again is not None
    np.testing.assert_allclose(first.offsets, again.offsets, atol=1e-6)
