"""Embedding through Pipecat's clients: connect time, voice-to-voice, typed questions.

The server runs as its own process in agent mode (`bench.server_process`, no greeting); the
parts, each over repeated runs with p50/p95:

- `ready`: offer to `bot-ready` with the Pipecat JS SDK example (`web_client/embed/`, built
  by `make clients`) in headless Chromium, N connections: from the moment the transport's
  offer POST starts (resource timing) to `connect()` resolving on `bot-ready`; also the whole
  `connect()` (devices included).
- `v2v`: the same questions through the JS SDK page and through `web_client/`, alternating
  (same browser, same fake microphone WAV): voice-to-voice as the server marks it, from the
  end of the voice it heard (`voice_end`) to the answer's first sample sent
  (`first_audio_sent`); both clients use Chromium's own WebRTC stack for the media, so what
  could differ is the server's work per protocol and what the page costs the machine. And
  measured at the client, with aiortc peers (`testkit/smallwebrtc.py` behaves as the JS
  transport: trickle, three transceivers, `chat` channel, RTVI; `testkit/peer.py` as
  `web_client/`): end of the microphone's speech to the first loud audio received.
- `typed`: the same questions as RTVI `send-text` from the SmallWebRTC aiortc peer: typed
  question to first agent audio (server mark and at the client), against the spoken
  questions' LLM+TTS share (`first_audio_sent - asr_final`) from `v2v`'s SmallWebRTC runs.

    unshare -n sh -c 'ip link set lo up && \\
        exec .venv/bin/python bench/embed.py [--parts ready,v2v,typed] [--questions 10]'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.server_process import agent_toml, running_server  # noqa: E402
from bench.stats import pct, publish  # noqa: E402
from common.logs import setup_logging  # noqa: E402
from rtc_server.ice import restrict_host_candidates_to_loopback  # noqa: E402
from testkit.agent import audio_timeline  # noqa: E402
from testkit.browser import RTVI_MESSAGES_JS, chromium_page, embed_bundle, write_wav  # noqa: E402
from testkit.pauses import COMPLETE_QUESTIONS  # noqa: E402
from testkit.peer import LoopbackPeer, PcmMicrophone  # noqa: E402
from testkit.smallwebrtc import SmallWebRTCPeer  # noqa: E402
from testkit.speech import synth, voiced_bounds  # noqa: E402

log = logging.getLogger("bench")
LEAD_S = 3.0  # silence before the question: the page connects meanwhile
QUIET_RMS = 150.0
TURN_S = 300.0  # longest wait for a whole turn (a shared machine can be very slow)
Result = dict[str, Any]

CONNECT_JS = """async (endpoint) => {
  const t0 = performance.now();
  await window.avatar.client.connect({ webrtcRequestParams: { endpoint } });
  const ready = performance.now();
  const offer = performance.getEntriesByType('resource').find((e) => e.name === endpoint);
  await window.avatar.client.disconnect();
  return { connect_ms: ready - t0, offer_to_ready_ms: ready - offer.startTime };
}"""
# The turn's complete timings, as each page received them.
WEB_TIMINGS_JS = """window.rtcAvatar.events.find(
  (e) => e.type === 'timings' && e.stall_ms !== null && 'voice_end' in e.marks_ms)"""
SDK_TIMINGS_JS = f"""(() => {{
  const m = ({RTVI_MESSAGES_JS})().find((m) => m.type === 'metrics'
    && m.data.rtc_avatar.stall_ms !== null && 'voice_end' in m.data.rtc_avatar.marks_ms);
  return m && m.data.rtc_avatar;
}})()"""


def question_pcm(question: str) -> np.ndarray:
    speech = synth(question, engine="piper")
    first, last = voiced_bounds(speech)
    return speech[first:last]


# --- ready -----------------------------------------------------------------------------------


async def part_ready(url: str, n: int, tmp: Path) -> list[Result]:
    write_wav(tmp / "silence.wav", np.zeros(16000 * 30, np.int16), 16000)
    results = []
    async with chromium_page(tmp / "silence.wav") as first:
        for i in range(n + 1):  # one warm-up connection, not counted
            page = await first.context.new_page()
            await page.goto(f"{url}/static/embed/index.html")
            result = await page.evaluate(CONNECT_JS, f"{url}/api/offer")
            await page.close()
            if i:
                results.append(result)
                log.info("ready %d/%d: offer -> bot-ready %.0f ms", i, n,
                         result["offer_to_ready_ms"])
    return results


# --- voice-to-voice --------------------------------------------------------------------------


async def browser_turn(url: str, client: str, pcm: np.ndarray, tmp: Path) -> Result:
    wav = tmp / f"{client}.wav"
    lead = np.zeros(int(16000 * LEAD_S), np.int16)
    write_wav(wav, np.concatenate([lead, pcm, np.zeros(16000, np.int16)]), 16000)
    async with chromium_page(wav) as page:
        if client == "web_client":
            await page.goto(f"{url}/")
            await page.click("#start")
            script = WEB_TIMINGS_JS
        else:
            await page.goto(f"{url}/static/embed/index.html")
            await page.click("#connect")
            script = SDK_TIMINGS_JS
        await page.wait_for_function(f"!!({script})", timeout=TURN_S * 1000, polling=100)
        timings = await page.evaluate(script)
    marks = timings["marks_ms"]
    return {"client": client, "marks_ms": marks,
            "v2v_ms": marks["first_audio_sent"] - marks["voice_end"]}


async def aiortc_turn(url: str, client: str, pcm: np.ndarray) -> Result:
    mic = PcmMicrophone(np.concatenate([np.zeros(int(16000 * 0.6), np.int16), pcm]), 16000)
    peer = (SmallWebRTCPeer(url, microphone=mic) if client == "smallwebrtc"
            else LoopbackPeer(url, microphone=mic))
    await peer.connect()
    try:
        await asyncio.wait_for(mic.playing.wait(), 10)
        assert mic.started_at is not None
        speech_end = mic.started_at - 0.6 + (len(pcm) / 16000 + 0.6)
        if isinstance(peer, SmallWebRTCPeer):
            done = await peer.wait_rtvi("metrics", TURN_S, lambda m: (
                m["data"]["rtc_avatar"]["stall_ms"] is not None))
            marks = done["data"]["rtc_avatar"]["marks_ms"]
        else:
            event = await peer.wait_event(lambda e: e["type"] == "timings" and e.get(
                "stall_ms") is not None, TURN_S)
            marks = event["marks_ms"]
        a_t, rms = audio_timeline(peer.received)
        loud = np.flatnonzero((rms > QUIET_RMS) & (a_t > speech_end))
        v2v = float(a_t[loud[0]] - speech_end) * 1000 if len(loud) else float("nan")
    finally:
        await peer.close()
    return {"client": client, "marks_ms": marks, "v2v_ms": v2v}


async def failed_as_nan(client: str, turn: Awaitable[Result]) -> Result:
    """The turn's result, or NaN where it did not complete (counted, not hidden)."""
    try:
        return await turn
    except Exception as exc:  # a run's boundary (a turn timed out): counted, the rest go on
        log.warning("%s turn failed: %r", client, exc)
        return {"client": client, "marks_ms": {}, "v2v_ms": float("nan"), "failed": True}


async def part_v2v(url: str, questions: list[str], tmp: Path) -> list[Result]:
    results = []
    await failed_as_nan("warm-up", aiortc_turn(url, "events", question_pcm("Hello, how are you?")))
    for i, question in enumerate(questions):
        pcm = question_pcm(question)
        # alternate which client goes first, so a drift of the machine hits both alike
        order = ("web_client", "pipecat") if i % 2 == 0 else ("pipecat", "web_client")
        for client in order:
            results.append({**await failed_as_nan(client, browser_turn(url, client, pcm, tmp)),
                            "question": question, "where": "browser"})
        order = ("events", "smallwebrtc") if i % 2 == 0 else ("smallwebrtc", "events")
        for client in order:
            results.append({**await failed_as_nan(client, aiortc_turn(url, client, pcm)),
                            "question": question, "where": "aiortc"})
        log.info("v2v %d/%d %r: %s", i + 1, len(questions), question, ", ".join(
            f"{r['client']} {r['v2v_ms']:.0f}" for r in results[-4:]))
    return results


# --- typed questions -------------------------------------------------------------------------


def completes_a_new_turn(seen: set[int]) -> Callable[[Result], bool]:
    def check(message: Result) -> bool:
        turn = message["data"]["rtc_avatar"]
        return turn["stall_ms"] is not None and turn["turn_id"] not in seen

    return check


async def part_typed(url: str, questions: list[str]) -> list[Result]:
    results = []
    peer = SmallWebRTCPeer(url)
    await peer.connect()
    try:
        await peer.wait_rtvi("bot-ready", 10)
        for i, question in enumerate(["Hello, how are you?", *questions]):  # one warm-up
            seen = {m["data"]["rtc_avatar"]["turn_id"] for m in peer.of_type("metrics")}
            sent = time.monotonic()
            peer.send_rtvi("send-text", {"content": question})
            done = await peer.wait_rtvi("metrics", TURN_S, completes_a_new_turn(seen))
            marks = done["data"]["rtc_avatar"]["marks_ms"]
            a_t, rms = audio_timeline(peer.received)
            loud = np.flatnonzero((rms > QUIET_RMS) & (a_t > sent))
            client_ms = float(a_t[loud[0]] - sent) * 1000 if len(loud) else float("nan")
            await asyncio.sleep(1.0)
            if i:
                results.append({"question": question, "marks_ms": marks,
                                "client_ms": client_ms})
                log.info("typed %d/%d %r: first audio sent %.0f ms", i, len(questions),
                         question, marks["first_audio_sent"])
    finally:
        await peer.close()
    return results


# --- report ----------------------------------------------------------------------------------


def row(label: str, values: list[float]) -> str:
    values = [v for v in values if np.isfinite(v)]
    return f"| {label} | {pct(values, 0.5):.0f} | {pct(values, 0.95):.0f} | {len(values)} |"


def report(results: dict[str, list[Result]], args: argparse.Namespace) -> str:
    lines = [
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()} {args.machine}, `unshare -n sh -c "
        f"'ip link set lo up && exec .venv/bin/python bench/embed.py --parts {args.parts} "
        f"--questions {args.questions} --connections {args.connections}'`", "",
        "| metric | p50 | p95 | n |", "| --- | --- | --- | --- |",
    ]
    ready = results.get("ready", [])
    if ready:
        lines.append(row("JS SDK: offer POST -> bot-ready, ms",
                         [r["offer_to_ready_ms"] for r in ready]))
        lines.append(row("JS SDK: connect() -> bot-ready (devices included), ms",
                         [r["connect_ms"] for r in ready]))
    v2v = results.get("v2v", [])
    for client, label in (("web_client", "browser, web_client/"), ("pipecat", "browser, JS SDK"),
                          ("events", "aiortc, events channel"),
                          ("smallwebrtc", "aiortc, SmallWebRTC + RTVI")):
        runs = [r for r in v2v if r["client"] == client]
        if runs:
            what = "server marks" if runs[0]["where"] == "browser" else "at the client"
            lines.append(row(f"voice-to-voice, {label} ({what}), ms",
                             [float(r["v2v_ms"]) for r in runs]))
    for a, b in (("pipecat", "web_client"), ("smallwebrtc", "events")):
        pairs: dict[str, dict[str, float]] = {}
        for r in v2v:
            if r["client"] in (a, b):
                pairs.setdefault(r["question"], {})[r["client"]] = float(r["v2v_ms"])
        ratios = [p[a] / p[b] for p in pairs.values() if a in p and b in p and p[b] > 0]
        if ratios:
            lines.append(f"| voice-to-voice {a} / {b}, same question | {pct(ratios, 0.5):.3f} | "
                         f"{pct(ratios, 0.95):.3f} | {len(ratios)} |")
    spoken = [r for r in v2v if r["client"] == "smallwebrtc" and not r.get("failed")]
    if spoken:
        lines.append(row("spoken question: LLM+TTS share (first_audio_sent - asr_final), ms",
                         [r["marks_ms"]["first_audio_sent"] - r["marks_ms"]["asr_final"]
                          for r in spoken]))
    typed = results.get("typed", [])
    if typed:
        lines.append(row("typed question -> first audio sent (server), ms",
                         [r["marks_ms"]["first_audio_sent"] for r in typed]))
        lines.append(row("typed question -> first audio received (client), ms",
                         [r["client_ms"] for r in typed]))
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> dict[str, list[Result]]:
    parts = args.parts.split(",")
    if {"ready", "v2v"} & set(parts):
        embed_bundle()  # BrowserMissing: say so before the models load
    restrict_host_candidates_to_loopback()
    questions = list((COMPLETE_QUESTIONS * 2)[: args.questions])
    config = agent_toml(args.port, llm={"seed": 1234, "temperature": 0.0})
    url = f"http://127.0.0.1:{args.port}"
    out: dict[str, list[Result]] = {}
    with tempfile.TemporaryDirectory() as folder:
        async with running_server(config):
            if "ready" in parts:
                out["ready"] = await part_ready(url, args.connections, Path(folder))
            if "v2v" in parts:
                out["v2v"] = await part_v2v(url, questions, Path(folder))
            if "typed" in parts:
                out["typed"] = await part_typed(url, questions)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="ready,v2v,typed")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU")
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--port", type=int, default=8766)
    args = parser.parse_args()
    setup_logging("INFO")
    results = asyncio.run(run(args))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return publish(report(results, args), results, None)


if __name__ == "__main__":
    sys.exit(main())
