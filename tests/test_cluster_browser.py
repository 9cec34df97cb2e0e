"""Headless Chromium through a real cluster and coturn: the page, forced to relay-only ICE
(`iceTransportPolicy: "relay"` from `/api/config`), gets its media through the TURN relay;
when its worker is killed, the page reconnects through the gateway to the other worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rtc_server.cluster.local import start_coturn
from tests.support.cluster import local_cluster, need
from tests.test_browser import browser_page

pytestmark = [pytest.mark.webrtc, pytest.mark.browser]
TURN_SECRET = "browser-turn-secret"

STATS_JS = """async () => {
    const out = {video: 0, audio: 0, local: null};
    const stats = await window.rtcAvatar.pc.getStats();
    stats.forEach(s => {
        if (s.type === 'inbound-rtp' && s.kind === 'video') out.video = s.framesDecoded;
        if (s.type === 'inbound-rtp' && s.kind === 'audio') out.audio = s.packetsReceived;
        if (s.type === 'transport' && s.selectedCandidatePairId) {
            const pair = stats.get(s.selectedCandidatePairId);
            out.local = stats.get(pair.localCandidateId).candidateType;
        }
    });
    return out;
}"""
CONNECTED = "window.rtcAvatar.pc && window.rtcAvatar.pc.connectionState === 'connected'"


async def media_stats(page: Any, min_frames: int) -> dict[str, Any]:
    """The page's stats once it has decoded `min_frames` video frames (within 20 s)."""
    stats: dict[str, Any] = await page.evaluate(
        f"""async () => {{
            for (let i = 0; i < 100; i++) {{
                const s = await ({STATS_JS})();
                if (s.video >= {min_frames}) return s;
                await new Promise(r => setTimeout(r, 200));
            }}
            return await ({STATS_JS})();
        }}"""
    )
    return stats


async def test_page_relays_through_coturn_and_reconnects_after_a_worker_crash(
    tmp_path: Path,
) -> None:
    need("turnserver", "redis-server")
    coturn, turn_url = await start_coturn(tmp_path, TURN_SECRET)
    extra = f'[relay]\nurls = ["{turn_url}"]\nsecret = "{TURN_SECRET}"\nrelay_only = true\n'
    try:
        async with (
            local_cluster(tmp_path, extra_toml=extra) as cluster,
            browser_page(tmp_path, "Hello, can you hear me?") as page,
        ):
            await page.goto(cluster.url + "/")
            await page.click("#start")
            await page.wait_for_function(CONNECTED, timeout=20000)
            stats = await media_stats(page, 10)
            assert stats["local"] == "relay" and stats["audio"] > 20, stats
            sessions = await cluster.worker_sessions()
            assert sorted(sessions) == [0, 1]
            victim = cluster.workers[sessions.index(1)]
            victim.child.kill()
            await victim.child.wait(10)
            await page.wait_for_function(
                f"window.rtcAvatar.sessions.length === 2 && {CONNECTED}", timeout=60000
            )
            stats = await media_stats(page, 10)  # a new peer connection, counting from 0
            assert stats["local"] == "relay", stats
            survivor = cluster.workers[1 - sessions.index(1)]
            assert (await cluster.get(survivor.url + "/healthz"))[1]["sessions"] == 1
    finally:
        await coturn.stop()
