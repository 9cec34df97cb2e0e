"""The RTVI adapter of one session: our events out on the client's data channel as RTVI
messages, the client's RTVI messages in, turned into what the session does.

The session creates it with itself and hands it every event it emits and any data channel
the client opens other than `events` (the JS transport's is `chat`). Until a channel is open
the messages wait, at most `MAX_PENDING` of them (the oldest go first); a client that never
opens one costs that queue and nothing else, and its session works as any other.

From the client:
- `client-ready` -> `bot-ready` (with our capabilities); a major version we do not speak
  gets a fatal `error` instead (the client disconnects); a missing one an `error-response`,
  then `bot-ready` as Pipecat does. A client that never sends it misses only `bot-ready`:
  media, speech and every other message flow from the start, as with Pipecat.
- `send-text` -> the behaviour's `ask()`: answered by voice and face like a spoken question,
  a running answer interrupted first; at most `send_text_burst` at once and
  `send_text_per_s` after that (a token bucket), the rest refused with an `error-response`
  that says so.
- `disconnect-bot` -> the session ends, after a `peerLeft` on the channel (the JS client
  then disconnects itself instead of retrying the connection).
- `llm-function-call-result` -> the behaviour's `tool_result()`, for a tool call the agent
  asked this client to run (`call_tool`); an unknown `tool_call_id` gets an `error-response`.
- `ping: <ms>` keep-alives and `signalling` objects: nothing to answer.
- Anything else gets an RTVI error and the session goes on: an unknown type an
  `error-response` to its id, a message we cannot read (malformed JSON, over
  `max_message_bytes`, binary, not labelled `rtvi-ai`) an `error`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable
from importlib import metadata

from aiortc import RTCDataChannel

from engines.tools.calls import ToolCall
from rtc_server.errors import NotSupported
from rtc_server.events import Event
from rtc_server.rtvi import messages as rtvi
from rtc_server.rtvi.config import EmbedConfig
from rtc_server.session import Session

MAX_PENDING = 64  # messages held until the channel opens
GOODBYE_FLUSH_S = 0.5  # how long a closing session waits for its peerLeft to leave


def _version() -> str:
    try:
        return metadata.version("rtc-avatar")
    except metadata.PackageNotFoundError:
        return "unknown"


ABOUT = {"library": "rtc-avatar", "library_version": _version()}


class TokenBucket:
    """`burst` at once, then `rate` per second."""

    def __init__(self, burst: int, rate: float, clock: Callable[[], float]) -> None:
        self._burst, self._rate, self._clock = burst, rate, clock
        self._tokens = float(burst)
        self._at = clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class RtviChannel:
    """The session's `AppChannel` for RTVI clients (see the module docstring)."""

    def __init__(
        self, session: Session, config: EmbedConfig, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._session = session
        self._config = config
        self._translator = rtvi.Translator(user_id=session.id)
        self._send_text = TokenBucket(config.send_text_burst, config.send_text_per_s, clock)
        self._channel: RTCDataChannel | None = None
        self._pending: deque[str] = deque(maxlen=MAX_PENDING)
        self.client_ready = False
        self._major = int(rtvi.PROTOCOL_VERSION.split(".")[0])  # the client's, once ready

    # --- AppChannel -------------------------------------------------------------------------

    def attach(self, channel: RTCDataChannel) -> None:
        self._channel = channel
        channel.on("message", self._on_message)
        channel.on("open", self._flush)
        self._flush()

    def on_event(self, event: Event) -> None:
        for out in self._translator.translate(event):
            self._send(out)

    async def aclose(self) -> None:
        channel = self._channel
        if channel is None or channel.readyState != "open":
            return
        drained = asyncio.Event()
        channel.bufferedAmountLowThreshold = 0
        channel.on("bufferedamountlow", drained.set)
        channel.send(json.dumps(rtvi.signalling("peerLeft")))
        if channel.bufferedAmount > 0:
            try:
                await asyncio.wait_for(drained.wait(), GOODBYE_FLUSH_S)
            except TimeoutError:
                self._session.log.debug("peerLeft still buffered at close")

    def call_tool(self, call: ToolCall) -> None:
        """Ask the client to run a tool call (`rtc_server/tool_runner.py`)."""
        self._send(rtvi.function_call(call.id, call.name, call.arguments, self._major))

    # --- out --------------------------------------------------------------------------------

    def _send(self, message: rtvi.Message) -> None:
        text = json.dumps(message, separators=(",", ":"))
        channel = self._channel
        if channel is not None and channel.readyState == "open":
            channel.send(text)
        else:
            self._pending.append(text)

    def _flush(self) -> None:
        channel = self._channel
        while self._pending and channel is not None and channel.readyState == "open":
            channel.send(self._pending.popleft())

    # --- in ---------------------------------------------------------------------------------

    def _on_message(self, raw: str | bytes) -> None:
        try:
            parsed = rtvi.parse_client(raw, self._config.max_message_bytes)
        except rtvi.RtviInputError as exc:
            self._session.log.info("RTVI message refused: %s", exc)
            self._send(rtvi.error(str(exc)))
            return
        if isinstance(parsed, rtvi.ClientMessage):
            try:
                self._handle(parsed)
            except (rtvi.RtviInputError, NotSupported) as exc:
                self._send(rtvi.error_response(parsed.msg_id, str(exc)))
            except Exception as exc:  # message boundary: one bad message must not end the session
                self._session.log.exception("RTVI %s failed", parsed.kind)
                self._send(rtvi.error_response(parsed.msg_id, f"{parsed.kind} failed: {exc}"))

    def _handle(self, msg: rtvi.ClientMessage) -> None:
        if msg.kind == "client-ready":
            self._client_ready(msg)
        elif msg.kind == "send-text":
            self._ask(msg)
        elif msg.kind == "disconnect-bot":
            self._session.log.info("client asked the bot to disconnect")
            self._session.tasks.spawn("disconnect-bot", self._session.close("disconnect_bot"))
        elif msg.kind == "llm-function-call-result":
            result = rtvi.parse_function_call_result(msg.data)
            if not self._session.behaviour.tool_result(result.tool_call_id, result.result):
                raise rtvi.RtviInputError(
                    f"llm-function-call-result: no tool call {result.tool_call_id!r} waits "
                    "for a result (unknown, answered already, or timed out)")
        elif msg.kind == "client-message":
            self._app_message(msg)
        else:
            raise rtvi.RtviInputError(f"Unsupported type {msg.kind}")

    def _app_message(self, msg: rtvi.ClientMessage) -> None:
        """The app's own messages: `vocabulary` (names this user may say, heard as spelled)."""
        app = rtvi.parse_app_message(msg.data)
        if app.t != "vocabulary":
            raise rtvi.RtviInputError(
                f"client-message: unknown type {app.t!r} (this server knows 'vocabulary')")
        cfg = self._config
        words = rtvi.parse_vocabulary(app.d, cfg.max_vocabulary, cfg.max_vocabulary_chars)
        used = self._session.behaviour.set_words(words)
        self._session.log.info("app vocabulary: %d phrases (%s)", len(words),
                               "in Whisper's prompt" if used else "not used by this ASR")
        self._send(rtvi.server_response(msg.msg_id, app.t, {"words": len(words),
                                                             "used": used}))

    def _client_ready(self, msg: rtvi.ClientMessage) -> None:
        version = rtvi.parse_version(msg.data)
        if version is not None and version[0] not in rtvi.SUPPORTED_MAJORS:
            text = (f"RTVI version {'.'.join(map(str, version))} is not compatible with "
                    f"protocol {rtvi.PROTOCOL_VERSION} (majors {rtvi.SUPPORTED_MAJORS})")
            self._session.log.warning(text)
            self._send(rtvi.error(text, fatal=True))
            return
        if version is None:
            self._send(rtvi.error_response(
                msg.msg_id, "client-ready without data.version MAJOR.MINOR.PATCH: assuming "
                f"{rtvi.PROTOCOL_VERSION}"))
        self.client_ready = True
        if version is not None:
            self._major = version[0]
        capabilities = {"audio_in": True, "audio_out": True, "video_in": False,
                        "screen_in": False, "video_out": True, "metrics": True}
        self._send(rtvi.bot_ready(msg.msg_id, version, ABOUT, capabilities))

    def _ask(self, msg: rtvi.ClientMessage) -> None:
        text = rtvi.parse_send_text(msg.data, self._config.max_text_chars)
        if not (text.run_immediately and text.audio_response):
            raise rtvi.RtviInputError(
                "send-text: only run_immediately and audio_response true are supported "
                "(every question is answered at once, by voice and face)")
        if not self._send_text.take():
            raise rtvi.RtviInputError(
                f"send-text rate limited: at most {self._config.send_text_burst} at once and "
                f"{self._config.send_text_per_s:g} per second; this one was dropped")
        self._session.behaviour.ask(text.content)
