"""A real cluster on loopback (redis-server, two echo workers, the gateway, each its own
process): media through a worker, routing, capacity, and every refused request."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiortc import RTCPeerConnection

from rtc_server.cluster.directory import WorkerRecord
from rtc_server.ice import restrict_host_candidates_to_loopback
from testkit.peer import LoopbackPeer
from tests.support.cluster import LocalCluster, eventually, local_cluster, redis_hash
from tests.test_signaling import offer_sdp

pytestmark = [pytest.mark.webrtc, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalCluster]:
    restrict_host_candidates_to_loopback()  # this process's test peers
    async with local_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


async def post_offer(cluster: LocalCluster, url: str, sdp: str) -> tuple[int, dict]:
    assert cluster.http is not None
    async with cluster.http.post(url + "/api/offer", json={"sdp": sdp, "type": "offer"}) as r:
        return r.status, await r.json()


async def delete(cluster: LocalCluster, session_id: str) -> tuple[int, dict]:
    assert cluster.http is not None
    async with cluster.http.delete(f"{cluster.url}/api/sessions/{session_id}") as resp:
        return resp.status, await resp.json()


async def idle(cluster: LocalCluster) -> None:
    async def check() -> bool:
        return (await cluster.health())["used"] == 0 and sum(await cluster.worker_sessions()) == 0

    await eventually(check, 10, "cluster idle")


async def test_media_flows_through_a_worker_and_delete_reaches_it(cluster: LocalCluster) -> None:
    assert await cluster.health() == {
        "status": "ok", "workers": 2, "draining": 0, "slots": 4, "used": 0, "free": 4,
    }
    peer = LoopbackPeer(cluster.url)
    try:
        await peer.connect()
        await peer.wait_event(lambda e: e["type"] == "session", 10)
        ids = [w.worker_id for w in cluster.workers]
        assert peer.answer["worker_id"] in ids
        owner = ids.index(peer.answer["worker_id"])
        assert await cluster.worker_sessions() == [int(i == owner) for i in range(2)]
        assert (await cluster.health())["used"] == 1

        async def media() -> bool:
            return len(peer.received.video) >= 5 and len(peer.received.audio) >= 20

        await eventually(media, 10, "video and audio from the worker")
        status, body = await delete(cluster, str(peer.session_id))
        assert (status, body) == (200, {"session_id": peer.session_id, "closed": True})
        await idle(cluster)
        status, body = await delete(cluster, str(peer.session_id))
        assert status == 404 and body["error"]["code"] == "session_not_found"
    finally:
        await peer.close(delete=False)


async def test_offers_spread_and_a_full_cluster_answers_503(cluster: LocalCluster) -> None:
    pcs: list[RTCPeerConnection] = []
    sessions = []
    try:
        for _ in range(4):
            pc, sdp = await offer_sdp()
            pcs.append(pc)
            status, body = await post_offer(cluster, cluster.url, sdp)
            assert status == 200, body
            sessions.append(body["session_id"])
        assert await cluster.worker_sessions() == [2, 2]  # most free slots first
        assert (await cluster.health())["status"] == "full"
        pc, sdp = await offer_sdp()
        pcs.append(pc)
        status, body = await post_offer(cluster, cluster.url, sdp)
        assert status == 503 and body["error"]["code"] == "at_capacity", body
        assert cluster.http is not None
        async with cluster.http.get(cluster.url + "/metrics") as resp:
            metrics = await resp.text()
        assert 'rtc_cluster_slots{state="free"} 0.0' in metrics
        assert 'rtc_cluster_workers{state="live"} 2.0' in metrics
        assert 'rtc_gateway_offers_total{result="at_capacity"} 1.0' in metrics
    finally:
        for session_id in sessions:
            assert (await delete(cluster, session_id))[0] == 200
        for pc in pcs:
            await pc.close()
    await idle(cluster)


async def test_bad_offers_book_no_slot(cluster: LocalCluster) -> None:
    assert cluster.http is not None
    async with cluster.http.post(cluster.url + "/api/offer", data=b"{not json",
                                 headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 400 and (await resp.json())["error"]["code"] == "invalid_offer"
    # structurally fine, refused by the worker's peer connection: the worker's error, relayed
    status, body = await post_offer(cluster, cluster.url,
                                    "v=0\r\ngarbage\r\nm=audio\r\nm=video\r\n")
    assert status == 400 and "offer rejected" in body["error"]["message"], body
    await idle(cluster)


async def test_workers_take_offers_only_from_the_gateway(cluster: LocalCluster) -> None:
    worker, other = cluster.workers
    pc, sdp = await offer_sdp()
    offer = json.dumps({"sdp": sdp, "type": "offer"}).encode()
    try:
        status, body = await post_offer(cluster, worker.url, sdp)  # the public route
        assert status == 403 and body["error"]["code"] == "gateway_required"
        assert cluster.http is not None
        async with cluster.http.post(worker.url + "/cluster/offer", data=offer) as resp:
            assert resp.status == 401
            assert (await resp.json())["error"]["code"] == "cluster_unauthorized"
        status, body = await cluster.signed("POST", worker, "/cluster/offer", "offer", "s-1",
                                            offer, worker_id=other.worker_id)
        assert status == 403 and body["error"]["code"] == "wrong_worker", body
        status, body = await cluster.signed("POST", worker, "/cluster/offer", "drain", "s-1",
                                            offer)
        assert status == 401 and "not 'offer'" in body["error"]["message"]
        status, body = await cluster.signed("POST", worker, "/cluster/offer", "offer", "s-1",
                                            offer)
        assert status == 200 and body["session_id"] == "s-1", body
        # the same reservation again (a replayed forwarded offer)
        status, body = await cluster.signed("POST", worker, "/cluster/offer", "offer", "s-1",
                                            offer)
        assert status == 409 and body["error"]["code"] == "reservation_used"
        # a session that is not this worker's
        status, body = await cluster.signed("DELETE", other, "/cluster/sessions/s-1",
                                            "delete", "s-1")
        assert status == 404 and body["error"]["code"] == "session_not_found"
        status, body = await cluster.signed("DELETE", worker, "/cluster/sessions/s-1",
                                            "delete", "other-session")
        assert status == 401
        # the gateway finds it through the directory
        status, body = await delete(cluster, "s-1")
        assert status == 200, body
    finally:
        await pc.close()
    await idle(cluster)


async def test_forged_registration_is_ignored(cluster: LocalCluster) -> None:
    """A record written into Redis without the cluster secret (a big capacity, an address
    of the writer's choosing) is neither counted nor sent offers."""
    import redis.asyncio as aioredis

    forged = WorkerRecord.signed("not-the-secret", "evil", "http://127.0.0.1:9/", 100, False,
                                 0, 1)
    client = aioredis.Redis.from_url(cluster.redis_url, decode_responses=True)
    pcs, sessions = [], []
    try:
        await client.hset("rtc:worker:evil", mapping=redis_hash(forged.fields()))
        await client.sadd("rtc:workers", "evil")
        health = await cluster.health()
        assert (health["workers"], health["slots"]) == (2, 4)
        for _ in range(2):
            pc, sdp = await offer_sdp()
            pcs.append(pc)
            status, body = await post_offer(cluster, cluster.url, sdp)
            assert status == 200 and body["worker_id"] != "evil"
            sessions.append(body["session_id"])
        assert cluster.http is not None
        async with cluster.http.get(cluster.url + "/metrics") as resp:
            assert "rtc_cluster_records_refused 1.0" in await resp.text()
    finally:
        await client.delete("rtc:worker:evil")
        await client.aclose()
        for session_id in sessions:
            await delete(cluster, session_id)
        for pc in pcs:
            await pc.close()
    await idle(cluster)
