"""The embedded default: Whisper partials while the user speaks, the final decoded ahead.

`WhisperStreamingASR(config)` loads one model; `.open()` gives an `AsrStream` per utterance.

How a stream spends its decodes (each is a full re-decode of the utterance so far, 0.1-0.4 s
for 1-8 s of speech on 2 cores, see `whisper.py`):
- Partials: once speech was heard, every `partial_interval_s` of new audio, stretched so
  partial decoding takes at most `partial_cpu_share` of the stream's wall time.
- Decode ahead: when the stream's own speech tracker sees `decode_ahead_ms` of silence after
  speech, it decodes the utterance up to that point at once (or when the caller calls the
  optional `pause_hint()`). If only silence follows, `finish()` returns that result without
  decoding again, so the final is ready before (or soon after) the endpointer's 400 ms
  hangover expires.
- Long speech: past `max_segment_s` the text is committed at the next pause (or at the window
  limit) and decoding continues on the rest, so any length works within Whisper's 30 s window.
- No speech: the speech tracker (silero-vad, optional) must hear speech, else `finish()`
  returns '' without decoding: Whisper invents text ("Thank you.") on noise and silence.

Thread safety: streams are independent; call one stream's methods from one thread at a time
(the server's per-session lane). The shared model serves many streams' threads concurrently.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from engines.asr.audio import SAMPLE_RATE, check_pcm16
from engines.asr.config import AsrConfig
from engines.asr.errors import StreamClosedError
from engines.asr.speech import SpeechTracker
from engines.asr.text import join_pieces
from engines.asr.whisper import Decoded, WhisperModelRunner

logger = logging.getLogger(__name__)

# A decode that reaches this far past the last speech chunk is final if only silence follows
# (silero judges 32 ms chunks and lags a chunk or two on fading word ends).
_REUSE_MARGIN_MS = 100


class WhisperStreamingASR:
    """One loaded Whisper model serving every session's streams."""

    def __init__(self, config: AsrConfig | None = None) -> None:
        self.config = config or AsrConfig()
        self.runner = WhisperModelRunner(self.config)
        if self.config.speech_gate:
            from engines.vad.silero import load_silero

            load_silero()

    def open(self) -> WhisperStream:
        return WhisperStream(self.runner, self.config)

    def warm_up(self) -> None:
        """One decode of silence, so the first user does not pay CTranslate2's first-call cost."""
        self.runner.decode(np.zeros(SAMPLE_RATE, dtype=np.int16))


class WhisperStream:
    """One utterance (see module docstring)."""

    def __init__(self, runner: WhisperModelRunner, config: AsrConfig) -> None:
        self._runner = runner
        self._cfg = config
        self._committed = ""  # text of finished segments
        self._segment = np.zeros(0, dtype=np.int16)  # audio of the current segment
        self._chunks: list[np.ndarray] = []  # fed audio not yet merged into `_segment`
        self._seg_start = 0  # stream sample index where the current segment starts
        self._tracker = SpeechTracker(config.speech_gate, config.speech_threshold)
        self._last: tuple[int, str] | None = None  # (samples decoded, accepted text)
        self._partial = ""
        self._next_partial_at = int(config.partial_interval_s * SAMPLE_RATE)
        self._closed = False
        self.decodes = 0  # decode count, for benchmarks and tests
        self.decode_seconds = 0.0
        self._last_seconds = 0.0
        self.last_decode_done = 0.0  # perf_counter() when the latest decode returned

    # --- AsrStream -------------------------------------------------------------------------

    def feed(self, pcm16k: np.ndarray) -> str | None:
        """Add audio; return the new partial transcript when it changed."""
        if self._closed:
            raise StreamClosedError("feed() after finish()")
        pcm = check_pcm16(pcm16k)
        if pcm.size == 0:
            return None
        self._chunks.append(pcm)
        self._tracker.feed(pcm)
        n = self._tracker.samples - self._seg_start
        if not self._speech_in_segment():
            return None
        if n >= self._cfg.max_segment_s * SAMPLE_RATE:
            self._maybe_commit(n)
        if self._pausing():
            if not self._final_ready():
                self._decode(self._speech_extent())  # decode ahead: likely the final
        elif n >= self._next_partial_at and self._tracker.speaking:
            # Only while speech goes on: a partial started in a pause would delay the decode
            # ahead (and the final) by a whole decode.
            self._decode(n)
            interval = max(
                self._cfg.partial_interval_s,
                self._last_seconds / self._cfg.partial_cpu_share,
            )
            self._next_partial_at = n + int(interval * SAMPLE_RATE)
        text = self._text()
        if text == self._partial or not text:
            return None
        self._partial = text
        return text

    def pause_hint(self) -> str:
        """Optional: the caller's endpointer saw the user pause; decode what we have now.

        Returns the transcript so far (after this decode), which a caller may use to start
        work early. Useful when the caller's pause detection comes before the stream's own
        (`decode_ahead_ms` of silence by silero); costs one decode, none if nothing new
        was heard since the last one.
        """
        if self._closed or not self._speech_in_segment() or self._final_ready():
            return self._text()
        self._decode(self._tracker.samples - self._seg_start)
        return self._text()

    def finish(self) -> str:
        """End of speech: the final transcript ('' when no speech was heard)."""
        if self._closed:
            raise StreamClosedError("finish() called twice")
        self._closed = True
        if not self._speech_in_segment():
            return self._committed
        if not self._final_ready():
            self._decode(self._speech_extent())
        return self._text()

    # --- internals ---------------------------------------------------------------------------

    def _speech_in_segment(self) -> bool:
        """Speech was heard (at all, and in the current segment after a commit)."""
        return self._tracker.heard_speech and self._tracker.speech_end > self._seg_start

    def _audio(self, n: int) -> np.ndarray:
        if self._chunks:
            self._segment = np.concatenate([self._segment, *self._chunks])
            self._chunks = []
        return self._segment[:n]

    def _speech_extent(self) -> int:
        """Segment samples worth decoding: up to the last speech plus `decode_ahead_ms`."""
        seg_start = self._seg_start
        end = self._tracker.speech_end - seg_start + self._cfg.decode_ahead_ms * SAMPLE_RATE // 1000
        return max(0, min(end, self._tracker.samples - seg_start))

    def _final_ready(self) -> bool:
        """True if the last decode holds all speech heard (plus a margin): only silence since."""
        if self._last is None:
            return False
        margin = _REUSE_MARGIN_MS * SAMPLE_RATE // 1000
        needed = min(self._tracker.speech_end - self._seg_start + margin, self._speech_extent())
        return self._last[0] >= needed

    def _pausing(self) -> bool:
        silence = self._tracker.samples - self._tracker.speech_end
        return silence * 1000 >= self._cfg.decode_ahead_ms * SAMPLE_RATE

    def _decode(self, n: int) -> None:
        decoded: Decoded = self._runner.decode(self._audio(n))
        self.decodes += 1
        self.decode_seconds += decoded.seconds
        self._last_seconds = decoded.seconds
        self.last_decode_done = time.perf_counter()
        self._last = (n, self._runner.accept(decoded))

    def _text(self) -> str:
        return join_pieces(self._committed, self._last[1] if self._last else "")

    def _maybe_commit(self, n: int) -> None:
        """Past `max_segment_s`: commit at a pause, or anyway near Whisper's window limit."""
        limit = int(self._runner.max_audio_s * SAMPLE_RATE) - SAMPLE_RATE
        pausing = self._pausing()
        if not pausing and n < limit:
            return
        extent = self._speech_extent() if pausing else n
        if not (pausing and self._final_ready()):
            self._decode(extent)
        extent = self._last[0] if self._last else extent
        self._committed = self._text()
        logger.debug("committed %.2f s of audio", extent / SAMPLE_RATE)
        self._segment = self._audio(n)[extent:].copy()
        self._seg_start += extent
        self._last = None
        self._next_partial_at = self._segment.shape[0] + int(
            self._cfg.partial_interval_s * SAMPLE_RATE
        )
