"""The embedded default: Whisper partials while the user speaks, the final decoded at the pause.

`WhisperStreamingASR(config)` loads one model; `.open()` gives an `AsrStream` per utterance.
The stream decodes on command and tracks no speech itself (`engines/asr/base.py`); every
decode is a full re-decode of the current segment (0.1-0.4 s for 1-8 s of speech on 2 cores,
see `whisper.py`):
- Partials (`feed`): every `partial_interval_s` of new audio, stretched so partial decoding
  takes at most `partial_cpu_share` of the stream's audio time.
- `pause()`: decodes everything fed so far unless the last decode already covers it, and
  returns the text. `decode_ahead(rest)` makes that decode early, on the audio fed plus
  `rest` (silence, not kept): it then covers the next `len(rest)` samples fed, and partials
  wait until audio beyond them comes. `finish()` returns that text without decoding again
  when nothing was fed since; otherwise it decodes the rest.
- A second opinion (`second_model`): a final decode (the pause's, the early one, the end's,
  a long segment's commit; never a partial) whose confidence is under `second_below` is
  decoded by the second model too, and the more confident text is kept.
- Noise (`noise_suppression`): each decode's audio passes WebRTC's noise suppressor first
  (`denoise.py`); what the endpointer and the turn model hear is untouched.
- Long speech: at a `pause()` past `max_segment_s` the text so far is committed and decoding
  continues on a new segment; past Whisper's window (`max_audio_s` minus 1 s) `feed` commits
  anyway. So any length works within Whisper's 30 s window.
- No hallucinated text: the endpointer opens a stream only for sound it calls speech; with
  `speech_gate`, no decode runs until silero-vad has heard speech in the utterance (`gate.py`:
  music and clicks get through the endpointer); Whisper's own no-speech rule
  (`WhisperRunner.accept`) drops what the model itself scores as no speech.

Thread safety: streams are independent; call one stream's methods from one thread at a time
(the server's per-session lane). The shared model serves many streams' threads concurrently.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from engines.asr.audio import SAMPLE_RATE, check_pcm16
from engines.asr.base import PauseText
from engines.asr.config import AsrConfig
from engines.asr.denoise import check_suppressor, suppress_noise
from engines.asr.errors import AsrModelLoadError, StreamClosedError
from engines.asr.gate import SpeechGate
from engines.asr.text import join_pieces
from engines.asr.whisper import load_runner
from engines.asr.whisper_runner import WhisperRunner

logger = logging.getLogger(__name__)


class WhisperStreamingASR:
    """One loaded Whisper model serving every session's streams."""

    def __init__(self, config: AsrConfig | None = None) -> None:
        self.config = config or AsrConfig()
        self.runner = load_runner(self.config)
        self.second = self._load_second()
        self.device_calls = self.runner.device_calls  # (engine_set.py)
        if self.config.speech_gate:
            from engines.vad.silero import load_silero

            load_silero()
        if self.config.noise_suppression:
            check_suppressor()

    def _load_second(self) -> WhisperRunner | None:
        """The second opinion's model (`second_model`); its errors name that key."""
        second = self.config.second
        if second is None:
            return None
        try:
            return load_runner(second)
        except AsrModelLoadError as exc:
            raise AsrModelLoadError(f"[asr] second_model: {exc}") from exc

    def open(self, prompt: str | None = None) -> WhisperStream:
        return WhisperStream(self.runner, self.config, self.second, prompt)

    def warm_up(self) -> None:
        """One decode of silence, so the first user does not pay the runtime's first-call cost."""
        for runner in (self.runner, self.second):
            if runner is not None:
                runner.decode(np.zeros(SAMPLE_RATE, dtype=np.int16))


class WhisperStream:
    """One utterance (see module docstring)."""

    def __init__(self, runner: WhisperRunner, config: AsrConfig,
                 second: WhisperRunner | None = None, prompt: str | None = None) -> None:
        self._runner = runner
        self._second = second
        self._cfg = config
        self._prompt = prompt  # this session's own (engines.asr.base); None: the configured
        self._committed = ""  # text of finished segments
        self._segment = np.zeros(0, dtype=np.int16)  # audio of the current segment
        self._chunks: list[np.ndarray] = []  # fed audio not yet merged into `_segment`
        self._fed = 0  # samples of the current segment (merged or not)
        self._committed_samples = 0  # samples of finished segments
        # (segment samples decoded, accepted text, its sentence-end probability if known,
        # its mean token probability)
        self._last: tuple[int, str, float | None, float] | None = None
        self._committed_confidence: float | None = None  # the least of finished segments'
        self._partial = ""
        self._next_partial_at = int(config.partial_interval_s * SAMPLE_RATE)
        self._window_limit = int((runner.max_audio_s - 1.0) * SAMPLE_RATE)
        self._gate = SpeechGate(config.speech_threshold) if config.speech_gate else None
        self._closed = False
        self.segments = 1  # segments decoded separately (long speech), for tests
        self.decodes = 0  # decode count, for benchmarks and tests
        self.second_opinions = 0  # finals the second model re-decoded ...
        self.second_kept = 0  # ... and of those, where its text was kept
        self.decode_seconds = 0.0
        self.partial_decode_seconds = 0.0
        self.last_decode_done = 0.0  # perf_counter() when the latest decode returned
        self.language = config.language  # the latest decode's language ("auto" resolved)

    # --- AsrStream -------------------------------------------------------------------------

    def feed(self, pcm16k: np.ndarray, partial: bool = True) -> str | None:
        """Add audio; return the new partial transcript when it changed (`partial=False`: no
        partial decode now, see engines.asr.base)."""
        if self._closed:
            raise StreamClosedError("feed() after finish()")
        pcm = check_pcm16(pcm16k)
        if pcm.size == 0:
            return None
        self._chunks.append(pcm)
        self._fed += pcm.shape[0]
        if self._gate is not None:
            self._gate.feed(pcm)
        if not self._speech_heard():
            return None
        if self._fed >= self._window_limit:
            self._decode(self._fed, final=True)
            self._commit()
        elif not partial:
            return None
        elif self._fed >= self._next_partial_at and not self._decoded_all():
            self._partial_took(self._decode(self._fed))
        text = self._text()
        if text == self._partial or not text:
            return None
        self._partial = text
        return text

    def pause(self) -> PauseText:
        """The user paused: decode what was fed (unless already decoded); return the text."""
        if self._closed or not self._speech_heard():
            return PauseText(self._text(), None, self._confidence())
        if self._fed and not self._decoded_all():
            self._decode(self._fed, final=True)
        end = self._last[2] if self._last is not None else None
        confidence = self._confidence()
        if self._fed >= self._cfg.max_segment_s * SAMPLE_RATE:
            self._commit()  # a pause is a safe place to cut: no word straddles it
        return PauseText(self._text(), end, confidence)

    def decode_ahead(self, rest: np.ndarray) -> PauseText | None:
        """A pause may be coming: decode what was fed and `rest` now (see the module doc);
        the text as the pause would return it, or None when it did not decode.

        It counts as a partial (its text is one): it shares their CPU cap, so where short
        gaps come often (speech in noise) the decode waits for the pause instead."""
        if self._closed or not self._speech_heard() or not self._fed:
            return None
        heard_s = (self._committed_samples + self._fed) / SAMPLE_RATE
        if self.partial_decode_seconds > self._cfg.partial_cpu_share * heard_s:
            return None
        self._partial_took(self._decode(self._fed, check_pcm16(rest), final=True))
        return PauseText(self._text(), self._last[2] if self._last is not None else None,
                         self._confidence())

    def finish(self) -> str:
        """End of speech: the final transcript ('' when nothing was said)."""
        if self._closed:
            raise StreamClosedError("finish() called twice")
        self._closed = True
        if self._fed and self._speech_heard() and not self._decoded_all():
            self._decode(self._fed, final=True)
        return self._text()

    # --- internals ---------------------------------------------------------------------------

    def _speech_heard(self) -> bool:
        return self._gate is None or self._gate.open

    def _decoded_all(self) -> bool:
        return self._last is not None and self._last[0] >= self._fed

    def _audio(self) -> np.ndarray:
        if self._chunks:
            self._segment = np.concatenate([self._segment, *self._chunks])
            self._chunks = []
        return self._segment

    def _decode(self, n: int, rest: np.ndarray | None = None, final: bool = False) -> float:
        """Decode the segment's first `n` samples (and `rest` after them, not kept); a
        `final` (text that may be answered) the first model is unsure of, the second model
        too, keeping the surer (config.second_model). Returns the seconds spent."""
        audio = self._audio()[:n]
        if rest is not None and rest.size:
            audio, n = np.concatenate([audio, rest]), n + rest.shape[0]
        start = time.perf_counter()
        audio = suppress_noise(audio, self._cfg.noise_suppression)
        cleaned = time.perf_counter() - start
        decoded = self._runner.decode(audio, prompt=self._prompt)
        seconds = cleaned + decoded.seconds
        text = self._runner.accept(decoded, self._prompt)
        self.decodes += 1
        if (final and self._second is not None and text
                and math.exp(decoded.avg_logprob) < self._cfg.second_below):
            other = self._second.decode(audio, language=decoded.language, prompt=self._prompt)
            other_text = self._second.accept(other, self._prompt)
            seconds += other.seconds
            self.second_opinions += 1
            if other_text and other.avg_logprob > decoded.avg_logprob:
                logger.debug("second model: %r (%.2f) over %r (%.2f)", other_text,
                             math.exp(other.avg_logprob), text, math.exp(decoded.avg_logprob))
                decoded, text = other, other_text
                self.second_kept += 1
        self.decode_seconds += seconds
        self.last_decode_done = time.perf_counter()
        self.language = decoded.language
        # The end probability was measured as a turn signal on English only (policy.py).
        end = decoded.end_probability if decoded.language == "en" else None
        self._last = (n, text, end, math.exp(decoded.avg_logprob))
        return seconds

    def _partial_took(self, seconds: float) -> None:
        """Account a partial's decode and stretch the cadence to keep within the CPU cap."""
        self.partial_decode_seconds += seconds
        interval = max(self._cfg.partial_interval_s, seconds / self._cfg.partial_cpu_share)
        self._next_partial_at = self._fed + int(interval * SAMPLE_RATE)

    def _confidence(self) -> float | None:
        """The words' confidence: the least of the segments' with text (None: no words)."""
        known = [c for c in (self._committed_confidence,
                             self._last[3] if self._last and self._last[1] else None)
                 if c is not None]
        return min(known) if known else None

    def _text(self) -> str:
        return join_pieces(self._committed, self._last[1] if self._last else "")

    def _commit(self) -> None:
        """Freeze the decoded text; go on with the audio after it as a new segment."""
        assert self._last is not None
        extent = min(self._last[0], self._fed)  # (a decode ahead may reach past the audio)
        self._committed = self._text()
        self._committed_confidence = self._confidence()
        self.segments += 1
        logger.debug("committed %.2f s of audio", extent / SAMPLE_RATE)
        self._segment = self._audio()[extent:].copy()
        self._fed -= extent
        self._committed_samples += extent
        self._last = None
        self._next_partial_at = self._fed + int(self._cfg.partial_interval_s * SAMPLE_RATE)
