"""RTVI: our events as Pipecat's messages, the client's messages read and answered, and typed
questions (`send-text`) answered like spoken ones. On the turn-taking rig (a real session and
agent on a fake clock, scripted engines: `tests/support/turns.py`) with a fake data channel."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engines.llm.base import ChatMessage
from rtc_server.events import (
    AgentText,
    ErrorEvent,
    SessionStarted,
    StateChanged,
    Transcript,
    TurnTimings,
    UserSpeech,
)
from rtc_server.rtvi import messages as rtvi
from rtc_server.rtvi.channel import MAX_PENDING, RtviChannel
from rtc_server.rtvi.config import EmbedConfig
from tests.support.fakes import FakeChannel, use_level_detector
from tests.support.turns import REPLY, Harness, speech_duration


@pytest.fixture
async def h(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Harness]:
    """The turn-taking rig, hearing through the level detector (speech = non-zero frames)."""
    use_level_detector(monkeypatch)
    harness = Harness()
    try:
        yield harness
    finally:
        await harness.close()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def rig(h: Harness, clock: Clock | None = None, **embed: Any) -> tuple[RtviChannel, FakeChannel]:
    """The session's RTVI adapter (as the server gives one to each session), on an open
    fake channel."""
    channel = FakeChannel()
    adapter = RtviChannel(h.session, EmbedConfig(**embed), clock or Clock())
    h.session._app = adapter  # noqa: SLF001 - the rig's session is built without one
    adapter.attach(channel)  # type: ignore[arg-type]
    return adapter, channel


def send(channel: FakeChannel, kind: str, data: Any = None, msg_id: str = "m1") -> None:
    channel.receive(json.dumps({"label": "rtvi-ai", "type": kind, "id": msg_id, "data": data}))


def of(channel: FakeChannel, kind: str) -> list[dict[str, Any]]:
    return [m for m in channel.messages() if m.get("type") == kind]


def test_events_become_rtvi_messages() -> None:
    t = rtvi.Translator(user_id="u", clock=lambda: "2026-01-01T00:00:00.000+00:00")
    out = [m for e in (
        SessionStarted("agent", 512, 512, 25), StateChanged("listening"),
        UserSpeech(1, True), Transcript(1, "what is", False), UserSpeech(1, False),
        Transcript(1, "what is it?", True), Transcript(2, "", True), StateChanged("thinking"),
        AgentText(1, "It is", False), StateChanged("speaking"), AgentText(1, "this.", False),
        # turn_asked past the endpoint: the long limit came first; a hearing mark, no ttfb
        TurnTimings(1, {"voice_end": -300.0, "turn_asked": 40.0, "speech_end": 0.0,
                        "first_audio_sent": 812.5}),
        AgentText(1, "", True), StateChanged("listening"),
        TurnTimings(1, {"speech_end": 0.0, "first_audio_sent": 812.5}, stall_ms=0.0,
                    evidence={"turn": 0.9, "end": 0.75}),
        ErrorEvent("asr_failed", "boom"),
    ) for m in t.translate(e)]
    assert [m["type"] for m in out] == [
        "user-started-speaking", "user-transcription", "user-stopped-speaking",
        "user-transcription", "bot-output", "bot-started-speaking", "bot-output", "metrics",
        "bot-stopped-speaking", "metrics", "error",
    ]
    assert all(m["label"] == "rtvi-ai" for m in out)
    assert out[1]["data"] == {"text": "what is", "final": False, "user_id": "u",
                              "timestamp": "2026-01-01T00:00:00.000+00:00"}
    assert out[3]["data"]["final"] is True
    outputs = [m["data"] for m in out if m["type"] == "bot-output"]
    assert [o["text"] for o in outputs] == ["It is", "this."]  # the spoken text, exact
    assert [o["segment_id"] for o in outputs] == [1, 2]
    assert outputs[0]["spoken_progress"] == {"accumulated_text": "It is", "remaining_text": ""}
    first, complete = (m["data"] for m in out if m["type"] == "metrics")
    assert first["ttfb"] == [{"processor": "speech_end", "value": 0.0},
                             {"processor": "first_audio_sent", "value": 0.8125}]
    assert "ttfb" not in complete and complete["rtc_avatar"]["stall_ms"] == 0.0
    assert complete["rtc_avatar"]["evidence"] == {"turn": 0.9, "end": 0.75}
    assert out[-1]["data"] == {"error": "asr_failed: boom", "fatal": False}


@pytest.mark.parametrize(("raw", "fragment"), [
    (b"\x00", "binary"), ("{oops", "malformed JSON"), ("[1, 2]", "JSON object"),
    ('{"type": "client-ready"}', "label"), ('{"label": "rtvi-ai"}', '"type"'),
    ('{"label": "rtvi-ai", "type": "x", "id": 5}', '"id"'),
    ("x" * 70_000, "over the 65536-byte limit"),
])
def test_unreadable_client_messages_are_refused(raw: str | bytes, fragment: str) -> None:
    with pytest.raises(rtvi.RtviInputError, match=fragment):
        rtvi.parse_client(raw, 65536)


def test_keep_alives_and_signalling_are_not_rtvi() -> None:
    assert isinstance(rtvi.parse_client("ping: 1767225600000", 65536), rtvi.Ping)
    track = '{"type": "signalling", "message": {"type": "trackStatus", "receiver_index": 1}}'
    assert isinstance(rtvi.parse_client(track, 65536), rtvi.Signalling)


async def test_client_ready_gets_bot_ready_and_a_bad_major_a_fatal_error(h: Harness) -> None:
    adapter, channel = rig(h)
    send(channel, "client-ready", {"version": "2.1.0", "about": {"library": "x"}}, "r1")
    ready = of(channel, "bot-ready")[-1]
    assert ready["id"] == "r1" and ready["data"]["version"] == rtvi.PROTOCOL_VERSION
    assert adapter.client_ready
    send(channel, "client-ready", {"version": "9.0.0"}, "r2")
    assert of(channel, "error")[-1]["data"]["fatal"] is True and len(of(channel, "bot-ready")) == 1
    send(channel, "client-ready", {}, "r3")  # no version: said so, then served as 2.x
    assert of(channel, "error-response")[-1]["id"] == "r3"
    assert of(channel, "bot-ready")[-1]["id"] == "r3"


async def test_messages_wait_for_the_channel_and_the_oldest_go_first(h: Harness) -> None:
    adapter = RtviChannel(h.session, EmbedConfig(), Clock())
    for i in range(MAX_PENDING + 10):
        adapter.on_event(Transcript(1, f"partial {i}", False))
    channel = FakeChannel(state="connecting")
    adapter.attach(channel)  # type: ignore[arg-type]
    assert channel.sent == []
    channel.open()
    texts = [m["data"]["text"] for m in channel.messages()]
    assert texts == [f"partial {i}" for i in range(10, MAX_PENDING + 10)]


async def test_a_typed_question_is_answered_like_a_spoken_one(h: Harness) -> None:
    adapter, channel = rig(h)
    send(channel, "send-text", {"content": "  What is the answer? ", "options": {}})
    await h.settle()
    assert h.states() == ["listening", "thinking"]
    await h.listen(speech_duration(REPLY) + 1.0)
    assert h.states() == ["listening", "thinking", "speaking", "listening"]
    assert h.agent.history == [ChatMessage("user", "What is the answer?"),
                               ChatMessage("assistant", REPLY)]
    assert "".join(m["data"]["text"] for m in of(channel, "bot-output")).strip() == REPLY
    marks = h.sent("timings")[-1]["marks_ms"]
    assert marks["speech_end"] == marks["asr_final"] == 0.0 and marks["first_audio_sent"] > 0
    assert [m["type"] for m in channel.messages() if "speaking" in m["type"]] == [
        "bot-started-speaking", "bot-stopped-speaking"]


async def test_a_typed_question_interrupts_a_running_answer(h: Harness) -> None:
    """Like a barge-in: the voice stops at once, the history keeps only what was heard of
    the first answer, and the typed question gets the next one."""
    adapter, channel = rig(h)
    await h.ask(1, "Tell me everything.")
    await h.listen(0.5)
    assert h.states()[-1] == "speaking"
    h.llm.release.clear()  # the typed question's answer waits until the test lets it
    send(channel, "send-text", {"content": "Stop, what time is it?"})
    await h.settle()
    assert h.session.playout.busy_until() <= h.session.clock.time() + 0.02
    h.heard.clear()
    await h.listen(0.3)  # the LLM is scripted to wait: the new answer has not begun
    assert h.loud_s() <= 0.02  # the first answer's voice stopped within one frame
    h.llm.release.set()
    await h.listen(speech_duration(REPLY) + 1.0)
    history = h.agent.history
    assert history[0] == ChatMessage("user", "Tell me everything.")
    assert history[1].role == "assistant" and 0 < len(history[1].content) < len(REPLY)
    assert history[2:] == [ChatMessage("user", "Stop, what time is it?"),
                           ChatMessage("assistant", REPLY)]


async def test_a_send_text_flood_is_rate_limited_and_said_so(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    asked: list[str] = []
    monkeypatch.setattr(h.agent, "ask", asked.append)
    adapter, channel = rig(h, clock, send_text_burst=3, send_text_per_s=0.5)
    for i in range(10):
        send(channel, "send-text", {"content": f"question {i}"}, f"q{i}")
    assert asked == ["question 0", "question 1", "question 2"]
    refused = of(channel, "error-response")
    assert [m["id"] for m in refused] == [f"q{i}" for i in range(3, 10)]
    assert all("rate limited" in m["data"]["error"] for m in refused)
    clock.now = 2.0  # one more token after 2 s at 0.5 per second
    send(channel, "send-text", {"content": "later"}, "q10")
    send(channel, "send-text", {"content": "too soon"}, "q11")
    assert asked[-1] == "later" and of(channel, "error-response")[-1]["id"] == "q11"


@pytest.mark.parametrize(("data", "fragment"), [
    (None, "content"), ({"content": ""}, "non-empty"), ({"content": "x" * 2001}, "2000"),
    ({"content": "hi", "options": {"run_immediately": False}}, "run_immediately"),
    ({"content": "hi", "options": {"audio_response": "yes"}}, "true/false"),
])
async def test_bad_send_text_gets_an_error_response(
    h: Harness, data: Any, fragment: str
) -> None:
    adapter, channel = rig(h)
    send(channel, "send-text", data, "bad")
    reply = of(channel, "error-response")[-1]
    assert reply["id"] == "bad" and fragment in reply["data"]["error"]
    assert h.states() == ["listening"]


async def test_the_user_speaking_events_frame_the_transcript(h: Harness) -> None:
    adapter, channel = rig(h)
    await h.talk(0.6, 1.5)
    kinds = [m["type"] for m in channel.messages()]
    start, stop = kinds.index("user-started-speaking"), kinds.index("user-stopped-speaking")
    final = next(i for i, m in enumerate(channel.messages())
                 if m["type"] == "user-transcription" and m["data"]["final"])
    assert start < stop < final
    speech = h.sent("user_speech")
    assert [e["speaking"] for e in speech] == [True, False]
    assert speech[0]["turn_id"] == h.sent("transcript")[-1]["turn_id"]


async def test_session_end_says_peer_left(h: Harness) -> None:
    adapter, channel = rig(h)
    await adapter.aclose()
    assert json.loads(channel.sent[-1]) == {"type": "signalling", "message": {"type": "peerLeft"}}


async def test_the_apps_vocabulary_becomes_the_hearings_prompt(h: Harness) -> None:
    """`client-message` `vocabulary` (client-js `sendClientRequest("vocabulary", ...)`): the
    words, tidied and each once, go into Whisper's prompt from the next utterance on, and the
    server-response says how many were taken."""
    h.engines.words_prompt = lambda words: "Ava, " + ", ".join(words) + "."
    adapter, channel = rig(h)
    await h.talk(0.6, 1.5)
    assert h.asr.prompts == [None]
    send(channel, "client-message", {"t": "vocabulary", "d": {
        "words": ["David  Okafor", "Priya Shah", "david okafor"]}}, "v1")
    reply = of(channel, "server-response")[-1]
    assert reply["id"] == "v1"
    assert reply["data"] == {"t": "vocabulary", "d": {"words": 2, "used": True}}
    await h.talk(0.6, 1.5)
    assert h.asr.prompts == [None, "Ava, David Okafor, Priya Shah."]


async def test_a_vocabulary_an_asr_cannot_use_is_said_so(h: Harness) -> None:
    adapter, channel = rig(h)  # the rig's engines: no prompt for a session's words
    send(channel, "client-message", {"t": "vocabulary", "d": {"words": ["Okafor"]}}, "v1")
    assert of(channel, "server-response")[-1]["data"]["d"] == {"words": 1, "used": False}


@pytest.mark.parametrize(("data", "fragment"), [
    (None, '"t"'), ({"t": "make-coffee"}, "unknown type 'make-coffee'"),
    ({"t": "vocabulary", "d": "Okafor"}, '"words"'),
    ({"t": "vocabulary", "d": {"words": [1, 2]}}, "string"),
    ({"t": "vocabulary", "d": {"words": [" "]}}, "printable"),
    ({"t": "vocabulary", "d": {"words": ["x" * 81]}}, "1-80"),
    ({"t": "vocabulary", "d": {"words": ["a\x07b"]}}, "printable"),
    ({"t": "vocabulary", "d": {"words": [f"name {i}" for i in range(201)]}}, "at most 200"),
])
async def test_a_bad_app_message_gets_an_error_response_and_changes_nothing(
    h: Harness, data: Any, fragment: str
) -> None:
    h.engines.words_prompt = lambda words: ", ".join(words)
    adapter, channel = rig(h)
    send(channel, "client-message", data, "bad")
    reply = of(channel, "error-response")[-1]
    assert reply["id"] == "bad" and fragment in reply["data"]["error"]
    await h.talk(0.6, 1.5)
    assert h.asr.prompts == [None]
