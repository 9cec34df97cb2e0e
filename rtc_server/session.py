"""One Session per peer: its RTCPeerConnection, media clock, outbound tracks, inbound audio
path, `events` data channel and the behaviour (echo or agent) that reacts to what it hears.

Lifecycle: `accept(offer)` -> answer SDP; the session closes itself on ICE failure, peer
close, connect timeout or `close()` (DELETE), and then removes itself from the registry via
`on_closed`. `close()` is idempotent and leaves no task behind.

A SmallWebRTC client may trickle its ICE candidates (`add_ice_candidates`) and renegotiate
(`renegotiate`): on the same peer connection, or with `restart` on a new one that takes over
the tracks, the clock and the conversation; the old one is closed without ending the session,
and the new one must connect within `connect_timeout_s` too. Data channels other than
`events` go to the session's app channel (RTVI), which sees every event the session emits.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Protocol

import numpy as np
from aiortc import RTCDataChannel, RTCPeerConnection
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from common.logs import ContextLogger
from engines.tools.calls import ToolCall
from media.audio import InboundAudio
from media.clock import MediaClock, Timer
from media.idle import FrameSource
from media.playout import Playout
from media.tracks import ClockedAudioTrack, ClockedVideoTrack
from rtc_server.config import Config
from rtc_server.errors import OfferRejected
from rtc_server.events import ErrorEvent, Event, SessionStarted, State, StateChanged, encode
from rtc_server.ice import rtc_configuration
from rtc_server.metrics import Metrics
from rtc_server.negotiation import add_candidates, answer
from rtc_server.tasks import TaskSet
from signaling.offer import Offer
from signaling.smallwebrtc import IceCandidate

logger = logging.getLogger(__name__)
EVENTS_LABEL = "events"
MAX_PENDING_EVENTS = 64  # held until the data channel opens; older ones are dropped


class Behaviour(Protocol):
    """What a session does with what it hears (echo mode, the agent)."""

    def on_connected(self) -> None: ...

    def on_audio(self, frame: np.ndarray) -> None:
        """One 20 ms frame of 16 kHz mono int16 from the user. Must not block."""
        ...

    def ask(self, text: str) -> None:
        """A typed question, answered like a spoken one (raises NotSupported in echo mode)."""
        ...

    def tool_result(self, call_id: str, result: object) -> bool:
        """The client's result of a tool call; False if no such call waits for one."""
        ...

    def set_words(self, words: tuple[str, ...]) -> bool:
        """Names and terms the embedding app says this user may say (RTVI `vocabulary`),
        for the hearing of the next utterances; False where the ASR takes no prompt."""
        ...

    async def aclose(self) -> None: ...


class AppChannel(Protocol):
    """A client protocol on its own data channel (RTVI), fed every event of the session."""

    def attach(self, channel: RTCDataChannel) -> None:
        """The client opened its channel (again, after a restart of the connection)."""
        ...

    def on_event(self, event: Event) -> None: ...

    @property
    def client_ready(self) -> bool:
        """The client said it is ready (RTVI `client-ready`)."""
        ...

    def call_tool(self, call: ToolCall) -> None:
        """Ask the client to run a tool call (its result comes to the behaviour)."""
        ...

    async def aclose(self) -> None:
        """The session ends: say goodbye on the channel, if it is open."""
        ...


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
        app_channel: Callable[[Session], AppChannel] | None = None,
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
        self._pc, self._pc_up = self._new_peer_connection()
        self._negotiation = asyncio.Lock()  # one offer (or candidate batch) at a time
        self._frames, self._render_executor = frames, render_executor
        self._audio_out, self._video_out = self._new_tracks()
        self._channel: RTCDataChannel | None = None
        self._pending: deque[str] = deque(maxlen=MAX_PENDING_EVENTS)
        self._connected = asyncio.Event()
        self._closing = False
        self._counted = False
        self.closed_event = asyncio.Event()
        self.behaviour = behaviour_factory(self)
        self._app = app_channel(self) if app_channel is not None else None

    @property
    def id(self) -> str:
        return self._id

    def app_client(self) -> AppChannel | None:
        """The client app that can run tools: an RTVI client that said it is ready."""
        app = self._app
        return app if app is not None and app.client_ready else None

    @property
    def closed(self) -> bool:
        return self._closing

    def _new_tracks(self) -> tuple[ClockedAudioTrack, ClockedVideoTrack]:
        """Our outbound tracks, on the session's playout. A peer connection's senders stop
        their tracks when it closes, so a restarted connection gets new ones."""
        audio = ClockedAudioTrack(self.playout, on_frame=self.metrics.audio_packets_sent.inc)
        video = ClockedVideoTrack(
            self.playout, self._frames, on_frame=self.metrics.video_frames_sent.inc,
            executor=self._render_executor,
        )
        return audio, video

    def _new_peer_connection(self) -> tuple[RTCPeerConnection, asyncio.Event]:
        """A peer connection wired to this session, and the event set once it connects."""
        pc = RTCPeerConnection(rtc_configuration(self.config.ice, self.config.relay))
        connected = asyncio.Event()
        # Bound to this pc: after a restart the old one's late events must not end the session.
        pc.on("connectionstatechange", lambda: self._on_connection_state(pc, connected))
        pc.on("track", self._on_track)
        pc.on("datachannel", self._on_datachannel)
        return pc, connected

    async def accept(self, offer: Offer) -> str:
        """Apply the remote offer and return our answer SDP (ICE candidates included)."""
        try:
            sdp = await answer(self._pc, offer.sdp, self._audio_out, self._video_out)
        except OfferRejected:
            await self.close(reason="invalid_offer")
            raise
        except BaseException:
            await self.close(reason="setup_failed")
            raise
        self.tasks.spawn("connect-watchdog", self._connect_watchdog(self._pc, self._pc_up))
        self.metrics.sessions_total.inc()
        self.metrics.sessions_active.inc()
        self._counted = True
        self.log.info("session accepted")
        return sdp

    async def renegotiate(self, offer: Offer, *, restart: bool) -> str:
        """Answer a new offer of this session's client: on the live peer connection, or with
        `restart` on a new one (SmallWebRTC's `restart_pc`, sent after its ICE failed). A
        rejected offer leaves a live connection as it was; a rejected restart ends the
        session, its old connection being gone."""
        async with self._negotiation:
            if self._closing:
                raise OfferRejected("the session has ended")
            if not restart:
                return await answer(self._pc, offer.sdp, self._audio_out, self._video_out)
            old = self._pc
            self._pc, self._pc_up = self._new_peer_connection()
            self._audio_out, self._video_out = self._new_tracks()
            self.tasks.spawn("connect-watchdog", self._connect_watchdog(self._pc, self._pc_up))
            self.log.info("peer connection restarted by the client")
            await old.close()
            try:
                return await answer(self._pc, offer.sdp, self._audio_out, self._video_out)
            except OfferRejected:
                self.tasks.spawn("close", self.close(reason="invalid_offer"))
                raise

    async def add_ice_candidates(self, candidates: Sequence[IceCandidate]) -> None:
        """Trickled remote candidates for the live peer connection (raises
        CandidateRejected)."""
        async with self._negotiation:
            if not self._closing:
                await add_candidates(self._pc, candidates)

    # --- events -------------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        """Send an event on the data channel (queued until it opens)."""
        message = encode(event, session_id=self._id, t=self.clock.time())
        channel = self._channel
        if channel is not None and channel.readyState == "open":
            channel.send(message)
        else:
            self._pending.append(message)
        if self._app is not None:
            self._app.on_event(event)

    def report_error(self, code: str, exc: BaseException) -> None:
        """A contained failure of this session: log it, count it, tell the page."""
        self.log.error("%s: %s", code, exc, exc_info=exc)
        self.metrics.session_errors.labels(reason=code).inc()
        self.emit(ErrorEvent(code=code, message=str(exc) or type(exc).__name__))

    # --- peer connection callbacks ------------------------------------------------------

    def _on_connection_state(self, pc: RTCPeerConnection, connected: asyncio.Event) -> None:
        if pc is not self._pc:
            return  # a connection replaced by a restart
        state = pc.connectionState
        self.log.debug("connection state %s", state)
        if state == "connected":
            connected.set()
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
            if self._app is not None:
                self._app.attach(channel)
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

    async def _connect_watchdog(self, pc: RTCPeerConnection, connected: asyncio.Event) -> None:
        timeout = self.config.server.connect_timeout_s
        try:
            await asyncio.wait_for(connected.wait(), timeout)
        except TimeoutError:
            if pc is not self._pc:
                return  # replaced by a restart, which has its own watchdog
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
                if self._app is not None and self._pc.connectionState == "connected":
                    await self._app.aclose()  # a goodbye only to a peer that is still there
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
