"""Failures of a real cluster on loopback (a fresh one per test): a worker killed, Redis
down and back, a worker drained for a deploy."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from rtc_server.cluster.local import start_redis
from rtc_server.ice import restrict_host_candidates_to_loopback
from testkit.peer import LoopbackPeer
from tests.support.cluster import TTL_S, LocalCluster, eventually, local_cluster
from tests.test_signaling import offer_sdp

pytestmark = pytest.mark.webrtc


@pytest.fixture(autouse=True)
def loopback_peers() -> None:
    restrict_host_candidates_to_loopback()


async def video_keeps_coming(peer: LoopbackPeer, frames: int = 5) -> None:
    start = len(peer.received.video)

    async def more() -> bool:
        return len(peer.received.video) >= start + frames

    await eventually(more, 10, "more video frames")


async def request(cluster: LocalCluster, method: str, path: str, **kw: Any) -> tuple[int, dict]:
    assert cluster.http is not None
    async with cluster.http.request(method, cluster.url + path, **kw) as resp:
        return resp.status, await resp.json()


async def test_killed_worker_drops_out_and_new_offers_go_elsewhere(tmp_path: Path) -> None:
    async with local_cluster(tmp_path) as cluster:
        peers = [LoopbackPeer(cluster.url) for _ in range(3)]
        try:
            for peer in peers[:2]:
                await peer.connect()
            ids = [w.worker_id for w in cluster.workers]
            assert sorted(p.answer["worker_id"] for p in peers[:2]) == sorted(ids)
            victim = cluster.workers[ids.index(peers[0].answer["worker_id"])]
            survivor_id = peers[1].answer["worker_id"]
            victim.child.kill()
            await victim.child.wait(10)
            # at once, while the dead worker is still listed: skipped after one refusal
            await peers[2].connect()
            assert peers[2].answer["worker_id"] == survivor_id

            async def dropped() -> bool:
                health = await cluster.health()
                return (health["workers"], health["slots"], health["used"]) == (1, 2, 2)

            await eventually(dropped, TTL_S + 3, "dead worker out of the directory")
            await video_keeps_coming(peers[1])  # the other worker's session is untouched

            async def route_gone() -> bool:
                status, _ = await request(cluster, "DELETE", f"/api/sessions/{peers[0].session_id}")
                return status == 404

            await eventually(route_gone, TTL_S + 3, "dead worker's session route expired")
        finally:
            for peer in peers:
                await peer.close(delete=False)


async def test_redis_down_gateway_answers_503_and_workers_keep_serving(tmp_path: Path) -> None:
    async with local_cluster(tmp_path) as cluster:
        peer = LoopbackPeer(cluster.url)
        restarted = None
        try:
            await peer.connect()
            await cluster.redis.stop()
            _, sdp = await offer_sdp()
            status, body = await request(cluster, "POST", "/api/offer",
                                         json={"sdp": sdp, "type": "offer"})
            assert status == 503 and body["error"]["code"] == "directory_unavailable", body
            status, body = await cluster.get(cluster.url + "/healthz")
            assert status == 503 and body["error"]["code"] == "directory_unavailable"
            status, body = await request(cluster, "DELETE", f"/api/sessions/{peer.session_id}")
            assert status == 503
            assert cluster.http is not None
            async with cluster.http.get(cluster.url + "/metrics") as resp:
                assert "rtc_cluster_directory_up 0.0" in await resp.text()
            await video_keeps_coming(peer)  # the worker serves on without Redis
            port = int(cluster.redis_url.rsplit(":", 1)[1].split("/")[0])
            restarted, _ = await start_redis(tmp_path, port)

            async def back() -> bool:
                health = await cluster.health()
                return (health["workers"], health["used"]) == (2, 1)

            await eventually(back, TTL_S + 3, "workers re-registered with their session")
            status, body = await request(cluster, "DELETE", f"/api/sessions/{peer.session_id}")
            assert status == 200, body
        finally:
            await peer.close(delete=False)
            if restarted is not None:
                await restarted.stop()


async def test_drained_worker_finishes_its_session_then_exits(tmp_path: Path) -> None:
    async with local_cluster(tmp_path) as cluster:
        peer = LoopbackPeer(cluster.url)
        pcs, sessions = [], []
        try:
            await peer.connect()
            ids = [w.worker_id for w in cluster.workers]
            draining = cluster.workers[ids.index(peer.answer["worker_id"])]
            other = cluster.workers[1 - ids.index(peer.answer["worker_id"])]
            status, body = await cluster.signed("POST", draining, "/cluster/drain", "drain", "")
            assert status == 202 and body["sessions"] == 1

            async def marked() -> bool:
                health = await cluster.health()
                return (health["workers"], health["draining"]) == (1, 1)

            await eventually(marked, 5, "worker marked draining")
            for _ in range(2):  # new offers go to the other worker only
                pc, sdp = await offer_sdp()
                pcs.append(pc)
                status, body = await request(cluster, "POST", "/api/offer",
                                             json={"sdp": sdp, "type": "offer"})
                assert status == 200 and body["worker_id"] == other.worker_id, body
                sessions.append(body["session_id"])
            offer = json.dumps({"sdp": sdp, "type": "offer"}).encode()
            status, body = await cluster.signed("POST", draining, "/cluster/offer", "offer",
                                                "late", offer)
            assert status == 503 and body["error"]["code"] == "draining"
            await video_keeps_coming(peer)  # its session goes on while draining
            assert draining.child.running
            status, _ = await request(cluster, "DELETE", f"/api/sessions/{peer.session_id}")
            assert status == 200
            assert await draining.child.wait(15) == 0  # last session ended: it exits
            health = await cluster.health()  # deregistered on the way out, not by TTL
            assert (health["workers"], health["draining"]) == (1, 0)
            # SIGTERM drains too; with no session left the worker leaves at once
            for session_id in sessions:
                await request(cluster, "DELETE", f"/api/sessions/{session_id}")
            other.child.send(signal.SIGTERM)
            assert await other.child.wait(15) == 0
            assert (await cluster.health())["status"] == "no_workers"
            status, body = await request(cluster, "POST", "/api/offer",
                                         json={"sdp": sdp, "type": "offer"})
            assert status == 503 and body["error"]["code"] == "no_workers"
        finally:
            await peer.close(delete=False)
            for pc in pcs:
                await pc.close()
