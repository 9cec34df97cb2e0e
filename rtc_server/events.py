"""Data channel events: the closed set of messages a session sends on its `events` channel.

Each is a frozen dataclass serialised as one JSON object with an envelope:
`{"v": 1, "type": <type>, "session_id": ..., "t": <media clock seconds>, ...fields}`.
The schema is documented in the README ("Data channel events") for SDK users.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

SCHEMA_VERSION = 1
State = Literal["connecting", "listening", "thinking", "speaking"]


@dataclass(frozen=True)
class SessionStarted:
    type: ClassVar[str] = "session"
    mode: str
    width: int
    height: int
    fps: int


@dataclass(frozen=True)
class StateChanged:
    type: ClassVar[str] = "state"
    state: State


@dataclass(frozen=True)
class UserSpeech:
    """The user began to speak (`speaking`), or their turn ended (the final transcript is
    next); `turn_id` is the one their transcript and its answer carry."""

    type: ClassVar[str] = "user_speech"
    turn_id: int
    speaking: bool


@dataclass(frozen=True)
class Transcript:
    """What the user said: partials while speaking, then one final per utterance."""

    type: ClassVar[str] = "transcript"
    turn_id: int
    text: str
    final: bool


@dataclass(frozen=True)
class AgentText:
    """A chunk of the agent's answer as it is spoken, exactly as cut (its spaces kept: the
    chunks concatenated are the answer); `final` marks the turn's last chunk."""

    type: ClassVar[str] = "agent_text"
    turn_id: int
    text: str
    final: bool


# The hearing's marks in `TurnTimings` (rtc_server/hearing.py), for the last pause before the
# endpoint: reported by the endpointer, its decode begun by the lane (early or at the pause),
# the early decode's return (absent without one; a `pause_text` well after it means the pause
# decoded again), the turn model's probability in, the pause's transcript in, the turn model's
# second probability in (`[turn] recheck_ms`; absent when not asked again), the text-end
# probe asked (on the early decode's words or the pause's) and its answer taken into the
# verdict (`[turn] text_end_threshold`; absent when not asked: an answer read on the early
# words is taken in with the pause's transcript, however much sooner its forward finished),
# and the end of the silence
# the verdict asked for (voice end + `complete_after_ms`, the soonest of them;
# absent when it asked for the long limit); `early_end`: the turn ended at the early decode,
# before any pause (`[turn] early_end_confidence`). They say what the end of turn waited for;
# they are not stages of the answer.
HEARING_MARKS = (
    "pause", "decode_start", "ahead_done", "turn_model", "pause_text", "turn_again",
    "text_end_asked", "text_end", "turn_asked", "early_end",
)
# What that verdict was computed on (`TurnTimings.evidence`; absent: not asked or not in):
# Smart Turn's probability ("turn") and its recheck's ("turn_again"), Whisper's probability
# for the final mark ("end"; 0 where none was written), the text-end probe's ("text_end")
# and 1 where its answer was the early decode's words' read, 0 where the pause asked
# ("text_end_ahead"), and the speaker's learnt limit where it ended the turn before the
# evidence did ("speaker_limit", ms of silence; engines/turn/speaker.py). Diagnostics for the
# benchmarks: which signal held a slow turn.
EVIDENCE = ("turn", "turn_again", "end", "text_end", "text_end_ahead", "speaker_limit")


@dataclass(frozen=True)
class TurnTimings:
    """Per-stage marks of one turn, milliseconds after `speech_end` (absent stages omitted)."""

    type: ClassVar[str] = "timings"
    turn_id: int
    marks_ms: dict[str, float] = field(default_factory=dict)
    barge_in_ms: float | None = None  # user speech onset -> agent audio cleared, if barged in
    stall_ms: float | None = None  # voice ran dry between chunks; set once the turn has ended
    evidence: dict[str, float] = field(default_factory=dict)  # EVIDENCE of its end of turn


ToolStatus = Literal[
    "confirm", "running", "done", "failed", "timeout", "cancelled", "refused", "asked",
]


@dataclass(frozen=True)
class ToolCallEvent:
    """A tool call of the agent (`rtc_server/acting.py`), once per change of its status:
    `confirm` (read back, waiting for the user's yes), `running`, then `done` (with the
    result as the model read it), `failed` or `timeout`; `cancelled` (a no, or anything but a
    yes, or a barge-in), `refused` (not a declared tool) or `asked` (a value the user did not
    say: the agent asked for it). A `sensitive` tool's arguments and result are `null`."""

    type: ClassVar[str] = "tool_call"
    turn_id: int
    call_id: str
    name: str
    status: ToolStatus
    arguments: dict[str, Any] | None = None
    duration_ms: float | None = None  # running -> its end
    result: str | None = None  # done: the result (cut to the tools' max_result_chars)
    detail: str = ""  # why it failed, was refused or asked


@dataclass(frozen=True)
class ErrorEvent:
    type: ClassVar[str] = "error"
    code: str
    message: str


Event = (
    SessionStarted | StateChanged | UserSpeech | Transcript | AgentText | TurnTimings
    | ToolCallEvent | ErrorEvent
)


def encode(event: Event, *, session_id: str, t: float) -> str:
    payload: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "type": event.type,
        "session_id": session_id,
        "t": round(t, 4),
    }
    payload.update(dataclasses.asdict(event))
    return json.dumps(payload, separators=(",", ":"))
