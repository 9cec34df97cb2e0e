"""Portrait upload from the page: checked and fitted once; bad images get clear errors."""

from __future__ import annotations

import io

import aiohttp
import numpy as np
import pytest
from PIL import Image

from media.idle import default_portrait
from rtc_server.engine_set import Engines
from testkit.agent import agent_config
from testkit.peer import LoopbackPeer
from tests.support.server import running_server

pytestmark = [pytest.mark.webrtc, pytest.mark.slow]


def png(image: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(image).save(out, format="PNG")
    return out.getvalue()


async def upload(url: str, data: bytes, content_type: str = "image/png") -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http, http.post(
        url + "/api/portrait", data=data, headers={"Content-Type": content_type}
    ) as resp:
        return resp.status, await resp.json()


async def test_bad_portraits_get_clear_errors(agent_engines: Engines) -> None:
    rng = np.random.default_rng(0)
    two = np.concatenate([default_portrait()[:, 100:400]] * 2, axis=1)
    async with running_server(agent_config(), agent_engines) as (_, url):
        status, body = await upload(url, png(rng.integers(0, 255, (300, 300, 3), np.uint8)))
        assert status == 422 and "no face" in body["error"]["message"]
        status, body = await upload(url, png(two))
        assert status == 422 and "2 faces" in body["error"]["message"]
        status, body = await upload(url, b"definitely not an image")
        assert status == 422 and "not a JPEG, PNG or WebP" in body["error"]["message"]
        status, body = await upload(url, png(default_portrait()[:64, :64]))
        assert status == 422 and "at least" in body["error"]["message"]
        status, body = await upload(url, b"x" * 100, "text/plain")
        assert status == 415
        status, body = await upload(url, b"\x89PNG" + b"\0" * (11 * 1024 * 1024))
        assert status == 413


async def test_uploaded_portrait_is_what_the_session_shows(agent_engines: Engines) -> None:
    mirrored = np.ascontiguousarray(default_portrait()[:, ::-1])
    async with running_server(agent_config(), agent_engines) as (server, url):
        status, body = await upload(url, png(mirrored))
        assert status == 200
        portrait_id = body["portrait_id"]
        status, again = await upload(url, png(mirrored))
        assert again["portrait_id"] == portrait_id  # cached by content

        def left_minus_right(image: np.ndarray) -> float:
            return float(image[:, :256].mean() - image[:, 256:].mean())

        expected = left_minus_right(server.portraits.get(portrait_id).image)
        default = left_minus_right(server.renderer.image)
        assert np.sign(expected) != np.sign(default)
        peer = LoopbackPeer(url, video_summary=left_minus_right)
        peer_offer = peer.pc  # the offer carries the portrait id
        async with aiohttp.ClientSession() as http:
            peer_offer.addTransceiver("audio")
            peer_offer.addTransceiver("video", direction="recvonly")
            await peer_offer.setLocalDescription(await peer_offer.createOffer())
            async with http.post(url + "/api/offer", json={
                "sdp": peer_offer.localDescription.sdp, "type": "offer", "portrait_id": "nope",
            }) as resp:
                assert resp.status == 404
                assert (await resp.json())["error"]["code"] == "portrait_not_found"
        await peer_offer.close()
        peer = LoopbackPeer(url, video_summary=left_minus_right, portrait_id=portrait_id)
        await peer.connect()
        await peer.wait_event(lambda e: e["type"] == "state", 10)
        import asyncio

        await asyncio.sleep(1.0)
        seen = float(np.median(peer.received.video[-10:]))
        assert np.sign(seen) == np.sign(expected) and abs(seen - expected) < abs(seen - default)
        await peer.close()


async def test_echo_mode_refuses_uploads() -> None:
    async with running_server() as (_, url):
        status, body = await upload(url, png(default_portrait()))
        assert status == 422 and "agent mode" in body["error"]["message"]
