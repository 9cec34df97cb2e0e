"""Streaming speech recognition contract.

One loaded model (`StreamingASR`) serves all sessions; each utterance gets its own `AsrStream`.
Audio is 16 kHz mono int16 (NumPy). Calls block: the server runs them in an executor. Calls to
one stream must not overlap (one lane per session); different streams may run concurrently.

Optional extra (look it up with `getattr`): `AsrStream.pause_hint() -> str`, called when the
endpointer sees the user pause; the stream may decode ahead then, so `finish()` has little
left to do, and returns the transcript so far.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class AsrStream(Protocol):
    def feed(self, pcm16k: np.ndarray) -> str | None:
        """Add audio; return the new partial transcript when it changed, else None."""
        ...

    def finish(self) -> str:
        """End of speech: return the final transcript ('' for no speech)."""
        ...


class StreamingASR(Protocol):
    def open(self) -> AsrStream: ...
