"""Streaming speech recognition contract.

One loaded model (`StreamingASR`) serves all sessions; each utterance gets its own `AsrStream`.
Audio is 16 kHz mono int16 (NumPy). Calls block: the server runs them in an executor. Calls to
one stream must not overlap (one lane per session); different streams may run concurrently.

A stream runs no voice activity detection of its own: the endpointer (`engines.vad`) decides
where speech starts, pauses and ends, and the caller drives the stream with it:
- `feed(pcm)` while the user speaks; returns a new partial transcript now and then (at a
  cadence the engine bounds by its CPU use), else None. `partial=False` only takes the audio:
  the caller feeds the silence after a word that way, since a partial decode started there
  would hold up the pause decode due a few frames later (an engine that decodes as it goes
  may ignore it);
- `pause()` when the endpointer reports a pause: decode what was fed, now, and return the
  stable text (the LLM may start on it) with the engine's probability that a sentence ends
  there, when it has one (the end-of-turn decision weighs it, `engines/turn/policy.py`);
- `decode_ahead(rest)` a little into a silence, before it is a pause: decode what was fed
  plus `rest` (the pause's missing silence; not kept), so that a `pause()` once that much
  more silence has been fed returns at once (`engines/asr/ahead.py`); returns that text with
  its end probability, as `pause()` would (None when it did not decode), which the caller may
  start the answer on, or end a sure turn with, before the pause. An engine that decodes as it
  goes may ignore it and return None;
- `finish()` at the end: the final transcript. When nothing was fed since `pause()`, this is
  the pause's text without decoding again (so the caller feeds no more of a pause's
  silence; when speech resumes it goes on feeding from there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class PauseText:
    text: str
    end_probability: float | None = None  # a sentence ends here; None = the engine can't tell
    # How sure the engine is of the words: Whisper's mean token probability (the exponent of
    # its average log-probability), the least of the utterance's segments; None = can't tell
    confidence: float | None = None


class AsrStream(Protocol):
    def feed(self, pcm16k: np.ndarray, partial: bool = True) -> str | None:
        """Add audio; return the new partial transcript when it changed, else None. With
        `partial=False` no partial decode (a full window is still committed)."""
        ...

    def pause(self) -> PauseText:
        """The user paused: transcribe everything fed so far now; return that text."""
        ...

    def decode_ahead(self, rest: np.ndarray) -> PauseText | None:
        """Decode what was fed plus `rest` now, for a pause that may come (see above); the
        text and its end probability, or None when nothing was decoded."""
        ...

    def finish(self) -> str:
        """End of speech: return the final transcript ('' for no speech)."""
        ...


class StreamingASR(Protocol):
    def open(self, prompt: str | None = None) -> AsrStream:
        """A stream for one utterance. `prompt`: the words this session's speaker is likely
        to say (the deployment's and the embedding app's names, `engines/text/vocabulary.py`)
        instead of the configured prompt; an engine that takes no prompt ignores it."""
        ...
