"""A conversation of loopback sessions, for the benchmarks that load a server with many
(bench/cluster.py): peers connect through a URL (a gateway), then every session asks spoken
questions (piper voice), one after the other's answer, while the video keeps streaming:
- not together: a random 0-1 s pause first (a human's), from the shared start `t0`;
- together (`Schedule.together`): question k of every session starts at `t0 + k * round_s`
  (wall clock, so the same in every process); a session whose previous answer is still running
  then asks as soon as it is done, and the answer is marked late (`late_s`).

Per answer: voice-to-voice (end of the peer's speech -> first loud answer audio received,
aiortc's 80 ms receiver hold removed) and the turn's `timings` marks (the events channel,
`marks_ms`: the last ones sent for the turn, which come before the state is back to
listening). Per session: received video fps over the conversation and the worst 1 s window.
`split` and `merge`: the sessions over processes and their results back as one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from testkit.agent import audio_timeline
from testkit.peer import LoopbackPeer, PcmMicrophone
from testkit.speech import synth

log = logging.getLogger("bench")
QUIET_RMS = 150.0
QUESTIONS = ("What is the capital of France?", "How many days are in a week?",
             "What color is the sky on a clear day?", "What is two plus two?",
             "How do I open a savings account?", "Who wrote Romeo and Juliet?")
Record = dict[str, Any]  # one answer's or one session's result, as JSON


@dataclass(frozen=True)
class Schedule:
    """When the sessions ask (module docstring)."""

    t0: float  # wall clock (time.time()) of the start
    together: bool = False
    round_s: float = 20.0

    def start_of(self, k: int) -> float:
        """When question k (0-based) is asked by every session, together."""
        return self.t0 + k * self.round_s


@functools.cache
def speech_of(question: str) -> np.ndarray:
    return synth(question, engine="piper")


def question_of(session: int, k: int) -> str:
    return QUESTIONS[(session + k) % len(QUESTIONS)]


async def ask(
    peer: LoopbackPeer, question: str, timeout_s: float
) -> tuple[float, dict[str, float], dict[str, float]]:
    """Say `question`, wait for the whole answer: voice-to-voice in seconds (nan if none heard),
    the turn's last `timings` marks and its end of turn's evidence (empty if none came)."""
    speech = speech_of(question)
    events = peer.received.events
    start = len(events)

    def since(index: int, state: str) -> Callable[[dict[str, Any]], bool]:
        return lambda e: e.get("state") == state and any(x is e for x in events[index:])

    peer.mic.set_audio(speech, 16000)
    await asyncio.wait_for(peer.mic.playing.wait(), 10)
    assert peer.mic.started_at is not None
    speech_end = peer.mic.started_at + len(speech) / 16000
    speaking = await peer.wait_event(since(start, "speaking"), timeout_s)
    after = next(i for i, e in enumerate(events) if e is speaking)
    await peer.wait_event(since(after + 1, "listening"), timeout_s)  # the answer is over
    timings = [e for e in events[start:] if e.get("type") == "timings"]
    last = timings[-1] if timings else {"marks_ms": {}}
    marks = {k: float(v) for k, v in last["marks_ms"].items()}
    evidence = {k: float(v) for k, v in last.get("evidence", {}).items()}
    a_t, rms = audio_timeline(peer.received)
    loud = np.flatnonzero((rms > QUIET_RMS) & (a_t > speech_end))
    v2v = float(a_t[loud[0]] - speech_end) if len(loud) else float("nan")
    return v2v, marks, evidence


def fps_of(arrivals: list[float], start: float, end: float) -> tuple[float, float]:
    """Mean fps and worst one-second window of frames arriving within [start, end)."""
    times = np.array([t for t in arrivals if start <= t < end])
    if len(times) < 2:
        return float("nan"), float("nan")
    windows = [np.sum((times >= t) & (times < t + 1.0)) for t in times[times < end - 1.0]]
    return (len(times) - 1) / (times[-1] - times[0]), float(min(windows) if windows else "nan")


async def _until(wall: float) -> None:
    """Sleep until the wall-clock time `wall` (at once if it has passed)."""
    await asyncio.sleep(max(0.0, wall - time.time()))


async def session_talk(
    peer: LoopbackPeer, session: int, questions: int, timeout_s: float, schedule: Schedule
) -> list[Record]:
    """One session's questions on `schedule`; one record per answer."""
    out: list[Record] = []
    await _until(schedule.t0)
    for k in range(questions):
        late_s = 0.0
        if schedule.together:
            late_s = max(0.0, time.time() - schedule.start_of(k))
            await _until(schedule.start_of(k))
        else:
            await asyncio.sleep(random.random())  # noqa: ASYNC110 (a human's pause)
        question = question_of(session, k)
        asked_at = time.time()
        try:
            v2v, marks, evidence = await ask(peer, question, timeout_s)
        except TimeoutError:  # counted as not answered in time; the session goes on
            log.warning("no complete answer within %.0f s: %r", timeout_s, question)
            v2v, marks, evidence = float("nan"), {}, {}
        out.append({"session": session, "round": k, "question": question, "v2v_s": v2v,
                    "marks_ms": marks, "evidence": evidence, "late_s": late_s,
                    "asked_at": asked_at})
    return out


async def talk(
    peers: list[LoopbackPeer], first: int, questions: int, timeout_s: float, schedule: Schedule
) -> dict[str, list[Record]]:
    """Every peer's questions at once: {"answers": [...], "sessions": [...]} (sessions are
    numbered from `first`, so client processes' numbers do not collide)."""
    await _until(schedule.t0)
    start = time.monotonic()
    per_peer = await asyncio.gather(*(
        session_talk(p, first + i, questions, timeout_s, schedule) for i, p in enumerate(peers)
    ))
    end = time.monotonic()
    sessions = []
    for i, peer in enumerate(peers):
        fps, worst = fps_of(peer.received.video_arrival, start, end)
        sessions.append({"session": first + i, "worker": peer.answer.get("worker_id"),
                         "fps": fps, "worst_1s": worst})
    return {"answers": [a for answers in per_peer for a in answers], "sessions": sessions}


async def connect_peers(url: str, count: int) -> list[LoopbackPeer]:
    """`count` peers connected through the gateway at `url` (closed again on a failure)."""
    for question in QUESTIONS:  # the voice loads once, before any peer's media is running
        speech_of(question)
    peers: list[LoopbackPeer] = []
    try:
        for _ in range(count):
            # Arrivals only: the fps is all these peers report (no RGB conversion and mean per
            # frame, ~0.85 ms; the client processes' cores did not change with it on the
            # H200: their cost is aiortc's receive path and VP8 decoding).
            peer = LoopbackPeer(url, microphone=PcmMicrophone(), video_summary=None)
            peers.append(peer)
            await peer.connect()
    except BaseException:
        await close_peers(peers)
        raise
    return peers


async def close_peers(peers: list[LoopbackPeer]) -> None:
    for peer in peers:
        await peer.close(delete=False)


def merge(parts: list[dict[str, list[Record]]]) -> dict[str, list[Record]]:
    """The client processes' results as one (answers and sessions in session order)."""
    answers = [a for p in parts for a in p["answers"]]
    sessions = [s for p in parts for s in p["sessions"]]
    return {"answers": sorted(answers, key=lambda a: (a["session"], a["round"])),
            "sessions": sorted(sessions, key=lambda s: s["session"])}


def split(sessions: int, processes: int) -> list[tuple[int, int]]:
    """(first, count) of each client process: the sessions as evenly as they go."""
    processes = max(1, min(processes, sessions))
    base, extra = divmod(sessions, processes)
    out, first = [], 0
    for i in range(processes):
        count = base + (1 if i < extra else 0)
        out.append((first, count))
        first += count
    return out
