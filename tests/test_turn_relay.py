"""TURN through a real coturn on loopback: time-limited credentials from `/api/config`, and a
client forced to relay-only candidates still gets the server's audio and video (and the
server its audio) through the relay."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from aioice import stun
from aioice.turn import create_turn_endpoint
from aiortc import RTCConfiguration, RTCIceServer, RTCIceTransportPolicy

from rtc_server.cluster.local import Child, start_coturn
from signaling.turn_credentials import RelayConfig, turn_credentials
from testkit.peer import LoopbackPeer, PcmMicrophone
from testkit.speech import synth
from tests.support.cluster import eventually, need
from tests.support.server import SMALL_VIDEO, loopback_config, running_server

pytestmark = pytest.mark.webrtc
SECRET = "turn-test-secret"


@pytest.fixture
async def coturn(tmp_path: Path) -> AsyncIterator[tuple[Child, str]]:
    need("turnserver")
    child, url = await start_coturn(tmp_path, SECRET)
    try:
        yield child, url
    finally:
        await child.stop()


def address(url: str) -> tuple[str, int]:
    host, port = url.split(":", 1)[1].split("?")[0].rsplit(":", 1)
    return host, int(port)


async def allocate(url: str, username: str, credential: str) -> tuple[str, int]:
    transport, _ = await create_turn_endpoint(
        asyncio.DatagramProtocol, address(url), username, credential
    )
    try:
        relayed: tuple[str, int] = transport.get_extra_info("sockname")
        return relayed
    finally:
        transport.close()


async def test_coturn_takes_fresh_credentials_only(coturn: tuple[Child, str]) -> None:
    _, url = coturn
    username, credential = turn_credentials(SECRET, "alice", 600)
    relayed = await allocate(url, username, credential)
    assert relayed[0] == "127.0.0.1" and 49160 <= relayed[1] <= 49260
    wrong = turn_credentials("another-secret", "alice", 600)
    with pytest.raises(stun.TransactionFailed, match="401"):
        await allocate(url, *wrong)
    expired = turn_credentials(SECRET, "alice", 600, now=time.time() - 1200)
    with pytest.raises(stun.TransactionFailed, match="401"):
        await allocate(url, *expired)


async def test_relay_only_client_gets_audio_and_video_through_coturn(
    coturn: tuple[Child, str],
) -> None:
    child, url = coturn
    config = dataclasses.replace(
        loopback_config(SMALL_VIDEO), relay=RelayConfig(urls=(url,), secret=SECRET)
    )
    speech = synth("Hello there, this goes through the relay.", engine="piper")
    async with running_server(config) as (_, base), aiohttp.ClientSession() as http:
        async with http.get(base + "/api/config") as resp:
            page = await resp.json()
        assert SECRET not in str(page)
        (server,) = page["ice_servers"]
        expiry, _, user = server["username"].partition(":")
        assert server["urls"] == [url] and int(expiry) > time.time() + 3000 and user
        relay_only = RTCConfiguration(
            iceServers=[RTCIceServer(server["urls"], server["username"], server["credential"])],
            iceTransportPolicy=RTCIceTransportPolicy.RELAY,
        )
        mic = PcmMicrophone(np.concatenate([np.zeros(8000, np.int16), speech]), 16000)
        peer = LoopbackPeer(base, microphone=mic, configuration=relay_only)
        try:
            await peer.connect()
            offered = [line for line in peer.pc.localDescription.sdp.splitlines()
                       if line.startswith("a=candidate")]
            assert offered and all(" typ relay" in line for line in offered), offered
            # the server heard the speech through the relay and echoed it back through it
            await peer.wait_event(lambda e: e["type"] == "timings", 20)
            await peer.wait_event(
                lambda e: e["type"] == "state" and e["state"] == "listening" and e["t"] > 1, 20
            )
            loud = [f for f in peer.received.audio if np.abs(f).max() > 3000]
            assert len(loud) > 20, "echoed speech did not come back"
            assert len(peer.received.video) > 10
        finally:
            await peer.close()
    # coturn's own account of the allocation: packets relayed to and from the server (peer)
    pattern = re.compile(
        rf"peer usage: realm=<[^>]*>, username=<{re.escape(server['username'])}>, "
        r"rp=(\d+), rb=\d+, sp=(\d+)"
    )

    def relayed() -> list[tuple[int, int]]:  # (packets from the peer, packets to it)
        text = child.log_path.read_text(errors="replace")
        return [(int(rp), int(sp)) for rp, sp in pattern.findall(text)]

    async def accounted() -> bool:
        return any(rp > 100 and sp > 100 for rp, sp in relayed())

    # the media allocation is accounted when the peer closes it; aiortc's unused (unbundled)
    # ones show zero
    await eventually(accounted, 10, f"coturn relayed media both ways: {relayed()}")
