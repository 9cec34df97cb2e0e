"""RTVI messages: the client's, read and checked; ours, built from the session's events.

The contract is Pipecat's (`pipecat/processors/frameworks/rtvi/models.py` and `processor.py`
of pipecat-ai 1.14, protocol 2.2.0; `@pipecat-ai/client-js` 1.13.1 speaks 2.1.0): JSON
objects `{"label": "rtvi-ai", "type", "id"?, "data"?}` on the client's data channel, beside
the transport's own `{"type": "signalling", "message": {...}}` objects and plain-text
`ping: <ms>` keep-alives.

Our events become (one event, zero or more messages; `Translator` keeps the little state):
- `state` speaking / not speaking: `bot-started-speaking` / `bot-stopped-speaking` (from the
  audio track's real playout, as `first_audio_sent` is);
- `user_speech`: `user-started-speaking` / `user-stopped-speaking`;
- `transcript`: `user-transcription` (`final` false for partials);
- `agent_text` with text: `bot-output`, the chunk's text exactly as the voice says it, one
  per chunk as it starts to play;
- `timings`: `metrics`, with `ttfb` per stage of the answer (seconds after the end of the
  user's turn; not the hearing's marks, which say what the end of turn waited for) once per
  turn and `rtc_avatar` carrying every mark;
- `tool_call` (rtc_server/acting.py): `llm-function-call-started` when a call runs and
  `llm-function-call-stopped` when it ends (`cancelled` unless done; the result unless the
  tool is `sensitive`). A call the embedding app runs goes out as
  `llm-function-call-in-progress` with its arguments (`function_call`; protocol 1.x clients:
  the deprecated `llm-function-call`), and its `llm-function-call-result` comes back
  (`parse_function_call_result`);
- `error`: `error` (`fatal` false: the session goes on).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rtc_server.events import (
    HEARING_MARKS,
    AgentText,
    ErrorEvent,
    Event,
    StateChanged,
    ToolCallEvent,
    Transcript,
    TurnTimings,
    UserSpeech,
)

PROTOCOL_VERSION = "2.2.0"
LABEL = "rtvi-ai"
# Client majors served: 2, and 1 (deprecated, still served by Pipecat; our bot-output
# carries its `spoken` field too).
SUPPORTED_MAJORS = (1, 2)
Message = dict[str, Any]


class RtviInputError(ValueError):
    """A client message that cannot be handled (answered with an RTVI error)."""


def message(kind: str, data: Mapping[str, Any] | None = None, msg_id: str | None = None
            ) -> Message:
    out: Message = {"label": LABEL, "type": kind}
    if msg_id is not None:
        out["id"] = msg_id
    if data is not None:
        out["data"] = dict(data)
    return out


def error(text: str, *, fatal: bool = False) -> Message:
    """An RTVI error event (a message we could not attribute, or a failure of the session)."""
    return message("error", {"error": text, "fatal": fatal})


def error_response(msg_id: str, text: str) -> Message:
    """The answer to client message `msg_id` that could not be done."""
    return message("error-response", {"error": text}, msg_id)


def signalling(kind: str) -> dict[str, Any]:
    """A SmallWebRTC transport message (`peerLeft`: the bot is gone)."""
    return {"type": "signalling", "message": {"type": kind}}


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


# --- from the client ------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientMessage:
    kind: str
    msg_id: str
    data: Any


@dataclass(frozen=True)
class Signalling:
    """A transport message (`trackStatus`: the user muted a track); nothing to answer."""

    message: Any


@dataclass(frozen=True)
class Ping:
    """The JS transport's keep-alive, `ping: <ms>`, every second."""


def parse_client(raw: str | bytes, max_bytes: int) -> ClientMessage | Signalling | Ping:
    """Read one data channel message; raises RtviInputError with what is wrong."""
    if isinstance(raw, bytes):
        raise RtviInputError("binary message: RTVI messages are JSON text")
    size = len(raw.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise RtviInputError(f"message of {size} bytes is over the {max_bytes}-byte limit")
    if raw.startswith("ping"):
        return Ping()
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RtviInputError(f"malformed JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise RtviInputError("an RTVI message is a JSON object")
    if data.get("type") == "signalling":
        return Signalling(data.get("message"))
    if data.get("label") != LABEL:
        raise RtviInputError(f'not an RTVI message: "label" must be "{LABEL}"')
    kind, msg_id = data.get("type"), data.get("id", "")
    if not isinstance(kind, str) or not kind or len(kind) > 64:
        raise RtviInputError('an RTVI message needs a "type"')
    if not isinstance(msg_id, str) or len(msg_id) > 64:
        raise RtviInputError('"id" must be a short string')
    return ClientMessage(kind, msg_id, data.get("data"))


def parse_version(data: Any) -> tuple[int, int, int] | None:
    """`client-ready`'s `data.version` as numbers; None when missing or malformed."""
    version = data.get("version") if isinstance(data, dict) else None
    if not isinstance(version, str):
        return None
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    major, minor, patch = (int(p) for p in parts)
    return major, minor, patch


def bot_ready(msg_id: str, client: tuple[int, int, int] | None, about: Mapping[str, Any],
              capabilities: Mapping[str, bool]) -> Message:
    """The answer to `client-ready`: our protocol version (a 1.x client's own, as Pipecat
    does, so it stays on the 1.x bot-output format)."""
    version = ".".join(map(str, client)) if client and client[0] == 1 else PROTOCOL_VERSION
    return message("bot-ready", {"version": version, "about": dict(about),
                                 "capabilities": dict(capabilities)}, msg_id)


@dataclass(frozen=True)
class SendText:
    content: str
    run_immediately: bool
    audio_response: bool


def parse_send_text(data: Any, max_chars: int) -> SendText:
    """`send-text`'s data: `{"content": str, "options": {run_immediately, audio_response}}`."""
    if not isinstance(data, dict):
        raise RtviInputError('send-text needs data {"content": ...}')
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        raise RtviInputError('send-text needs a non-empty "content" string')
    if len(content) > max_chars:
        raise RtviInputError(f"send-text content is over {max_chars} characters")
    options = data.get("options") or {}
    if not isinstance(options, dict):
        raise RtviInputError('send-text "options" must be an object')
    run, audio = options.get("run_immediately", True), options.get("audio_response", True)
    if not isinstance(run, bool) or not isinstance(audio, bool):
        raise RtviInputError("send-text options are true/false")
    return SendText(content.strip(), run, audio)


@dataclass(frozen=True)
class FunctionCallResult:
    tool_call_id: str
    result: Any


def parse_function_call_result(data: Any) -> FunctionCallResult:
    """`llm-function-call-result`'s data: `{function_name, tool_call_id, arguments, result}`
    as `@pipecat-ai/client-js` sends it; the result any JSON value (Pipecat: object or
    string)."""
    if not isinstance(data, dict):
        raise RtviInputError('llm-function-call-result needs data {"tool_call_id", "result"}')
    call_id = data.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id or len(call_id) > 64:
        raise RtviInputError('llm-function-call-result needs a "tool_call_id" string')
    if "result" not in data:
        raise RtviInputError('llm-function-call-result needs a "result"')
    return FunctionCallResult(call_id, data["result"])


@dataclass(frozen=True)
class AppMessage:
    """A `client-message`: the app's own type `t` and data `d` (client-js's
    `sendClientMessage(t, d)` and `sendClientRequest(t, d)`)."""

    t: str
    d: Any


def parse_app_message(data: Any) -> AppMessage:
    if not isinstance(data, dict) or not isinstance(data.get("t"), str) or not data["t"]:
        raise RtviInputError('client-message needs data {"t": type, "d": data}')
    return AppMessage(data["t"], data.get("d"))


def parse_vocabulary(data: Any, max_phrases: int, max_chars: int) -> tuple[str, ...]:
    """The `vocabulary` app message's `d`: `{"words": ["David Okafor", "Easy Saver", ...]}`,
    names and terms this user may say, likeliest first; each phrase once."""
    words = data.get("words") if isinstance(data, dict) else None
    if not isinstance(words, list):
        raise RtviInputError('vocabulary needs d {"words": [phrases]}')
    if len(words) > max_phrases:
        raise RtviInputError(f"vocabulary: {len(words)} phrases, at most {max_phrases}")
    kept: dict[str, str] = {}
    for word in words:
        if not isinstance(word, str):
            raise RtviInputError("vocabulary: every phrase must be a string")
        phrase = " ".join(word.split())
        if not phrase or len(phrase) > max_chars or not phrase.isprintable():
            raise RtviInputError(
                f"vocabulary: {word[:40]!r} is not a phrase of 1-{max_chars} printable "
                "characters")
        kept.setdefault(phrase.lower(), phrase)
    return tuple(kept.values())


def server_response(msg_id: str, t: str, d: Any) -> Message:
    """The answer to app message `msg_id` (what `sendClientRequest` resolves with)."""
    return message("server-response", {"t": t, "d": d}, msg_id)


def function_call(call_id: str, name: str, arguments: Mapping[str, Any], major: int) -> Message:
    """Ask the client to run a tool (its handler registered with
    `registerFunctionCallHandler(name, ...)` answers with `llm-function-call-result`)."""
    if major == 1:
        return message("llm-function-call", {
            "function_name": name, "tool_call_id": call_id, "args": dict(arguments)})
    return message("llm-function-call-in-progress", {
        "tool_call_id": call_id, "function_name": name, "arguments": dict(arguments)})


# --- to the client --------------------------------------------------------------------------


class Translator:
    """Our session events as RTVI messages (see the module docstring's table)."""

    def __init__(self, user_id: str, clock: Callable[[], str] = now_iso) -> None:
        self._user_id = user_id
        self._clock = clock
        self._bot_speaking = False
        self._segments = 0
        self._timed: set[int] = set()  # turns whose ttfb went out
        self._running: set[str] = set()  # tool calls started and not yet stopped

    def translate(self, event: Event) -> list[Message]:
        if isinstance(event, StateChanged):
            speaking = event.state == "speaking"
            if speaking == self._bot_speaking:
                return []
            self._bot_speaking = speaking
            return [message("bot-started-speaking" if speaking else "bot-stopped-speaking")]
        if isinstance(event, UserSpeech):
            kind = "user-started-speaking" if event.speaking else "user-stopped-speaking"
            return [message(kind)]
        if isinstance(event, Transcript):
            if not event.text:
                return []
            return [message("user-transcription", {
                "text": event.text, "final": event.final, "timestamp": self._clock(),
                "user_id": self._user_id,
            })]
        if isinstance(event, AgentText):
            return [self._bot_output(event.text)] if event.text else []
        if isinstance(event, TurnTimings):
            return [self._metrics(event)]
        if isinstance(event, ToolCallEvent):
            return self._tool_call(event)
        if isinstance(event, ErrorEvent):
            return [error(f"{event.code}: {event.message}")]
        return []

    def _tool_call(self, event: ToolCallEvent) -> list[Message]:
        if event.status == "running":
            self._running.add(event.call_id)
            return [message("llm-function-call-started", {"function_name": event.name})]
        if event.call_id not in self._running:
            return []  # read back, asked or refused: nothing ran
        self._running.discard(event.call_id)
        data: dict[str, Any] = {"tool_call_id": event.call_id, "function_name": event.name,
                                "cancelled": event.status != "done"}
        if event.result is not None:
            data["result"] = event.result
        return [message("llm-function-call-stopped", data)]

    def _bot_output(self, text: str) -> Message:
        self._segments += 1
        return message("bot-output", {
            "text": text, "output_type": "sentence", "text_type": "sentence",
            "aggregated_by": "sentence", "segment_id": self._segments,
            "spoken": True,  # protocol 1.x
            "will_be_spoken": True, "spoken_status": "completed",
            "spoken_progress": {"accumulated_text": text, "remaining_text": ""},
        })

    def _metrics(self, event: TurnTimings) -> Message:
        data: dict[str, Any] = {"rtc_avatar": {
            "turn_id": event.turn_id, "marks_ms": event.marks_ms,
            "barge_in_ms": event.barge_in_ms, "stall_ms": event.stall_ms,
            "evidence": event.evidence,
        }}
        if event.turn_id not in self._timed:  # the complete marks come again at the end
            self._timed.add(event.turn_id)
            data["ttfb"] = [{"processor": stage, "value": round(ms / 1000, 4)}
                            for stage, ms in event.marks_ms.items()
                            if ms >= 0 and stage not in HEARING_MARKS]
        return message("metrics", data)
