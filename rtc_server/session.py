"""One Session per peer: its RTCPeerConnection, media clock, outbound tracks, inbound audio
path, `events` data channel and the behaviour (echo or agent) that reacts to what it hears.

Lifecycle: `accept(offer)` -> answer SDP; the session closes itself on ICE failure, peer
close, connect timeout or `close()` (DELETE), and then removes itself from the registry via
`on_closed`. `close()` is idempotent and leaves no task behind.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Protocol

import numpy as np
from aiortc import RTCDataChannel, RTCPeerConnection, RTCSessionDescription
from aiortc.exceptions import InternalError, InvalidAccessError, InvalidStateError, OperationError
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from common.logs import ContextLogger
from media.audio import InboundAudio
from media.clock import MediaClock, Timer
from media.idle import FrameSource
from media.playout import Playout
from media.tracks import ClockedAudioTrack, ClockedVideoTrack
from rtc_server.config import Config
from rtc_server.errors import OfferRejected
from rtc_server.events import ErrorEvent, Event, SessionStarted, State, StateChanged, encode
from rtc_server.ice import rtc_configuration
from rtc_server.inbound_hold import shorten_audio_hold
from rtc_server.metrics import Metrics
from rtc_server.tasks import TaskSet
from signaling.offer import Offer

logger = logging.getLogger(__name__)
AIORTC_ERRORS = (InternalError, InvalidAccessError, InvalidStateError, OperationError)
EVENTS_LABEL = "events"
MAX_PENDING_EVENTS = 64  # held until the data channel opens; older ones are dropped


class Behaviour(Protocol):
    """What a session does with what it hears (echo mode, the agent)."""

    def on_connected(self) -> None: ...

    def on_audio(self, frame: np.ndarray) -> None:
        """One 20 ms frame of 16 kHz mono int16 from the user. Must not block."""
        ...

    async def aclose(self) -> None: ...


class Session:
    def __init__(
        self,
        session_id: str,
        *,
        config: Config,
        frames: FrameSource,
        metrics: Metrics,
        render_executor: Executor | None = None,
        behaviour_factory: Callable[[Session], Behaviour],
        on_closed: Callable[[str], None],
        timer: Timer | None = None,
    ) -> None:
        self._id = session_id
        self.config = config
        self.metrics = metrics
        self._on_closed = on_closed
        self.log = ContextLogger(logger, {"session_id": session_id})
        self.clock = MediaClock(timer)  # a FakeTimer in the conversation's unit tests
        media = config.media
        self.playout = Playout(self.clock, fps=media.fps, width=media.width, height=media.height)
        self.tasks = TaskSet(f"session:{session_id}")
        self._pc = RTCPeerConnection(rtc_configuration(config.ice, config.relay))
        self._audio_out = ClockedAudioTrack(self.playout, on_frame=metrics.audio_packets_sent.inc)
        self._video_out = ClockedVideoTrack(
            self.playout, frames, on_frame=metrics.video_frames_sent.inc,
            executor=render_executor,
        )
        self._channel: RTCDataChannel | None = None
        self._pending: deque[str] = deque(maxlen=MAX_PENDING_EVENTS)
        self._connected = asyncio.Event()
        self._closing = False
        self._counted = False
        self.closed_event = asyncio.Event()
        self.behaviour = behaviour_factory(self)
        self._pc.on("connectionstatechange", self._on_connection_state)
        self._pc.on("track", self._on_track)
        self._pc.on("datachannel", self._on_datachannel)

    @property
    def id(self) -> str:
        return self._id

    @property
    def closed(self) -> bool:
        return self._closing

    async def accept(self, offer: Offer) -> str:
        """Apply the remote offer and return our answer SDP (ICE candidates included)."""
        try:
            await self._pc.setRemoteDescription(RTCSessionDescription(sdp=offer.sdp, type="offer"))
            shorten_audio_hold(self._pc)  # before any packet: the server does not play it
            self._pc.addTrack(self._audio_out)
            self._pc.addTrack(self._video_out)
            answer = await self._pc.createAnswer()
            await self._pc.setLocalDescription(answer)
        except (ValueError, LookupError, TypeError, AssertionError, *AIORTC_ERRORS) as exc:
            # aiortc reports malformed SDP with the builtin errors and unusable codecs or
            # directions with its own (OperationError, InvalidAccessError).
            await self.close(reason="invalid_offer")
            detail = str(exc) or type(exc).__name__
            raise OfferRejected(f"offer rejected: {detail}") from exc
        except BaseException:
            await self.close(reason="setup_failed")
            raise
        self.tasks.spawn("connect-watchdog", self._connect_watchdog())
        self.metrics.sessions_total.inc()
        self.metrics.sessions_active.inc()
        self._counted = True
        self.log.info("session accepted")
        return str(self._pc.localDescription.sdp)

    # --- events -------------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        """Send an event on the data channel (queued until it opens)."""
        message = encode(event, session_id=self._id, t=self.clock.time())
        channel = self._channel
        if channel is not None and channel.readyState == "open":
            channel.send(message)
        else:
            self._pending.append(message)

    def report_error(self, code: str, exc: BaseException) -> None:
        """A contained failure of this session: log it, count it, tell the page."""
        self.log.error("%s: %s", code, exc, exc_info=exc)
        self.metrics.session_errors.labels(reason=code).inc()
        self.emit(ErrorEvent(code=code, message=str(exc) or type(exc).__name__))

    # --- peer connection callbacks ------------------------------------------------------

    def _on_connection_state(self) -> None:
        state = self._pc.connectionState
        self.log.debug("connection state %s", state)
        if state == "connected" and not self._connected.is_set():
            self._connected.set()
            self.clock.start()
            media = self.config.media
            self.emit(
                SessionStarted(
                    mode=self.config.server.mode, width=media.width, height=media.height,
                    fps=media.fps,
                )
            )
            self.behaviour.on_connected()
        elif state in ("failed", "closed") and not self._closing:
            reason = "ice_failed" if state == "failed" else "peer_closed"
            if state == "failed":
                self.metrics.session_errors.labels(reason=reason).inc()
            self.tasks.spawn("close", self.close(reason=reason))

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio":
            self.tasks.spawn("inbound-audio", self._consume_audio(track))
        else:
            self.tasks.spawn(f"drain-{track.kind}", self._drain(track))

    def _on_datachannel(self, channel: RTCDataChannel) -> None:
        if channel.label != EVENTS_LABEL:
            return
        self._channel = channel

        def flush() -> None:
            while self._pending and channel.readyState == "open":
                channel.send(self._pending.popleft())

        channel.on("open", flush)
        flush()

    # --- loops --------------------------------------------------------------------------

    async def _consume_audio(self, track: MediaStreamTrack) -> None:
        converter = InboundAudio()
        try:
            while True:
                frame = await track.recv()
                for pcm in converter.convert(frame):  # type: ignore[arg-type]
                    self.behaviour.on_audio(pcm)
        except MediaStreamError:
            self.log.debug("inbound audio ended")
        except Exception as exc:  # task boundary: contain it to this session
            self.report_error("listener_failed", exc)
            await self._drain(track)

    async def _drain(self, track: MediaStreamTrack) -> None:
        """Consume and drop media we do not use, so aiortc's receive queue cannot grow."""
        try:
            while True:
                await track.recv()
        except MediaStreamError:
            pass

    async def _connect_watchdog(self) -> None:
        timeout = self.config.server.connect_timeout_s
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except TimeoutError:
            self.log.warning("peer did not connect within %.0f s", timeout)
            self.metrics.session_errors.labels(reason="connect_timeout").inc()
            await self.close(reason="connect_timeout")

    # --- shutdown -----------------------------------------------------------------------

    async def close(self, reason: str = "closed") -> None:
        """Stop everything this session owns. Idempotent; safe from its own tasks."""
        if self._closing:
            await self.closed_event.wait()
            return
        self._closing = True
        try:
            try:
                await self.behaviour.aclose()
            finally:
                await self.tasks.cancel_all(keep=asyncio.current_task())
                self._audio_out.stop()
                self._video_out.stop()
                await self._pc.close()
        finally:
            self._on_closed(self._id)
            if self._counted:
                self.metrics.sessions_active.dec()
            self.closed_event.set()
            self.log.info("session closed", extra={"reason": reason})

    def set_state(self, state: State) -> None:
        self.emit(StateChanged(state=state))
