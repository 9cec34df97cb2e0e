"""HTTP signaling: every bad request gets a clear JSON error and harms no other session."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiortc import RTCConfiguration, RTCPeerConnection

from rtc_server.session import Session
from testkit.peer import LoopbackPeer
from tests.support.server import frames_keep_coming, loopback_config, running_server

pytestmark = pytest.mark.webrtc


async def offer_sdp() -> tuple[RTCPeerConnection, str]:
    """A real offer from an aiortc peer (audio send/recv + video recv)."""
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pc.addTransceiver("audio")
    pc.addTransceiver("video", direction="recvonly")
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def post(http: aiohttp.ClientSession, url: str, **kwargs: Any) -> tuple[int, dict]:
    async with http.post(url + "/api/offer", **kwargs) as resp:
        return resp.status, await resp.json()


@pytest.mark.parametrize(
    "body, fragment",
    [
        (b"", "empty body"),
        (b"{not json", "not valid JSON"),
        (b"[]", "JSON object"),
        (json.dumps({"sdp": "v=0", "type": "answer"}).encode(), '"type" must be "offer"'),
        (json.dumps({"sdp": "", "type": "offer"}).encode(), "non-empty"),
        (json.dumps({"sdp": "hello", "type": "offer"}).encode(), "v=0"),
        (json.dumps({"sdp": "v=0\r\nm=audio 9 UDP 0\r\n", "type": "offer"}).encode(), "video"),
        (
            json.dumps(
                {"sdp": "v=0\r\ngarbage\r\nm=audio\r\nm=video\r\n", "type": "offer"}
            ).encode(),
            "offer rejected",
        ),
    ],
)
async def test_malformed_offer_is_400(
    http: aiohttp.ClientSession, body: bytes, fragment: str
) -> None:
    async with running_server() as (server, url):
        status, data = await post(
            http, url, data=body, headers={"Content-Type": "application/json"}
        )
        assert status == 400
        assert data["error"]["code"] == "invalid_offer"
        assert fragment in data["error"]["message"]
        assert len(server.registry) == 0 and server.registry.pending == 0


async def test_unsupported_codec_is_400(http: aiohttp.ClientSession) -> None:
    pc, sdp = await offer_sdp()
    lines, out, section = sdp.split("\r\n"), [], ""
    for line in lines:  # keep only an unknown codec in the audio section
        if line.startswith("m="):
            section = line[2:].split(" ")[0]
            if section == "audio":
                out += ["m=audio 9 UDP/TLS/RTP/SAVPF 120", "a=rtpmap:120 FOO/8000"]
                continue
        if section == "audio" and line.startswith(("a=rtpmap", "a=fmtp", "a=rtcp-fb")):
            continue
        out.append(line)
    async with running_server() as (server, url):
        status, data = await post(http, url, json={"sdp": "\r\n".join(out), "type": "offer"})
        assert status == 400 and "offer rejected" in data["error"]["message"]
        assert len(server.registry) == 0
    await pc.close()


async def test_wrong_content_type_is_415(http: aiohttp.ClientSession) -> None:
    async with running_server() as (_, url):
        status, data = await post(
            http, url, data=b"sdp=1", headers={"Content-Type": "text/plain"}
        )
        assert status == 415 and data["error"]["code"] == "unsupported_media_type"


async def test_body_over_64k_is_413(http: aiohttp.ClientSession) -> None:
    async with running_server() as (_, url):
        big = json.dumps({"sdp": "v=0" + "x" * (70 * 1024), "type": "offer"})
        status, data = await post(
            http, url, data=big, headers={"Content-Type": "application/json"}
        )
        assert status == 413 and data["error"]["code"] == "payload_too_large"

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked upload
            for _ in range(80):
                yield b"x" * 1024

        status, data = await post(
            http, url, data=chunks(), headers={"Content-Type": "application/json"}
        )
        assert status == 413


async def test_bad_token_is_401_and_good_token_works(http: aiohttp.ClientSession) -> None:
    config = loopback_config(auth_token="s3cret")
    async with running_server(config) as (server, url):
        async with http.get(url + "/api/config") as resp:
            assert resp.status == 401
            assert (await resp.json())["error"]["code"] == "unauthorized"
        async with http.get(url + "/api/config", headers={"Authorization": "Bearer nope"}) as resp:
            assert resp.status == 401
        good = {"Authorization": "Bearer s3cret"}
        async with http.get(url + "/api/config", headers=good) as resp:
            assert resp.status == 200
        async with http.get(url + "/healthz") as resp:  # health stays open for load balancers
            assert resp.status == 200
        peer = LoopbackPeer(url, token="wrong")
        with pytest.raises(RuntimeError, match="401"):
            await peer.connect()
        await peer.pc.close()
        peer = LoopbackPeer(url, token="s3cret")
        await peer.connect()
        assert len(server.registry) == 1
        await peer.close()


async def test_over_capacity_is_503_and_existing_session_keeps_serving(
    http: aiohttp.ClientSession,
) -> None:
    async with running_server(loopback_config(max_sessions=1)) as (server, url):
        first = LoopbackPeer(url)
        await first.connect()
        pc, sdp = await offer_sdp()
        status, data = await post(http, url, json={"sdp": sdp, "type": "offer"})
        assert status == 503 and data["error"]["code"] == "at_capacity"
        await pc.close()
        assert await frames_keep_coming(first)  # still streaming
        await first.close()
        await asyncio.sleep(0.1)
        second = LoopbackPeer(url)  # the slot is free again
        await second.connect()
        await second.close()


async def test_peer_vanishing_mid_negotiation_is_closed_and_forgotten(
    http: aiohttp.ClientSession,
) -> None:
    """A client that posts an offer and never completes ICE must not hold a slot forever."""
    config = loopback_config(connect_timeout_s=1.0, max_sessions=2)
    async with running_server(config) as (server, url):
        other = LoopbackPeer(url)
        await other.connect()
        pc, sdp = await offer_sdp()
        status, data = await post(http, url, json={"sdp": sdp, "type": "offer"})
        assert status == 200
        await pc.close()  # vanish: the answer is never applied
        assert len(server.registry) == 2
        ghost = server.registry.get(data["session_id"])
        assert isinstance(ghost, Session)
        await asyncio.wait_for(ghost.closed_event.wait(), 5)
        assert len(server.registry) == 1
        body = server.metrics.render()[0].decode()
        assert 'rtc_session_errors_total{reason="connect_timeout"} 1.0' in body
        assert await frames_keep_coming(other)  # the other session kept serving
        await other.close()


async def test_delete_ends_session_and_unknown_id_is_404(http: aiohttp.ClientSession) -> None:
    async with running_server() as (server, url):
        peer = LoopbackPeer(url)
        sid = await peer.connect()
        async with http.delete(f"{url}/api/sessions/{sid}") as resp:
            assert resp.status == 200
        assert len(server.registry) == 0
        async with http.delete(f"{url}/api/sessions/{sid}") as resp:
            assert resp.status == 404
            assert (await resp.json())["error"]["code"] == "session_not_found"
        await peer.close(delete=False)


async def test_healthz_metrics_and_page_config(http: aiohttp.ClientSession) -> None:
    config = loopback_config()
    async with running_server(config) as (server, url):
        peer = LoopbackPeer(url)
        await peer.connect()
        await asyncio.sleep(0.3)
        async with http.get(url + "/healthz") as resp:
            assert (await resp.json()) == {"status": "ok", "sessions": 1, "max_sessions": 4}
        async with http.get(url + "/metrics") as resp:
            assert resp.headers["Content-Type"].startswith("text/plain")
            text = await resp.text()
        assert "rtc_sessions_active 1.0" in text
        sent = [ln for ln in text.splitlines() if ln.startswith("rtc_video_frames_sent_total")]
        assert float(sent[0].split()[-1]) > 0
        assert "rtc_audio_packets_sent_total" in text
        async with http.get(url + "/api/config") as resp:
            page = await resp.json()
        assert page["ice_servers"] == []
        assert page["video"] == {"width": 512, "height": 512, "fps": 25}
        async with http.get(url + "/") as resp:
            assert resp.status == 200 and "<video" in await resp.text()
        async with http.get(url + "/static/app.js") as resp:
            assert resp.status == 200
        await peer.close()
        async with http.get(url + "/metrics") as resp:
            assert "rtc_sessions_active 0.0" in await resp.text()
