"""An aiortc client that speaks like Pipecat's JS SmallWebRTC transport, for tests and benchmarks.

What it copies of `@pipecat-ai/small-webrtc-transport` 1.10.8: the transceivers in its order
(audio sendrecv, video sendrecv for the camera, video sendonly for a screen share), a data
channel labelled `chat` that sends `ping: <ms>` every second beside JSON, the offer body
`{sdp, type, pc_id, restart_pc, requestData}` sent before its candidates (they are cut from
the SDP and PATCHed after the answer, then the end-of-candidates marker ""), and RTVI on the
channel (`client-ready` when it opens, unless told not to).

aiortc gathers inside `setLocalDescription`, so the trickle is simulated: the candidates it
found are taken out of the offer and sent by PATCH, which is what the server sees from a
browser that offers before gathering ends.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from aiortc import RTCConfiguration, RTCDataChannel, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamTrack, VideoStreamTrack

from testkit.peer import LoopbackPeer, PcmMicrophone

PROTOCOL_VERSION = "2.1.0"  # what @pipecat-ai/client-js 1.13.1 announces
Message = dict[str, Any]


def split_candidates(sdp: str) -> tuple[str, list[dict[str, Any]]]:
    """The SDP without its `a=candidate` and `a=end-of-candidates` lines, and the candidates
    as a PATCH would carry them (each with its section's mid and index)."""
    kept, found, mid, index = [], [], None, -1
    for line in sdp.splitlines():
        if line.startswith("m="):
            index += 1
            mid = None
        elif line.startswith("a=mid:"):
            mid = line[6:]
        if line.startswith("a=candidate:"):
            found.append({"candidate": line[2:], "sdp_mid": mid, "sdp_mline_index": index})
            continue
        if line.startswith("a=end-of-candidates"):
            continue
        kept.append(line)
    return "\r\n".join(kept) + "\r\n", found


class SmallWebRTCPeer(LoopbackPeer):
    """A SmallWebRTC/RTVI client (see the module docstring). `camera`/`screen`: video
    tracks it sends (None: the transceiver without a track); `channel` False: no data
    channel at all; `ready` False: never sends `client-ready`."""

    def __init__(
        self,
        base_url: str,
        *,
        offer_path: str = "/api/offer",
        camera: MediaStreamTrack | None = None,
        screen: MediaStreamTrack | bool | None = None,
        channel: bool = True,
        ready: bool = True,
        version: str = PROTOCOL_VERSION,
        request_data: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(base_url, **kwargs)
        self.offer_url = self.base_url + offer_path
        self.camera, self.screen = camera, screen
        self.want_channel, self.ready, self.version = channel, ready, version
        self.request_data = request_data
        self.pc_id: str | None = None
        self.rtvi: list[Message] = []  # every JSON message received on the channel
        self.channel: RTCDataChannel | None = None
        self.patches: list[int] = []  # status of each PATCH sent
        self.offers: list[str] = []  # each offer's SDP as sent (without its candidates)
        self._pinger: asyncio.Task[None] | None = None

    # --- signaling ----------------------------------------------------------------------

    async def _post(self, restart: bool) -> Message:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        sdp, candidates = split_candidates(self.pc.localDescription.sdp)
        self.offers.append(sdp)
        body: Message = {"sdp": sdp, "type": "offer", "pc_id": self.pc_id,
                         "restart_pc": restart}
        if self.request_data is not None:
            body["requestData"] = self.request_data
        async with aiohttp.ClientSession() as http, http.post(
            self.offer_url, json=body, headers=self._headers()
        ) as resp:
            answer = await resp.json()
            if resp.status != 200:
                raise RuntimeError(f"offer failed: {resp.status} {answer}")
        self.answer = answer
        self.pc_id = self.session_id = answer["pc_id"]
        await self.pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], "answer"))
        await self.patch([*candidates, {"candidate": "", "sdp_mid": "0",
                                        "sdp_mline_index": 0}])
        return answer

    async def patch(self, candidates: list[dict[str, Any]], pc_id: str | None = None) -> int:
        """PATCH `candidates` for `pc_id` (default: ours); the HTTP status."""
        body = {"pc_id": pc_id or self.pc_id, "candidates": candidates}
        async with aiohttp.ClientSession() as http, http.patch(
            self.offer_url, json=body, headers=self._headers()
        ) as resp:
            self.patches.append(resp.status)
            return resp.status

    def _setup(self) -> None:
        pc = self.pc
        if self.send_audio:
            pc.addTransceiver(self.mic, direction="sendrecv")
        else:
            pc.addTransceiver("audio", direction="sendrecv")
        pc.addTransceiver(self.camera or "video", direction="sendrecv")
        if self.screen:
            screen = self.screen if isinstance(self.screen, MediaStreamTrack) else "video"
            pc.addTransceiver(screen, direction="sendonly")
        pc.on("track", self._on_track)

        @pc.on("connectionstatechange")
        def _state() -> None:
            if pc.connectionState == "connected":
                self.connected.set()

        if self.want_channel:
            self.channel = pc.createDataChannel("chat", ordered=True)
            self.channel.on("message", self._on_message)
            self.channel.on("open", self._opened)

    async def connect(self) -> str:
        self._setup()
        await self._post(restart=False)
        await asyncio.wait_for(self.connected.wait(), 15)
        return str(self.pc_id)

    async def renegotiate(self) -> Message:
        """A new offer on the same peer connection (what the transport does when asked)."""
        return await self._post(restart=False)

    async def restart(self) -> Message:
        """A new peer connection for the same `pc_id` (`restart_pc`, after ICE failed), with
        a new silent microphone (closing the old connection stops its track)."""
        old = self.pc
        self.mic = PcmMicrophone()
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.connected = asyncio.Event()
        self._setup()
        answer = await self._post(restart=True)
        await old.close()
        await asyncio.wait_for(self.connected.wait(), 15)
        return answer

    # --- the channel --------------------------------------------------------------------

    def _opened(self) -> None:
        if self.ready:
            self.send_rtvi("client-ready", {"version": self.version,
                                            "about": {"library": "testkit"}})
        loop = asyncio.get_running_loop()
        self._pinger = loop.create_task(self._ping())

    async def _ping(self) -> None:
        while self.channel is not None and self.channel.readyState == "open":
            self.channel.send(f"ping: {int(time.time() * 1000)}")
            await asyncio.sleep(1.0)

    def send_raw(self, data: str | bytes) -> None:
        assert self.channel is not None and self.channel.readyState == "open"
        self.channel.send(data)

    def send_rtvi(self, kind: str, data: Any = None, msg_id: str | None = None) -> str:
        """Send an RTVI message; returns its id."""
        msg_id = msg_id or f"m{len(self.rtvi)}-{time.monotonic_ns() % 10**6}"
        message: Message = {"label": "rtvi-ai", "type": kind, "id": msg_id}
        if data is not None:
            message["data"] = data
        self.send_raw(json.dumps(message))
        return msg_id

    def _on_message(self, message: str | bytes) -> None:
        event = json.loads(message)
        self.rtvi.append(event)
        self.received.events.append(event)
        self.received.event_arrival.append(time.monotonic())
        for predicate, fut in list(self._event_waiters):
            if not fut.done() and predicate(event):
                fut.set_result(event)

    def of_type(self, kind: str) -> list[Message]:
        return [m for m in self.rtvi if m.get("type") == kind]

    async def wait_rtvi(self, kind: str, within_s: float,
                        where: Callable[[Message], bool] = lambda m: True) -> Message:
        return await self.wait_event(lambda m: m.get("type") == kind and where(m), within_s)

    async def close(self, *, delete: bool = True) -> None:
        if self._pinger is not None:
            self._pinger.cancel()
        await super().close(delete=delete)


def camera_track() -> MediaStreamTrack:
    """A camera: aiortc's test pattern (640x480 at 30 fps)."""
    return VideoStreamTrack()
