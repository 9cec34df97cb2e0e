"""Scale-out on loopback: sessions over workers behind the gateway, then a failure drill.

Starts redis-server, W workers (`python -m rtc_server --role worker`), the gateway and, in
agent mode with `--llm shared`, one OpenAI-compatible LLM server (llama_cpp.server) that all
workers use; with `--llm own` each worker loads its own model. Then:
1. **Offer latency**: `--offers` offers alternately through the gateway and straight to a
   worker's `/cluster/offer` (signed by the bench, which knows the cluster secret): the HTTP
   round trip only, so the difference is what the gateway adds (directory read, reservation
   script, one forwarding hop).
2. **Sessions**: S loopback peers connect through the gateway; each asks `--questions` spoken
   questions (piper voice, a random 0-1 s pause first, the next one once the answer is over)
   while every session's video keeps streaming. Per answer: voice-to-voice = end of the
   peer's speech -> first loud answer audio received (aiortc's 80 ms receiver hold removed);
   per session: received video fps and the worst one-second window.
3. **Failure drill** (`--drill`): with all sessions up and speech going on, one worker is
   killed (SIGKILL). Reported: when new offers succeed again, how soon the directory drops
   the worker, the survivors' fps before/after, and when the killed worker's peers see their
   media stop and their connection fail (aiortc's ICE consent check takes up to ~30 s).

    unshare -n sh -c 'ip link set lo up && exec .venv/bin/python bench/cluster.py \\
        [--sessions 8] [--workers 2] [--mode echo|agent] [--llm shared|own] [--drill]'
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiortc import RTCConfiguration, RTCPeerConnection

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stats import pct, publish  # noqa: E402
from common.logs import setup_logging  # noqa: E402
from rtc_server.cluster.local import (  # noqa: E402
    SHARED_LLM_TOML,
    RunningCluster,
    default_gguf,
    free_port,
    llama_server_argv,
    run_cluster,
    start_llm_server,
)
from rtc_server.cluster.signing import TOKEN_HEADER, request_token  # noqa: E402
from rtc_server.ice import restrict_host_candidates_to_loopback  # noqa: E402
from testkit.agent import audio_timeline  # noqa: E402
from testkit.peer import LoopbackPeer, PcmMicrophone  # noqa: E402
from testkit.speech import synth  # noqa: E402

log = logging.getLogger("bench")
SECRET = "bench-cluster-secret"
QUIET_RMS = 150.0
QUESTIONS = ("What is the capital of France?", "How many days are in a week?",
             "What color is the sky on a clear day?", "What is two plus two?",
             "How do I open a savings account?", "Who wrote Romeo and Juliet?")
CONFIG = """
[server]
mode = "{mode}"
max_sessions = {capacity}
log_level = "WARNING"
[ice]
loopback_only = true
[media]
width = {width}
height = {height}
fps = {fps}
[agent]
greeting = ""
[llm]
seed = 1234
temperature = 0.0
{llm}
"""


async def offer_latency(cluster: RunningCluster, n: int, sdp: str) -> dict[str, list[float]]:
    """Round trips of the same offer through the gateway and straight to a worker (ms)."""
    out: dict[str, list[float]] = {"gateway": [], "direct": []}
    worker_url = cluster.workers[0][1]
    worker_id = cluster.workers[0][0].ready_line.split()[2]
    body = json.dumps({"sdp": sdp, "type": "offer"}).encode()
    async with aiohttp.ClientSession() as http:
        for i in range(2 * n):
            via = "gateway" if i % 2 == 0 else "direct"
            if via == "gateway":
                url, headers, session_id = cluster.url + "/api/offer", {}, ""
            else:
                session_id = f"bench-direct-{i}"
                token = request_token(SECRET, "offer", worker_id, session_id, 10)
                url, headers = worker_url + "/cluster/offer", {TOKEN_HEADER: token}
            headers["Content-Type"] = "application/json"
            start = time.perf_counter()
            async with http.post(url, data=body, headers=headers) as resp:
                answer = await resp.json()
                assert resp.status == 200, answer
            out[via].append((time.perf_counter() - start) * 1000)
            if via == "gateway":
                async with http.delete(f"{cluster.url}/api/sessions/{answer['session_id']}"):
                    pass
            else:
                token = request_token(SECRET, "delete", worker_id, session_id, 10)
                async with http.delete(f"{worker_url}/cluster/sessions/{session_id}",
                                       headers={TOKEN_HEADER: token}):
                    pass
    return out


@functools.cache
def speech_of(question: str) -> np.ndarray:
    return synth(question, engine="piper")


async def ask(peer: LoopbackPeer, question: str, timeout_s: float) -> float:
    """Say `question`, wait for the whole answer; voice-to-voice in seconds (nan if none)."""
    speech = speech_of(question)
    events = peer.received.events
    start = len(events)

    def since(index: int, state: str) -> Callable[[dict[str, Any]], bool]:
        return lambda e: e.get("state") == state and any(x is e for x in events[index:])

    peer.mic.set_audio(speech, 16000)
    await asyncio.wait_for(peer.mic.playing.wait(), 10)
    assert peer.mic.started_at is not None
    speech_end = peer.mic.started_at + len(speech) / 16000
    speaking = await peer.wait_event(since(start, "speaking"), timeout_s)
    after = next(i for i, e in enumerate(events) if e is speaking)
    await peer.wait_event(since(after + 1, "listening"), timeout_s)  # the answer is over
    a_t, rms = audio_timeline(peer.received)
    loud = np.flatnonzero((rms > QUIET_RMS) & (a_t > speech_end))
    return float(a_t[loud[0]] - speech_end) if len(loud) else float("nan")


def fps_of(arrivals: list[float], start: float, end: float) -> tuple[float, float]:
    """Mean fps and worst one-second window of frames arriving within [start, end)."""
    times = np.array([t for t in arrivals if start <= t < end])
    if len(times) < 2:
        return float("nan"), float("nan")
    windows = [np.sum((times >= t) & (times < t + 1.0)) for t in times[times < end - 1.0]]
    return (len(times) - 1) / (times[-1] - times[0]), float(min(windows) if windows else "nan")


async def conversation(
    peers: list[LoopbackPeer], questions: int, timeout_s: float
) -> tuple[list[float], list[tuple[float, float]]]:
    async def one(peer: LoopbackPeer, index: int) -> list[float]:
        results = []
        for q in range(questions):
            await asyncio.sleep(random.random())  # noqa: ASYNC110 (a human's pause)
            question = QUESTIONS[(index + q) % len(QUESTIONS)]
            try:
                results.append(await ask(peer, question, timeout_s))
            except TimeoutError:  # counted as not answered in time; the session goes on
                log.warning("no complete answer within %.0f s: %r", timeout_s, question)
                results.append(float("nan"))
        return results

    start = time.monotonic()
    per_peer = await asyncio.gather(*(one(p, i) for i, p in enumerate(peers)))
    end = time.monotonic()
    fps = [fps_of(p.received.video_arrival, start, end) for p in peers]
    return [v for results in per_peer for v in results], fps


async def drill(cluster: RunningCluster, peers: list[LoopbackPeer], sdp: str) -> dict[str, Any]:
    """Kill the first worker while every peer is talking; see who notices what, when."""
    victim, _ = cluster.workers[0]
    victim_id = victim.ready_line.split()[2]
    doomed = [p for p in peers if p.answer.get("worker_id") == victim_id]
    others = [p for p in peers if p not in doomed]
    for i, peer in enumerate(peers):  # speech going on everywhere
        peer.mic.set_audio(speech_of(QUESTIONS[i % len(QUESTIONS)]), 16000)
    await asyncio.sleep(1.0)
    t0 = time.monotonic()
    victim.kill()
    out: dict[str, Any] = {"killed": victim_id, "its_sessions": len(doomed)}
    failed_offers, body = 0, {"sdp": sdp, "type": "offer"}
    async with aiohttp.ClientSession() as http:
        for _ in range(80):  # an offer every 0.25 s until one succeeds (bounded)
            async with http.post(cluster.url + "/api/offer", json=body) as resp:
                answer = await resp.json()
            if resp.status == 200:
                out["first_offer_ok_s"] = time.monotonic() - t0
                async with http.delete(f"{cluster.url}/api/sessions/{answer['session_id']}"):
                    pass
                break
            failed_offers += 1
            await asyncio.sleep(0.25)
        out["offers_failed_before"] = failed_offers
        for _ in range(120):  # the directory drops the dead worker (bounded wait)
            async with http.get(cluster.url + "/healthz") as resp:
                health = await resp.json()
            if health.get("workers") == len(cluster.workers) - 1:
                out["directory_dropped_s"] = time.monotonic() - t0
                break
            await asyncio.sleep(0.1)
    await asyncio.sleep(max(0.0, t0 + 5.0 - time.monotonic()))
    out["survivor_fps_before"] = [fps_of(p.received.video_arrival, t0 - 5, t0)[0] for p in others]
    out["survivor_fps_after"] = [fps_of(p.received.video_arrival, t0, t0 + 5)[0] for p in others]
    out["doomed_last_frame_s"] = [max(p.received.video_arrival) - t0 for p in doomed]
    states = await asyncio.gather(*(wait_failed(p, 45.0) for p in doomed))
    out["doomed_failed_s"] = [s - t0 if s else float("nan") for s in states]
    return out


async def wait_failed(peer: LoopbackPeer, timeout_s: float) -> float | None:
    done = asyncio.Event()

    def check() -> None:
        if peer.pc.connectionState in ("failed", "closed"):
            done.set()

    peer.pc.on("connectionstatechange", check)
    check()
    try:
        await asyncio.wait_for(done.wait(), timeout_s)
    except TimeoutError:
        return None
    return time.monotonic()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    restrict_host_candidates_to_loopback()
    for question in QUESTIONS:  # the voice loads once, before any peer's media is running
        speech_of(question)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    async with AsyncExitStack() as stack:
        llm = ""
        if args.mode == "agent" and args.llm == "shared":
            port = free_port()
            model = args.llm_model or default_gguf()
            server = await start_llm_server(log_dir, llama_server_argv(model, port,
                                                                       args.llm_threads))
            stack.push_async_callback(server.stop)
            llm = SHARED_LLM_TOML.format(url=f"http://127.0.0.1:{port}/v1")
        elif args.mode == "agent" and args.llm_model:
            llm = f'model = "{args.llm_model}"'
        config_path = log_dir / "cluster.toml"
        capacity = -(-args.sessions // args.workers) + 2  # room for the drill's new offers
        config_path.write_text(CONFIG.format(mode=args.mode, capacity=capacity, llm=llm,
                                             width=args.width, height=args.height,
                                             fps=args.fps))
        cluster = await stack.enter_async_context(
            run_cluster(log_dir, config_path, SECRET, workers=args.workers)
        )
        log.info("cluster up (logs in %s)", log_dir)
        probe = RTCPeerConnection(RTCConfiguration(iceServers=[]))  # one offer, reused
        probe.addTransceiver("audio")
        probe.addTransceiver("video", direction="recvonly")
        await probe.setLocalDescription(await probe.createOffer())
        sdp = probe.localDescription.sdp
        results: dict[str, Any] = {"offers": await offer_latency(cluster, args.offers, sdp)}
        await probe.close()
        peers = [LoopbackPeer(cluster.url, microphone=PcmMicrophone()) for _ in
                 range(args.sessions)]
        try:
            for peer in peers:
                await peer.connect()
            log.info("%d sessions up: %s", len(peers),
                     sorted(p.answer["worker_id"] for p in peers))
            await asyncio.sleep(1.0)
            v2v, fps = await conversation(peers, args.questions, args.timeout)
            results.update(v2v_s=v2v, fps=fps)
            if args.drill:
                results["drill"] = await drill(cluster, peers, sdp)
        finally:
            for peer in peers:
                await peer.close(delete=False)
    return results


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    gw, direct = results["offers"]["gateway"], results["offers"]["direct"]
    v2v = [v * 1000 for v in results["v2v_s"] if np.isfinite(v)]
    fps = [f for f, _ in results["fps"]]
    worst = [w for _, w in results["fps"]]
    command = " ".join(sys.argv[1:])
    lines = [
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()} {args.machine}, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end, "
        f"`bench/cluster.py {command}`",
        "",
        "| metric | p50 | p95 |",
        "| --- | --- | --- |",
        f"| offer through the gateway, ms | {pct(gw, 0.5):.1f} | {pct(gw, 0.95):.1f} |",
        f"| offer straight to the worker, ms | {pct(direct, 0.5):.1f} | {pct(direct, 0.95):.1f} |",
        f"| added by the gateway, ms | {pct(gw, 0.5) - pct(direct, 0.5):.1f} | "
        f"{pct(gw, 0.95) - pct(direct, 0.95):.1f} |",
        f"| voice-to-voice ({args.mode}, {len(v2v)}/{len(results['v2v_s'])} answered in "
        f"time), ms | {pct(v2v, 0.5):.0f} | "
        f"{pct(v2v, 0.95):.0f} |",
        f"| received video fps per session ({len(fps)} sessions; p5 for p95) | "
        f"{pct(fps, 0.5):.1f} | {pct(fps, 0.05):.1f} |",
        f"| worst 1 s window per session, frames (p5 for p95) | {pct(worst, 0.5):.0f} | "
        f"{pct(worst, 0.05):.0f} |",
    ]
    if "drill" in results:
        d, nan = results["drill"], float("nan")
        rows = [
            ("sessions on the killed worker", f"{d['its_sessions']}"),
            ("first new offer succeeded after, s", f"{d.get('first_offer_ok_s', nan):.2f}"),
            ("offers refused before that", f"{d['offers_failed_before']}"),
            ("directory dropped the worker after, s", f"{d.get('directory_dropped_s', nan):.2f}"),
            ("survivors' fps 5 s before / after (min)",
             f"{min(d['survivor_fps_before'], default=nan):.1f} / "
             f"{min(d['survivor_fps_after'], default=nan):.1f}"),
            ("killed worker's peers: last frame after, s (max)",
             f"{max(d['doomed_last_frame_s'], default=nan):.2f}"),
            ("killed worker's peers: connection failed after, s (max)",
             f"{max(d['doomed_failed_s'], default=nan):.1f}"),
        ]
        lines += ["", "| failure drill (a worker SIGKILLed while its sessions talk) | value |",
                  "| --- | --- |", *(f"| {name} | {value} |" for name, value in rows)]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mode", choices=["echo", "agent"], default="echo")
    parser.add_argument("--llm", choices=["shared", "own"], default="shared")
    parser.add_argument("--llm-model", help="GGUF (default: the bundled one)")
    parser.add_argument("--llm-threads", type=int, default=1)
    parser.add_argument("--questions", type=int, default=3, help="per session")
    parser.add_argument("--offers", type=int, default=30, help="of each kind")
    parser.add_argument("--drill", action="store_true")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--height", type=int, default=512)
    parser.add_argument("--fps", type=int, default=25)
    parser.add_argument("--timeout", type=float, default=90.0, help="per answer, s")
    parser.add_argument("--machine", default="2-core CPU")
    parser.add_argument("--json", help="also write the raw results here")
    args = parser.parse_args()
    setup_logging("INFO")
    results = asyncio.run(run(args))
    return publish(report(results, args), results, args.json)


if __name__ == "__main__":
    sys.exit(main())
