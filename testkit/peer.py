"""A loopback test peer: a real aiortc client that talks to the server over 127.0.0.1.

It sends a PCM array as its microphone (paced in real time, then silence), records every
received audio frame and a per-frame summary of the video, and collects data channel events.
Only for tests and benchmarks: it assumes ICE host candidates are restricted to loopback.
"""

from __future__ import annotations

import asyncio
import fractions
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import av
import numpy as np
import soxr
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

RATE = 48000
FRAME = 960


class PcmMicrophone(MediaStreamTrack):
    """Plays `pcm` (int16 mono at `rate`) in real time, 20 ms per frame, then silence."""

    kind = "audio"

    def __init__(self, pcm: np.ndarray | None = None, rate: int = 16000) -> None:
        super().__init__()
        self._index = 0
        self._start: float | None = None
        self._pcm = np.zeros(0, np.int16)
        self._offset = 0
        self.started_at: float | None = None  # monotonic time the current audio began playing
        self.playing = asyncio.Event()  # set when the current audio begins playing
        self.set_audio(pcm, rate)

    def set_audio(
        self, pcm: np.ndarray | None, rate: int = 16000, *, at_frame: int | None = None
    ) -> None:
        """Replace what the microphone plays from now (or from frame `at_frame`)."""
        self.started_at = None
        self.playing.clear()
        if pcm is None:
            self._pcm = np.zeros(0, np.int16)
            return
        out = pcm if rate == RATE else soxr.resample(pcm, rate, RATE)
        self._pcm = np.asarray(out, dtype=np.int16)
        self._offset = at_frame if at_frame is not None else self._index

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        target = self._start + self._index * FRAME / RATE
        delay = target - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        pos = (self._index - self._offset) * FRAME
        chunk = np.zeros(FRAME, np.int16)
        if 0 <= pos < len(self._pcm):
            part = self._pcm[pos : pos + FRAME]
            chunk[: len(part)] = part
            if pos == 0:
                self.started_at = time.monotonic()
                self.playing.set()
        frame = av.AudioFrame.from_ndarray(chunk.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = RATE
        frame.pts = self._index * FRAME
        frame.time_base = fractions.Fraction(1, RATE)
        self._index += 1
        return frame


@dataclass
class Received:
    audio_arrival: list[float] = field(default_factory=list)  # monotonic, per frame
    audio: list[np.ndarray] = field(default_factory=list)  # mono int16 at 48 kHz
    video_arrival: list[float] = field(default_factory=list)
    video_pts: list[float] = field(default_factory=list)  # media time (s), from RTP timestamps
    video: list[Any] = field(default_factory=list)  # summary per frame (see `video_summary`)
    video_size: tuple[int, int] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    event_arrival: list[float] = field(default_factory=list)

    def audio_pcm(self) -> np.ndarray:
        return np.concatenate(self.audio) if self.audio else np.zeros(0, np.int16)

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]


def mean_luma(image: np.ndarray) -> float:
    return float(image.mean())


class LoopbackPeer:
    """Client side of one session (see module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        microphone: PcmMicrophone | None = None,
        token: str | None = None,
        video_summary: Callable[[np.ndarray], Any] | None = mean_luma,
        portrait_id: str | None = None,
        send_audio: bool = True,
        configuration: RTCConfiguration | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.mic = microphone or PcmMicrophone()
        self.token = token
        self.portrait_id = portrait_id
        self.send_audio = send_audio  # False: a peer with no microphone at all
        self.video_summary = video_summary
        # No ICE servers unless a test brings its own (TURN): none of aiortc's public default.
        self.pc = RTCPeerConnection(configuration or RTCConfiguration(iceServers=[]))
        self.received = Received()
        self.session_id: str | None = None
        self.answer: dict[str, Any] = {}  # the offer's response body (worker_id via a gateway)
        self.connected = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._event_waiters: list[
            tuple[Callable[[dict[str, Any]], bool], asyncio.Future[dict[str, Any]]]
        ] = []

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def connect(self) -> str:
        pc = self.pc
        channel = pc.createDataChannel("events")
        channel.on("message", self._on_message)
        if self.send_audio:
            pc.addTrack(self.mic)
        else:
            pc.addTransceiver("audio", direction="recvonly")
        pc.addTransceiver("video", direction="recvonly")
        pc.on("track", self._on_track)

        @pc.on("connectionstatechange")
        def _state() -> None:
            if pc.connectionState == "connected":
                self.connected.set()

        await pc.setLocalDescription(await pc.createOffer())
        async with aiohttp.ClientSession() as http, http.post(
            f"{self.base_url}/api/offer",
            json={
                "sdp": pc.localDescription.sdp, "type": "offer",
                **({"portrait_id": self.portrait_id} if self.portrait_id else {}),
            },
            headers=self._headers(),
        ) as resp:
            body = await resp.json()
            if resp.status != 200:
                raise RuntimeError(f"offer failed: {resp.status} {body}")
        self.answer = body
        self.session_id = body["session_id"]
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body["sdp"], type="answer"))
        await asyncio.wait_for(self.connected.wait(), 15)
        return str(self.session_id)

    def _on_message(self, message: str | bytes) -> None:
        event = json.loads(message)
        self.received.events.append(event)
        self.received.event_arrival.append(time.monotonic())
        for predicate, fut in list(self._event_waiters):
            if not fut.done() and predicate(event):
                fut.set_result(event)

    async def wait_event(
        self, predicate: Callable[[dict[str, Any]], bool], within_s: float
    ) -> dict[str, Any]:
        for event in self.received.events:
            if predicate(event):
                return event
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._event_waiters.append((predicate, fut))
        try:
            return await asyncio.wait_for(fut, within_s)
        finally:
            self._event_waiters.remove((predicate, fut))

    def _on_track(self, track: MediaStreamTrack) -> None:
        loop = asyncio.get_running_loop()
        coro = self._record_audio(track) if track.kind == "audio" else self._record_video(track)
        self._tasks.append(loop.create_task(coro))

    async def _record_audio(self, track: MediaStreamTrack) -> None:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
        try:
            while True:
                frame = await track.recv()
                now = time.monotonic()
                assert isinstance(frame, av.AudioFrame)
                for out in resampler.resample(frame):
                    self.received.audio_arrival.append(now)
                    self.received.audio.append(out.to_ndarray().reshape(-1).copy())
        except MediaStreamError:
            pass

    async def _record_video(self, track: MediaStreamTrack) -> None:
        try:
            while True:
                frame = await track.recv()
                now = time.monotonic()
                assert isinstance(frame, av.VideoFrame)
                self.received.video_size = (frame.width, frame.height)
                self.received.video_arrival.append(now)
                if frame.pts is not None and frame.time_base is not None:
                    self.received.video_pts.append(float(frame.pts * frame.time_base))
                if self.video_summary is not None:  # None: arrivals only, no RGB conversion
                    image = frame.to_ndarray(format="rgb24")
                    self.received.video.append(self.video_summary(image))
        except MediaStreamError:
            pass

    async def close(self, *, delete: bool = True) -> None:
        if delete and self.session_id:
            async with aiohttp.ClientSession() as http, http.delete(
                f"{self.base_url}/api/sessions/{self.session_id}", headers=self._headers()
            ):
                pass
        await self.pc.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
