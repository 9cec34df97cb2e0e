"""Text -> voice and lips: the one speaking path, shared by the live agent and the offline
renderer (`python -m media.avatar render`), so one text gives the same lips in both.

- `SpokenChunks`: answer text, whole or streamed, -> the chunks the voice says (code, web
  addresses and markdown dropped by `SpokenFilter`, then the clause chunker; the first chunk
  short, for early first audio; with `max_sentences` the answer ends at that sentence). Fed
  token by token or all at once, it gives the same chunks;
- `speak(tts, text)`: normalized text -> one `Speech` (the TTS's sentences joined), or None
  when there is nothing to say. The voice's own silence is cut to what the chunk's end calls
  for (`chunk_pauses`): a chunk cut in mid-clause is followed by its next words as in one
  sentence, and the first sound of an answer is not delayed by a voice's lead-in;
- `lips(offsets, smoother, fps)`: the face model's landmark offsets (its own 25 fps) ->
  smoothed offsets at the video's fps. The whole chunk is known before it plays, so it is
  smoothed both ways (zero phase): a causal Kalman filter alone delays the mouth by about a
  frame (measured 40 ms). The forward pass continues `smoother`'s state (one per turn: each
  answer starts from the neutral face and flows across its chunks); the backward pass
  starts fresh;
- `word_starts(speech)`: where its words begin (s), the points an interrupted answer can
  resume from: after each pause of its phoneme timings, or, for a voice that gives none
  (Kokoro), after each pause in its audio.

The face model call itself is not here: live it may be batched across sessions.
"""

from __future__ import annotations

import numpy as np

from engines.face.features import FPS as FACE_FPS
from engines.face.features import resample_frames
from engines.face.smoothing import KalmanSmoother
from engines.text.chunker import (
    CLAUSE_ENDS,
    CLOSERS,
    FIRST_CHUNK_MAX_CHARS,
    SENTENCE_ENDS,
    Chunker,
    ChunkerConfig,
)
from engines.text.normalize import normalize
from engines.text.spoken import SpokenFilter
from engines.tts.base import QUIET_FLOOR, TTS, Speech, join_speech, trim_silence
from engines.tts.phonemes import SILENCE


class SpokenChunks:
    def __init__(
        self, first_max_chars: int = FIRST_CHUNK_MAX_CHARS, max_sentences: int = 0,
        growth: float = 0.0,
    ) -> None:
        self._spoken = SpokenFilter()
        self._chunker = Chunker(ChunkerConfig(
            first_max_chars=first_max_chars, max_sentences=max_sentences, growth=growth,
        ))

    @property
    def done(self) -> bool:
        """`max_sentences` were said: the rest is dropped, the source may stop."""
        return self._chunker.closed

    def push(self, delta: str) -> list[str]:
        return self._chunker.push(self._spoken.push(delta))

    def flush(self) -> list[str]:
        return [*self._chunker.push(self._spoken.flush()), *self._chunker.flush()]

    @property
    def pending_size(self) -> int:
        """Size of the text that has passed the filter and waits to be a chunk."""
        return self._chunker.pending_size

    def cut(self, min_chars: int = 8) -> list[str]:
        """What has passed the filter, as a chunk now (`Chunker.cut`)."""
        return self._chunker.cut(min_chars)

    def all(self, text: str) -> list[str]:
        """A whole text's chunks (then the instance is spent)."""
        return [*self.push(text), *self.flush()]


# Silence kept around a chunk's sound (ms): before it; after it by how the chunk ends. A
# sentence keeps the voice's own final pause (piper: ~150-250 ms); a clause about a comma's
# pause inside a sentence; words cut at a space about a gap between words, so that with the
# next chunk's lead-in two chunks sound like one sentence rather than two.
LEAD_MS = 10.0
CLAUSE_TRAIL_MS = 120.0
WORDS_TRAIL_MS = 30.0


def ends_sentence(text: str) -> bool:
    """Whether chunk `text` ends a sentence (or a line: a list item, a heading)."""
    end = text.rstrip().rstrip(CLOSERS)[-1:]
    return not end or end in SENTENCE_ENDS or text.rstrip(" \t").endswith("\n")


def chunk_pauses(text: str) -> tuple[float, float | None]:
    """(lead, trail) silence to keep around the speech of chunk `text` (None: the voice's)."""
    if ends_sentence(text):
        return LEAD_MS, None
    end = text.rstrip().rstrip(CLOSERS)[-1:]
    return LEAD_MS, CLAUSE_TRAIL_MS if end in CLAUSE_ENDS else WORDS_TRAIL_MS


def speak(tts: TTS, text: str) -> Speech | None:
    spoken = normalize(text).strip()
    if not spoken:
        return None
    parts = [p for p in tts.synthesize(spoken) if len(p.pcm)]
    if not parts:
        return None
    lead, trail = chunk_pauses(text)
    return trim_silence(join_speech(parts, text.strip()), lead_ms=lead, trail_ms=trail)


def lips(offsets: np.ndarray, smoother: KalmanSmoother | None, fps: int) -> np.ndarray:
    offsets = np.asarray(offsets, np.float32)
    if smoother is not None and len(offsets):
        forward = smoother.smooth(offsets)
        backward = smoother.fresh().smooth(offsets[::-1])[::-1]
        offsets = (forward + backward) / 2
    return resample_frames(offsets, FACE_FPS, fps)


# A voice without timings: a quiet stretch this long is a pause between words or clauses
# (Kokoro's gaps between Chinese words are 40-80 ms; a syllable's closure is shorter).
PAUSE_MS = 40.0


def word_starts(speech: Speech) -> tuple[float, ...]:
    """Start times (s) of the words: 0 and the end of every gap between phonemes (or, with
    no phoneme timings, of every pause in the audio)."""
    starts = [0.0]
    if not speech.phonemes:
        return tuple([*starts, *audio_pause_ends(speech.pcm, speech.sample_rate)])
    for p in speech.phonemes:
        if p.phoneme == SILENCE and p.end_ms / 1000 < speech.duration_s:
            starts.append(p.end_ms / 1000)
    return tuple(sorted(set(starts)))


def audio_pause_ends(pcm: np.ndarray, sample_rate: int) -> list[float]:
    """Where sound resumes (s) after each quiet stretch of at least `PAUSE_MS` (10 ms
    frames 40 dB under the loudest, or under `trim_silence`'s floor), the audio's start and
    end excluded."""
    frame = max(sample_rate // 100, 1)
    n = len(pcm) // frame
    if n == 0:
        return []
    frames = pcm[: n * frame].astype(np.float32).reshape(n, frame)
    rms = np.sqrt(np.mean(frames * frames, axis=1))
    # 40 dB under the loudest frame: Kokoro's pause between clauses keeps a faint breath
    loud = rms > max(QUIET_FLOOR, 0.01 * float(rms.max()))
    ends: list[float] = []
    quiet_run, seen_sound = 0, False
    for i, is_loud in enumerate(loud):
        if not is_loud:
            quiet_run += 1
            continue
        if seen_sound and quiet_run * 10 >= PAUSE_MS:
            ends.append(i * frame / sample_rate)
        quiet_run, seen_sound = 0, True
    return ends
