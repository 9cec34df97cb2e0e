"""Per-stream speech tracking for the ASR: was speech heard, and where did it last end.

silero-vad (ONNX, shared session, ~0.3 ms per 32 ms chunk) decides both when enabled: it
rejects steady noise and keeps Whisper from transcribing noise or silence. Without it the
project's webrtcvad detector (with its noise-floor gate) stands in.
"""

from __future__ import annotations

import numpy as np

from engines.asr.audio import SAMPLE_RATE

_MIN_SPEECH_MS = 96  # speech heard = this much speech-like audio (3 silero chunks)
_FRAME = SAMPLE_RATE * 20 // 1000  # webrtcvad frame when silero is off


class SpeechTracker:
    def __init__(self, use_silero: bool, threshold: float = 0.5) -> None:
        self.samples = 0  # samples fed so far
        self.speech_end = 0  # sample index where the last speech-like audio ended
        self.speech_samples = 0  # speech-like samples so far
        self._threshold = threshold
        if use_silero:
            from engines.vad.silero import CHUNK_SAMPLES, SileroStream

            self._silero: SileroStream | None = SileroStream()
            self._step = CHUNK_SAMPLES
        else:
            from engines.vad import create_vad

            self._silero = None
            self._vad = create_vad()
            self._step = _FRAME
        self._done = 0  # samples judged (whole steps)
        self._pending = np.zeros(0, dtype=np.int16)

    @property
    def heard_speech(self) -> bool:
        return self.speech_samples * 1000 >= _MIN_SPEECH_MS * SAMPLE_RATE

    @property
    def speaking(self) -> bool:
        """The latest judged chunk was speech."""
        return self._done > 0 and self.speech_end == self._done

    def feed(self, pcm: np.ndarray) -> None:
        self.samples += pcm.shape[0]
        if self._silero is not None:
            decisions = [p >= self._threshold for p in self._silero.chunk_probabilities(pcm)]
        else:
            buf = np.concatenate([self._pending, pcm])
            n = buf.shape[0] // _FRAME * _FRAME
            decisions = [self._vad.is_speech(buf[i : i + _FRAME]) for i in range(0, n, _FRAME)]
            self._pending = buf[n:]
        for speech in decisions:
            self._done += self._step
            if speech:
                self.speech_end = self._done
                self.speech_samples += self._step
