"""Clients nobody here wrote, in headless Chromium inside the loopback namespace.

(a) `web_client/embed/` is the Pipecat JS SDK example: `@pipecat-ai/client-js` 1.13.1 with
`@pipecat-ai/small-webrtc-transport` 1.10.8, bundled by esbuild from npm (`make clients`).
Served from another origin (CORS), its fake microphone asks a question: it connects (the
transport offers before gathering ends and trickles the rest), gets `bot-ready`, the face
and the voice, the final `user-transcription` and the answer's `bot-output`; then a typed
question (`send-text`) is answered too. The page makes no request but to 127.0.0.1.

(b) `pipecat-ai-small-webrtc-prebuilt` 2.5.0 served at /prebuilt/. Its device manager is
daily-js, which loads Daily's call-machine bundle from c.daily.co before anything else (and
reports the failure to Sentry); no registry ships that bundle, so inside the namespace the
prebuilt cannot start. Where a copy of the bundle is at hand (`RTC_AVATAR_DAILY_BUNDLE`), it
is served in place of the CDN and the prebuilt is driven to a playing avatar; otherwise that
test skips, saying so. The prebuilt's own flow (`POST /start`, `/sessions/{id}/api/offer`,
`waitForICEGathering`) runs regardless, through the same SDK (`test_the_prebuilts_flow`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from engines.asr.text import word_error_rate
from rtc_server.app import prebuilt_client_dir
from rtc_server.config import Config
from rtc_server.engine_set import Engines
from rtc_server.rtvi.config import EmbedConfig
from rtc_server.session import Session
from testkit.browser import (
    EMBED_DIR,
    INBOUND_STATS_JS,
    RTVI_MESSAGES_JS,
    BrowserMissing,
    chromium_page,
    embed_bundle,
    static_site,
    write_wav,
)
from testkit.speech import synth
from tests.support.server import SMALL_VIDEO, loopback_config, running_server

if TYPE_CHECKING:
    from playwright.async_api import Page

pytestmark = [pytest.mark.webrtc, pytest.mark.browser]


@asynccontextmanager
async def browser(tmp_path: Path, said: str | None) -> AsyncIterator[Page]:
    """Chromium whose microphone says `said` after 2 s (or stays silent); skips without it.
    Fails the test if the page asks anything of a host other than 127.0.0.1."""
    lead = np.zeros(32000, np.int16)
    pcm = np.concatenate([lead, synth(said, engine="piper"), lead]) if said else lead
    write_wav(tmp_path / "mic.wav", pcm, 16000)
    elsewhere: list[str] = []
    try:
        async with chromium_page(tmp_path / "mic.wav") as page:
            page.on("request", lambda r: None if r.url.startswith(
                ("http://127.0.0.1", "data:", "blob:")) else elsewhere.append(r.url))
            yield page
    except BrowserMissing as exc:
        pytest.skip(str(exc))
    assert not elsewhere, f"the page asked other hosts: {elsewhere}"


async def rtvi_messages(page: Page, kind: str) -> list[dict[str, Any]]:
    return [m for m in await page.evaluate(RTVI_MESSAGES_JS) if m.get("type") == kind]


async def wait_for(page: Page, condition: str, timeout_s: float) -> None:
    """Until the JS `condition` over `msgs` (the RTVI messages so far) holds."""
    await page.wait_for_function(
        f"(() => {{ const msgs = ({RTVI_MESSAGES_JS})(); return {condition}; }})()",
        timeout=timeout_s * 1000,
    )


def need_embed_bundle() -> None:
    """The example's bundle (built once, `make clients`), or the test skips saying why."""
    try:
        embed_bundle()
    except BrowserMissing as exc:
        pytest.skip(str(exc))


def embed_config(config: Config, origin: str) -> Config:
    return dataclasses.replace(config, embed=EmbedConfig(cors_origins=(origin,)))


async def test_the_js_sdk_asks_by_voice_and_by_text(tmp_path: Path, agent_engines: Engines) -> None:
    from testkit.agent import agent_config

    need_embed_bundle()
    async with (
        browser(tmp_path, "What is the capital of France?") as page,
        static_site(EMBED_DIR) as origin,
        running_server(embed_config(agent_config(), origin), agent_engines) as (server, url),
    ):
        await page.goto(f"{origin}/index.html?server={url}")
        await page.click("#connect")
        await page.wait_for_function("document.getElementById('status').textContent === 'ready'",
                                     timeout=20000)
        assert (await rtvi_messages(page, "bot-ready"))[0]["data"]["version"] == "2.2.0"
        await wait_for(page, "msgs.some(m => m.type === 'user-transcription' && m.data.final)",
                       120)
        final = [m for m in await rtvi_messages(page, "user-transcription") if m["data"]["final"]]
        # The words arrived through the browser's microphone (one word misheard at most:
        # Chromium's looped fake capture starts the clip where it will, and Whisper once heard
        # "capital of friends").
        heard = final[0]["data"]["text"]
        assert word_error_rate(["What is the capital of France?"], [heard]) <= 1 / 6, heard
        # generous bounds: on a loaded 2-core machine an answer can take minutes
        await wait_for(page, "msgs.some(m => m.type === 'bot-stopped-speaking')", 300)
        stats = await page.evaluate(INBOUND_STATS_JS)
        assert stats["video"]["framesDecoded"] > 25, stats
        assert (stats["video"]["width"], stats["video"]["height"]) == (512, 512)
        assert stats["audio"]["packets"] > 50, stats
        assert stats["audio"]["energy"] > 0.01, stats  # the voice was decoded, not silence
        # bot-output carries the spoken chunks exactly, their spaces kept (Chinese has none)
        spoken = "".join(m["data"]["text"] for m in await rtvi_messages(page, "bot-output"))
        spoken = spoken.strip()
        session = next(iter(server.registry))
        assert isinstance(session, Session)
        history = session.behaviour.history  # type: ignore[attr-defined]
        assert history[-1].role == "assistant" and history[-1].content == spoken
        assert await page.text_content("#log li.user") == final[0]["data"]["text"]

        await page.fill("#question", "And what is the capital of Italy?")
        await page.click("#ask button")
        await wait_for(page, "msgs.filter(m => m.type === 'bot-stopped-speaking').length >= 2",
                       300)
        history = session.behaviour.history  # type: ignore[attr-defined]
        assert history[-2].content == "And what is the capital of Italy?"
        assert history[-1].role == "assistant" and history[-1].content
        typed = [m["data"]["rtc_avatar"] for m in await rtvi_messages(page, "metrics")][-1]
        assert typed["turn_id"] == 2 and typed["marks_ms"]["first_audio_sent"] > 0


async def test_the_prebuilts_flow(tmp_path: Path) -> None:
    """`startBotAndConnect` to /start with the prebuilt's own request data and transport
    option (`waitForICEGathering`: the offer carries every candidate, then the transport
    renegotiates once gathering completes): connected, bot-ready, the face decoded."""
    need_embed_bundle()
    async with (
        browser(tmp_path, None) as page,
        running_server(loopback_config(SMALL_VIDEO)) as (server, url),
    ):
        await page.goto(f"{url}/static/embed/index.html")
        await page.evaluate("""async (url) => {
            const { PipecatClient, SmallWebRTCTransport, WavMediaManager } = window.avatar;
            const client = new PipecatClient({
                transport: new SmallWebRTCTransport({
                    waitForICEGathering: true, mediaManager: new WavMediaManager() }),
                enableMic: true, enableCam: false });
            window.started = client;
            await client.startBotAndConnect({ endpoint: url + '/start', requestData: {
                createDailyRoom: false, enableDefaultIceServers: true, transport: 'webrtc' } });
        }""", url)
        assert (await rtvi_messages(page, "bot-ready"))
        pc_id = await page.evaluate("window.started.transport.pc_id")
        assert [s.id for s in server.registry] == [pc_id]  # the /start ticket's session
        await page.wait_for_timeout(1500)
        stats = await page.evaluate(INBOUND_STATS_JS)
        assert stats["video"]["framesDecoded"] > 5, stats
        await page.evaluate("window.started.disconnect()")


async def test_the_prebuilt_client_plays_the_avatar(tmp_path: Path) -> None:
    prebuilt = prebuilt_client_dir()
    if prebuilt is None:
        pytest.skip("pipecat-ai-small-webrtc-prebuilt is not installed (make clients)")
    bundle = os.environ.get("RTC_AVATAR_DAILY_BUNDLE")
    if not bundle or not os.path.isfile(bundle):  # noqa: ASYNC240 (a stat before any I/O)
        pytest.skip("the prebuilt's daily-js loads Daily's call machine from c.daily.co, which "
                    "no registry ships: set RTC_AVATAR_DAILY_BUNDLE to a local copy of "
                    "call-machine-object-bundle.js to run it")
    config = dataclasses.replace(loopback_config(SMALL_VIDEO), embed=EmbedConfig(prebuilt=True))
    async with browser(tmp_path, None) as page, running_server(config) as (server, url):
        await page.route("https://c.daily.co/**", lambda route: route.fulfill(path=bundle))
        await page.route("https://*.sentry.io/**", lambda route: route.abort())
        await page.goto(f"{url}/prebuilt/")
        await page.get_by_role("button", name="Connect").click()
        await page.wait_for_function(
            "window.__probe.pcs.some(p => p.connectionState === 'connected')", timeout=20000)
        await page.wait_for_timeout(2000)
        stats = await page.evaluate(INBOUND_STATS_JS)
        assert stats["video"]["framesDecoded"] > 10, stats
        assert len(server.registry) == 1
