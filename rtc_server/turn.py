"""One agent Turn: the unit that is cancelled as a whole, and what it records.

A Turn knows its user text, its latency marks (clock times), and the chunks it scheduled
(text, playout tag, duration), so that after it ends, for whatever reason, the history keeps
only what the user actually heard (the audio track's per-tag sample counts).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from media.playout import Playout

# Stage order for the data channel and the page's latency panel.
STAGES = (
    "voice_end", "speech_end", "asr_final", "llm_first_token", "first_chunk",
    "tts_first_audio", "face_first_frame", "first_audio_sent",
)
_FULLY_PLAYED_SLACK_S = 0.06


@dataclass
class SpokenChunk:
    text: str
    tag: str
    duration_s: float
    at: float  # clock time its first sample plays


@dataclass
class Turn:
    id: int
    user_text: str
    utterance_id: int | None = None  # None for the greeting
    speculative: bool = False  # started on a partial at a pause; waits for `gate`
    marks: dict[str, float] = field(default_factory=dict)
    chunks: list[SpokenChunk] = field(default_factory=list)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    failed: bool = False

    def mark(self, stage: str, t: float) -> None:
        """Record the first time a stage is reached (later calls are ignored)."""
        self.marks.setdefault(stage, t)

    @property
    def started_speaking(self) -> bool:
        return bool(self.chunks)

    def timings_ms(self) -> dict[str, float]:
        """Marks in ms after `speech_end` (the greeting: after the turn began)."""
        zero = self.marks.get("speech_end", self.marks.get("turn_start", 0.0))
        ordered = [s for s in STAGES if s in self.marks]
        ordered += [s for s in self.marks if s not in STAGES and s != "turn_start"]
        return {s: round((self.marks[s] - zero) * 1000.0, 1) for s in ordered}

    def heard_text(self, playout: Playout) -> str:
        """The answer up to where playback stopped (whole words, proportional in a chunk)."""
        words: list[str] = []
        for chunk in self.chunks:
            played = playout.played_s(chunk.tag)
            if played >= chunk.duration_s - _FULLY_PLAYED_SLACK_S:
                words.extend(chunk.text.split())
                continue
            if played > 0:
                chunk_words = chunk.text.split()
                words.extend(chunk_words[: int(len(chunk_words) * played / chunk.duration_s)])
            break
        return " ".join(words)
