"""A real browser: headless Debian chromium opens the page with a fake microphone playing a
WAV file, clicks Start, and the test checks the connection, decoded video and events.

Firefox cannot be driven in the loopback-only namespace here (its WebRTC does not connect
there), so Firefox support is checked by hand only (README).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from rtc_server.engine_set import Engines
from testkit.browser import CHROMIUM, chromium_args, write_wav
from testkit.speech import synth
from tests.support.server import running_server

if TYPE_CHECKING:
    from playwright.async_api import Page

pytestmark = [pytest.mark.webrtc, pytest.mark.browser]

@asynccontextmanager
async def browser_page(tmp_path: Path, said: str) -> AsyncIterator[Page]:
    """A headless Chromium page whose fake microphone says `said` (after 2 s of silence)."""
    if not Path(CHROMIUM).exists():  # noqa: ASYNC240 (a stat before any I/O starts)
        pytest.skip("Debian chromium is not installed (make test installs it as root)")
    from playwright.async_api import async_playwright

    speech = synth(said, engine="piper")
    # The fake device starts playing at getUserMedia, before the connection is up: lead with
    # silence so the speech arrives while connected.
    pcm = np.concatenate([np.zeros(32000, np.int16), speech, np.zeros(16000, np.int16)])
    wav = tmp_path / "mic.wav"
    write_wav(wav, pcm, 16000)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=chromium_args(wav)
        )
        try:
            page = await browser.new_page()
            yield page
        finally:
            await browser.close()


async def test_page_connects_decodes_video_and_receives_events(tmp_path: Path) -> None:
    async with (
        browser_page(tmp_path, "Good morning, can you hear me clearly?") as page,
        running_server() as (server, url),
    ):
        await page.goto(url + "/")
        await page.click("#start")
        await page.wait_for_function(
            "window.rtcAvatar.pc && window.rtcAvatar.pc.connectionState === 'connected'",
            timeout=15000,
        )
        assert len(server.registry) == 1
        await page.wait_for_function(
            "window.rtcAvatar.events.some(e => e.type === 'state')", timeout=10000
        )
        stats = await page.evaluate(
            """async () => {
                await new Promise(r => setTimeout(r, 2000));
                const out = {};
                (await window.rtcAvatar.pc.getStats()).forEach(s => {
                    if (s.type === 'inbound-rtp') out[s.kind] = {
                        framesDecoded: s.framesDecoded, packets: s.packetsReceived,
                        width: s.frameWidth, height: s.frameHeight };
                });
                return out;
            }"""
        )
        assert stats["video"]["framesDecoded"] > 25, stats
        assert (stats["video"]["width"], stats["video"]["height"]) == (512, 512)
        assert stats["audio"]["packets"] > 50, stats
        # the server heard the WAV's speech and echoed it: a timings event and state changes
        await page.wait_for_function(
            "window.rtcAvatar.events.some(e => e.type === 'timings')", timeout=20000
        )
        states = await page.evaluate(
            "window.rtcAvatar.events.filter(e => e.type === 'state').map(e => e.state)"
        )
        assert "speaking" in states
        assert await page.text_content("#state") in ("speaking", "listening")
        assert "first audio sent" in (await page.text_content("#latency") or "")
        await page.click("#stop")
        await page.wait_for_function("window.rtcAvatar.pc === null")
        for _ in range(50):
            if len(server.registry) == 0:
                break
            await page.wait_for_timeout(100)
        assert len(server.registry) == 0


MOUTH_SNAPSHOT_JS = """([x0, y0, x1, y1]) => {
    const video = document.getElementById('avatar');
    const canvas = document.createElement('canvas');
    canvas.width = video.videoWidth; canvas.height = video.videoHeight;
    const ctx = canvas.getContext('2d');
    ctx.drawImage(video, 0, 0);
    return Array.from(ctx.getImageData(x0, y0, x1 - x0, y1 - y0).data);
}"""


async def test_agent_answers_a_question_asked_through_the_page(
    tmp_path: Path, agent_engines: Engines
) -> None:
    """Chromium asks a question through its fake microphone: the page shows the final
    transcript, the agent's text, and video whose mouth moves while the agent talks."""
    from testkit.agent import MouthMeter, agent_config

    async with (
        running_server(agent_config(), agent_engines) as (server, url),
        browser_page(tmp_path, "What is the capital of France?") as page,
    ):
        await page.goto(url + "/")
        await page.click("#start")
        await page.wait_for_function(
            "window.rtcAvatar.events.some(e => e.type === 'transcript' && e.final)",
            timeout=30000,
        )
        transcript = await page.text_content("#transcript li.user")
        assert transcript and "capital of france" in transcript.lower()
        await page.wait_for_function(
            "window.rtcAvatar.events.some(e => e.type === 'agent_text' && e.text)",
            timeout=60000,
        )
        box = list(MouthMeter(server.renderer.landmarks).box)
        shots = []
        for _ in range(8):  # while the agent talks
            shots.append(np.array(await page.evaluate(MOUTH_SNAPSHOT_JS, box), float))
            await page.wait_for_timeout(150)
        changes = [np.abs(a - b).mean() for a, b in zip(shots, shots[1:], strict=False)]
        assert max(changes) > 2.0, f"mouth region did not move: {changes}"
        await page.wait_for_function(
            "window.rtcAvatar.events.some(e => e.type === 'agent_text' && e.final)",
            timeout=60000,
        )
        # Behaviour, not trivia (a model's wording may vary): the page shows the answer, and
        # the agent went thinking -> speaking -> listening for it.
        agent_line = await page.text_content("#transcript li.agent")
        assert agent_line and len(agent_line.split()) >= 2, agent_line
        states = await page.evaluate(
            "window.rtcAvatar.events.filter(e => e.type === 'state').map(e => e.state)"
        )
        assert states[-3:] == ["thinking", "speaking", "listening"], states
        await page.click("#stop")
