"""Echo mode: a transport test mode that plays back each utterance after the user stops.

The portrait stays idle. Each played utterance emits state changes (speaking -> listening)
and a timings event (speech_end -> first_audio_sent, taken when the audio track sends the
echo's first sample), so the page's panels work end to end before the agent exists.
"""

from __future__ import annotations

import numpy as np

from engines.vad import SpeechEnded, SpeechStarted, VadConfig, create_endpointer
from media.audio import LISTEN_RATE
from rtc_server.errors import NotSupported
from rtc_server.events import TurnTimings, UserSpeech
from rtc_server.session import Session

LEAD_S = 0.06  # scheduling margin so the first 20 ms frame is not already in the past
TAIL_S = 0.15  # keep a little of the trailing silence so the last syllable is not clipped


class EchoBehaviour:
    def __init__(self, session: Session, vad: VadConfig) -> None:
        self._session = session
        self._endpointer = create_endpointer(vad)
        self._pushed = 0  # samples pushed into the endpointer (its stream time)
        self._utterance: list[np.ndarray] | None = None
        self._utterance_start = 0
        self._turn = 0

    def on_connected(self) -> None:
        self._session.set_state("listening")

    def on_audio(self, frame: np.ndarray) -> None:
        self._pushed += len(frame)
        event = self._endpointer.push(frame)
        if isinstance(event, SpeechStarted):
            self._utterance = [event.audio]
            self._utterance_start = self._pushed - len(event.audio)
            self._session.emit(UserSpeech(turn_id=self._turn + 1, speaking=True))
        elif self._utterance is not None:
            self._utterance.append(frame)
        if isinstance(event, SpeechEnded) and self._utterance is not None:
            self._session.emit(UserSpeech(turn_id=self._turn + 1, speaking=False))
            pcm = np.concatenate(self._utterance)
            self._utterance = None
            keep = round((event.t + TAIL_S) * LISTEN_RATE) - self._utterance_start
            self._play(pcm[: max(keep, 0)])

    def _play(self, pcm: np.ndarray) -> None:
        session = self._session
        self._turn += 1
        turn, speech_end = self._turn, session.clock.time()
        at = max(speech_end + LEAD_S, session.playout.busy_until())

        def started(t: float) -> None:  # the audio track sent the echo's first sample
            session.set_state("speaking")
            session.emit(TurnTimings(turn_id=turn, marks_ms={
                "speech_end": 0.0, "first_audio_sent": round((t - speech_end) * 1000, 1),
            }))

        end = session.playout.schedule_audio(
            pcm, LISTEN_RATE, at, tag=f"echo-{turn}", on_start=started
        )
        session.tasks.spawn(f"echo-{turn}", self._back_to_listening(end))

    async def _back_to_listening(self, end: float) -> None:
        session = self._session
        await session.clock.sleep_until(end)
        if session.playout.busy_until() <= end:
            session.set_state("listening")

    def ask(self, text: str) -> None:
        raise NotSupported("typed questions need agent mode (this server echoes what it hears)")

    def tool_result(self, call_id: str, result: object) -> bool:
        return False  # echo mode calls no tools

    def set_words(self, words: tuple[str, ...]) -> bool:
        raise NotSupported("a vocabulary needs agent mode (this server echoes what it hears)")

    async def aclose(self) -> None:
        self._utterance = None
