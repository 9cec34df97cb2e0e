"""Headless Debian Chromium for the tests and benchmarks that drive a real web client.

`chromium_page(wav)` launches it with a fake microphone that plays `wav` once (the flags
below; loopback ICE only works with `--allow-loopback-in-peer-connection`) and adds
`PROBE_JS` to every page: a neutral recorder that any client is measured with alike, ours or
Pipecat's. It keeps every peer connection the page makes (`__probe.pcs`, for `getStats`) and
every message on the data channels it creates (`__probe.messages`: [ms, label, data]).

The received voice is judged by `getStats` (packets, `totalAudioEnergy`), not by its
waveform: headless Chromium here hands WebAudio silence for a remote track, and a
MediaStreamTrackProcessor drops frames in bursts on a loaded 2-core machine (tried both).

`static_site(folder)` serves a folder from a second origin (an app's page served elsewhere).
"""

from __future__ import annotations

import shutil
import wave
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from aiohttp import web
from aiohttp.test_utils import TestServer

if TYPE_CHECKING:
    from playwright.async_api import Page

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
REPO = Path(__file__).resolve().parents[1]
EMBED_DIR = REPO / "web_client" / "embed"  # the Pipecat JS SDK example (bundle by make clients)


class BrowserMissing(RuntimeError):
    """Chromium (or a built client) is not installed: the caller skips, saying which."""


PROBE_JS = """(() => {
  const probe = window.__probe = { pcs: [], messages: [] };
  const Native = window.RTCPeerConnection;
  const Probed = function (...args) {
    const pc = new Native(...args);
    probe.pcs.push(pc);
    const create = pc.createDataChannel.bind(pc);
    pc.createDataChannel = (label, options) => {
      const dc = create(label, options);
      dc.addEventListener('message',
        (e) => probe.messages.push([performance.now(), label, e.data]));
      return dc;
    };
    return pc;
  };
  Probed.prototype = Native.prototype;
  window.RTCPeerConnection = Probed;
})();"""

# The received RTVI messages of the page's data channels, parsed (skipping keep-alives).
RTVI_MESSAGES_JS = """() => window.__probe.messages
  .filter(([, , d]) => typeof d === 'string' && d.startsWith('{'))
  .map(([t, label, d]) => Object.assign(JSON.parse(d), { _t: t, _label: label }))"""

# Inbound RTP of the page's live peer connection: frames decoded, packets, frame size.
INBOUND_STATS_JS = """async () => {
  const pc = window.__probe.pcs.filter((p) => p.connectionState === 'connected').pop();
  const out = {};
  if (!pc) return out;
  (await pc.getStats()).forEach((s) => {
    if (s.type === 'inbound-rtp') out[s.kind] = {
      framesDecoded: s.framesDecoded, packets: s.packetsReceived,
      width: s.frameWidth, height: s.frameHeight, energy: s.totalAudioEnergy };
  });
  return out;
}"""


def write_wav(path: Path, pcm: np.ndarray, rate: int) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.astype(np.int16).tobytes())


def chromium_args(wav: Path) -> list[str]:
    return [
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={wav}%noloop",
        "--autoplay-policy=no-user-gesture-required",
        "--allow-loopback-in-peer-connection",
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ]


@asynccontextmanager
async def chromium_page(wav: Path) -> AsyncIterator[Page]:
    """A page of a fresh headless Chromium whose fake microphone plays `wav` once, with
    `PROBE_JS` loaded. Raises BrowserMissing when Chromium or playwright is not there."""
    if not Path(CHROMIUM).exists():  # noqa: ASYNC240 (a stat before any I/O starts)
        raise BrowserMissing("Debian chromium is not installed (make test installs it as root)")
    try:
        from playwright.async_api import async_playwright
    except ImportError as exc:
        raise BrowserMissing("playwright is not installed (the dev extra)") from exc
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=chromium_args(wav)
        )
        try:
            context = await browser.new_context()
            await context.add_init_script(PROBE_JS)  # every page of it, new ones too
            yield await context.new_page()
        finally:
            await browser.close()


@asynccontextmanager
async def static_site(folder: Path) -> AsyncIterator[str]:
    """`folder` served on an ephemeral 127.0.0.1 port (another origin); yields its URL."""
    app = web.Application()
    app.router.add_static("/", folder, show_index=False)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("/")).rstrip("/")
    finally:
        await server.close()


def embed_bundle() -> Path:
    """The bundled Pipecat JS SDK example; BrowserMissing when `make clients` has not run."""
    bundle = EMBED_DIR / "bundle.js"
    if not bundle.is_file():
        raise BrowserMissing(
            "web_client/embed/bundle.js is not built (make clients: npm and esbuild)")
    return bundle
