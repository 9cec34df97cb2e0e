"""Pipecat's SmallWebRTC signaling and RTVI, against the real server with real aiortc peers that
behave as the JS transport does (`testkit/smallwebrtc.py`): trickle ICE by PATCH, the three
transceivers, renegotiation and restart, and every bad input the issue names, each while
another session runs unharmed."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import numpy as np
import pytest

from rtc_server.app import Server
from rtc_server.config import Config
from rtc_server.rtvi.config import EmbedConfig
from rtc_server.session import Session
from testkit.peer import LoopbackPeer, PcmMicrophone
from testkit.smallwebrtc import SmallWebRTCPeer, camera_track
from testkit.speech import synth
from tests.support.server import (
    SMALL_VIDEO,
    frames_keep_coming,
    loopback_config,
    running_server,
)

pytestmark = pytest.mark.webrtc


def config(**embed: Any) -> Config:
    return dataclasses.replace(loopback_config(SMALL_VIDEO), embed=EmbedConfig(**embed))


@pytest.fixture(scope="module")
def hello() -> np.ndarray:
    return synth("Hello there, this is a test.", engine="piper")


@asynccontextmanager
async def peers(url: str, *made: LoopbackPeer) -> AsyncIterator[None]:
    try:
        for peer in made:
            await peer.connect()
        yield
    finally:
        for peer in made:
            await peer.close()


def session_of(server: Server, pc_id: str) -> Session:
    session = server.registry.get(pc_id)
    assert isinstance(session, Session)
    return session


async def test_trickled_offer_connects_and_speaks_rtvi(hello: np.ndarray) -> None:
    """The JS transport's way: offer without candidates, candidates and the end-of-candidates
    marker by PATCH, `chat` channel with pings; the answer names the connection as `pc_id`."""
    async with running_server(config()) as (server, url):
        mic = PcmMicrophone(np.concatenate([np.zeros(16000, np.int16), hello]), 16000)
        peer = SmallWebRTCPeer(url, microphone=mic)
        async with peers(url, peer):
            assert peer.answer["pc_id"] == peer.answer["session_id"] == peer.pc_id
            assert "a=candidate" not in peer.offers[0] and peer.patches == [200]
            ready = await peer.wait_rtvi("bot-ready", 15)
            assert ready["data"]["version"] == "2.2.0" and ready["id"]
            assert ready["data"]["capabilities"]["video_out"] is True
            # echo mode: the user's speech, then the bot speaks it back (real playout)
            await peer.wait_rtvi("user-started-speaking", 30)
            await peer.wait_rtvi("user-stopped-speaking", 30)
            await peer.wait_rtvi("bot-started-speaking", 30)
            await peer.wait_rtvi("bot-stopped-speaking", 30)
            metrics = await peer.wait_rtvi("metrics", 15)
            assert metrics["data"]["ttfb"][-1]["processor"] == "first_audio_sent"
            assert len(peer.received.video) > 10 and peer.received.audio
            assert not peer.of_type("error") and not peer.of_type("error-response")


async def test_camera_and_screen_share_offered_are_answered_without_receiving_them() -> None:
    """Audio sendrecv, video sendrecv with a camera and a screen share sendonly: our face goes
    on the first video section (answered sendonly), the screen's is inactive; the browser
    sends no video, the session works."""
    async with running_server(config()) as (server, url):
        peer = SmallWebRTCPeer(url, camera=camera_track(), screen=camera_track())
        async with peers(url, peer):
            sections = [s for s in peer.answer["sdp"].split("m=")[1:]]
            kinds = [(s.split(" ", 1)[0], next(d for d in ("sendrecv", "sendonly", "recvonly",
                                                            "inactive") if f"a={d}" in s))
                     for s in sections if not s.startswith("application")]
            assert kinds == [("audio", "sendrecv"), ("video", "sendonly"), ("video", "inactive")]
            await peer.wait_rtvi("bot-ready", 15)
            assert await frames_keep_coming(peer)
            stats = await peer.pc.getStats()
            sent_video = [s for s in stats.values() if s.type == "outbound-rtp"
                          and s.kind == "video"]
            assert all(s.packetsSent == 0 for s in sent_video), sent_video


async def test_renegotiation_and_restart_keep_the_session(hello: np.ndarray) -> None:
    """A new offer for a live `pc_id` is answered on its peer connection; with `restart_pc` a
    new one takes over the same session (tracks, clock, conversation): the echo still comes
    back after the restart."""
    async with running_server(config()) as (server, url):
        peer = SmallWebRTCPeer(url)
        other = LoopbackPeer(url)
        async with peers(url, peer, other):
            await peer.wait_rtvi("bot-ready", 15)
            session = session_of(server, str(peer.pc_id))
            again = await peer.renegotiate()
            assert again["pc_id"] == peer.pc_id and session_of(server, again["pc_id"]) is session
            assert await frames_keep_coming(peer)
            await peer.restart()
            assert session_of(server, str(peer.pc_id)) is session and len(server.registry) == 2
            assert await frames_keep_coming(peer)
            peer.mic.set_audio(hello, 16000)
            # the conversation goes on over the new connection (and its new `chat` channel)
            await peer.wait_rtvi("bot-started-speaking", 30)
            assert await frames_keep_coming(other)


async def test_no_data_channel_and_no_client_ready(hello: np.ndarray) -> None:
    """A peer with no data channel gets its media; one that never sends client-ready gets
    every RTVI event but bot-ready (nothing is gated on it, unlike Pipecat's audio)."""
    async with running_server(config()) as (server, url):
        silent = SmallWebRTCPeer(url, channel=False)
        mic = PcmMicrophone(np.concatenate([np.zeros(16000, np.int16), hello]), 16000)
        unready = SmallWebRTCPeer(url, microphone=mic, ready=False)
        async with peers(url, silent, unready):
            assert await frames_keep_coming(silent)
            await unready.wait_rtvi("bot-stopped-speaking", 30)
            assert not unready.of_type("bot-ready")
            assert len(server.registry) == 2


@pytest.mark.parametrize(("version", "answer"), [("3.0.0", None), ("1.4.0", "1.4.0"),
                                                  ("2.0.1", "2.2.0")])
async def test_client_ready_version_is_checked(version: str, answer: str | None) -> None:
    async with running_server(config()) as (server, url):
        peer = SmallWebRTCPeer(url, version=version)
        async with peers(url, peer):
            if answer is None:
                error = await peer.wait_rtvi("error", 15)
                assert error["data"]["fatal"] is True and "3.0.0" in error["data"]["error"]
                await asyncio.sleep(0.3)
                assert not peer.of_type("bot-ready")
            else:
                ready = await peer.wait_rtvi("bot-ready", 15)
                assert ready["data"]["version"] == answer


def says(fragment: str) -> Callable[[dict[str, Any]], bool]:
    return lambda message: fragment in message["data"]["error"]


async def test_bad_rtvi_input_gets_errors_and_the_session_goes_on() -> None:
    """Unknown type: error-response to its id; malformed JSON, over 64 KiB, binary, no label:
    an error event; send-text in echo mode: error-response. The session and another one go
    on."""
    async with running_server(config()) as (server, url):
        peer = SmallWebRTCPeer(url)
        other = LoopbackPeer(url)
        async with peers(url, peer, other):
            await peer.wait_rtvi("bot-ready", 15)
            unknown = peer.send_rtvi("make-coffee", {"sugar": 2})
            reply = await peer.wait_rtvi("error-response", 15, lambda m: m.get("id") == unknown)
            assert "make-coffee" in reply["data"]["error"]
            peer.send_raw("{not json")
            peer.send_raw(json.dumps({"label": "rtvi-ai", "type": "client-message",
                                      "data": {"t": "x", "d": "y" * 70_000}}))
            peer.send_raw(b"\x00\x01")
            peer.send_raw(json.dumps({"type": "client-ready"}))
            for fragment in ("malformed JSON", "over the 65536-byte limit", "binary", "label"):
                await peer.wait_rtvi("error", 30, says(fragment))
            assert all(m["data"]["fatal"] is False for m in peer.of_type("error"))
            asked = peer.send_rtvi("send-text", {"content": "hello?"})
            reply = await peer.wait_rtvi("error-response", 15, lambda m: m.get("id") == asked)
            assert "agent mode" in reply["data"]["error"]
            assert await frames_keep_coming(peer) and await frames_keep_coming(other)
            assert len(server.registry) == 2


async def test_disconnect_bot_says_peer_left_and_ends_the_session() -> None:
    async with running_server(config()) as (server, url):
        peer = SmallWebRTCPeer(url)
        async with peers(url, peer):
            await peer.wait_rtvi("bot-ready", 15)
            session = session_of(server, str(peer.pc_id))
            peer.send_rtvi("disconnect-bot", {})
            left = await peer.wait_event(lambda m: m.get("type") == "signalling", 15)
            assert left["message"] == {"type": "peerLeft"}
            await asyncio.wait_for(session.closed_event.wait(), 15)
            assert len(server.registry) == 0


async def patch(http: aiohttp.ClientSession, url: str, body: Any,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    async with http.patch(url, json=body, headers=headers) as resp:
        return resp.status, await resp.json()


async def test_patch_and_restart_for_unknown_foreign_or_closed_connections() -> None:
    """PATCH for an unknown pc_id: 404; through /sessions/A with B's pc_id: 404 (foreign);
    restart_pc for a closed connection: 404; malformed candidates: 400. The live session
    never notices."""
    async with running_server(config()) as (server, url), aiohttp.ClientSession() as http:
        live = SmallWebRTCPeer(url)
        gone = SmallWebRTCPeer(url)
        async with peers(url, live, gone):
            candidate = {"candidate": "candidate:1 1 udp 2122260223 127.0.0.1 9 typ host",
                         "sdp_mid": "0", "sdp_mline_index": 0}
            status, body = await patch(http, url + "/api/offer",
                                       {"pc_id": "nobody", "candidates": [candidate]})
            assert (status, body["error"]["code"]) == (404, "session_not_found")
            status, body = await patch(http, f"{url}/sessions/{gone.pc_id}/api/offer",
                                       {"pc_id": live.pc_id, "candidates": [candidate]})
            assert (status, body["error"]["code"]) == (404, "session_not_found")
            bad: dict[str, Any]
            for bad in ({"pc_id": live.pc_id, "candidates": [{"candidate": "hello"}]},
                        {"pc_id": live.pc_id, "candidates": "nope"},
                        {"pc_id": live.pc_id, "candidates": [{"candidate": "candidate:x"}]},
                        {"candidates": []}):
                status, body = await patch(http, url + "/api/offer", bad)
                assert (status, body["error"]["code"]) == (400, "invalid_candidate"), bad
            status, body = await patch(http, url + "/api/offer", {"pc_id": live.pc_id,
                "candidates": [{"candidate": "candidate:1 1 udp", "sdp_mid": "0"}]})
            assert (status, body["error"]["code"]) == (400, "invalid_candidate")
            await gone.close()
            with pytest.raises(RuntimeError, match="404"):
                await gone.restart()
            assert len(server.registry) == 1
            assert await frames_keep_coming(live)


async def test_start_flow_and_its_session_routes(hello: np.ndarray) -> None:
    """POST /start (the prebuilt's first call) mints an id for /sessions/{id}/api/offer; the
    ICE servers it hands out are ours (none here), never a public STUN server."""
    async with running_server(config()) as (server, url), aiohttp.ClientSession() as http:
        async with http.post(url + "/start", json={
            "enableDefaultIceServers": True, "transport": "webrtc", "body": {"a": 1},
        }) as resp:
            started = await resp.json()
        assert resp.status == 200 and started["iceConfig"] == {"iceServers": []}
        sid = started["sessionId"]
        peer = SmallWebRTCPeer(url, offer_path=f"/sessions/{sid}/api/offer")
        async with peers(url, peer):
            assert peer.pc_id == sid and set(peer.patches) == {200}
            await peer.wait_rtvi("bot-ready", 15)
            async with http.post(f"{url}/sessions/unknown/api/offer", json={
                "sdp": peer.pc.localDescription.sdp, "type": "offer", "pc_id": None,
            }) as resp:
                assert resp.status == 404


async def refused(peer: SmallWebRTCPeer) -> str:
    """Why the server refused `peer`'s offer."""
    try:
        await peer.connect()
    except RuntimeError as exc:
        return str(exc)
    finally:
        await peer.close(delete=False)
    raise AssertionError("the offer was accepted")


async def test_auth_limits_and_request_data_apply_to_smallwebrtc() -> None:
    """The same token, body limit and capacity as /api/offer; requestData's portrait_id and
    persona are read (an unknown portrait is 404, another persona 400)."""
    token = "s3cret"
    async with running_server(dataclasses.replace(
        config(), server=dataclasses.replace(loopback_config().server, auth_token=token,
                                             max_sessions=1))
    ) as (server, url), aiohttp.ClientSession() as http:
        for method, path in (("POST", "/start"), ("PATCH", "/api/offer"),
                             ("POST", "/sessions/x/api/offer"), ("PATCH", "/sessions/x/api/offer")):
            async with http.request(method, url + path, json={}) as resp:
                assert resp.status == 401, (method, path)
        assert "portrait_not_found" in await refused(
            SmallWebRTCPeer(url, token=token, request_data={"portrait_id": "nope"}))
        assert "not served here" in await refused(
            SmallWebRTCPeer(url, token=token, request_data={"persona": "pirate"}))
        auth = {"Authorization": f"Bearer {token}"}
        async with http.patch(url + "/api/offer", data=b"x" * 70_000, headers={
            **auth, "Content-Type": "application/json"}) as resp:
            assert resp.status == 413
        peer = SmallWebRTCPeer(url, token=token)
        async with peers(url, peer), http.post(url + "/start", json={}, headers=auth) as resp:
            assert resp.status == 503


async def test_cors_for_a_page_served_elsewhere() -> None:
    """Preflight from an allowed origin: 204 with the methods and headers the SDK uses; from
    another origin: 403; responses, errors included, name the allowed origin."""
    app_origin = "https://bank.example"
    async with running_server(config(cors_origins=(app_origin,))) as (server, url), \
            aiohttp.ClientSession() as http:
        preflight = {"Origin": app_origin, "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "authorization,content-type"}
        async with http.options(url + "/api/offer", headers=preflight) as resp:
            assert resp.status == 204
            assert resp.headers["Access-Control-Allow-Origin"] == app_origin
            assert "PATCH" in resp.headers["Access-Control-Allow-Methods"]
            assert "Authorization" in resp.headers["Access-Control-Allow-Headers"]
        async with http.options(url + "/api/offer", headers={
                **preflight, "Origin": "https://evil.example"}) as resp:
            assert resp.status == 403 and "Access-Control-Allow-Origin" not in resp.headers
        async with http.patch(url + "/api/offer", json={"pc_id": "x", "candidates": []},
                              headers={"Origin": app_origin}) as resp:
            assert resp.status == 404
            assert resp.headers["Access-Control-Allow-Origin"] == app_origin
        async with http.get(url + "/healthz", headers={"Origin": "https://evil.example"}
                            ) as resp:
            assert "Access-Control-Allow-Origin" not in resp.headers
