"""bench/cluster.py's failure drill: with every session up and speech going on, one worker is
killed (SIGKILL). Measured: when new offers through the gateway succeed again, how soon the
directory drops the worker, the survivors' fps 5 s before and after, and when the killed
worker's peers see their media stop and their connection fail (aiortc's ICE consent check
takes up to ~30 s). `drill_table`: the report's rows.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from rtc_server.cluster.local import RunningCluster
from testkit.conversation import QUESTIONS, fps_of, speech_of
from testkit.peer import LoopbackPeer


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


def drill_table(d: dict[str, Any]) -> list[str]:
    nan = float("nan")
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
    return ["| failure drill (a worker SIGKILLed while its sessions talk) | value |",
            "| --- | --- |", *(f"| {name} | {value} |" for name, value in rows)]
