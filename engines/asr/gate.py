"""Speech gate per utterance: no decode runs until silero-vad has heard some speech in it.

Not a pause detector (the endpointer alone decides pauses and ends): the gate only answers
"was there any speech in this utterance at all". Why it is still needed: the endpointer
(webrtcvad behind a noise-floor gate) opens utterances for music and trains of clicks, and on
those Whisper base writes confident sentences ("I'm gonna go to the next room.", "This video
is sponsored by ...") that its own no-speech rule keeps (no-speech probability 0.50-0.56);
silero scored 0 of ~190 chunks of them as speech, and 58-62% of the chunks of a spoken
sentence (measured; bench/RESULTS.md, section asr). Cost: ~0.3 ms per 32 ms chunk, on the
ASR lane, not the event loop. Babble is speech to silero too; Whisper's rule is what drops
most of it.
"""

from __future__ import annotations

import numpy as np

from engines.asr.audio import SAMPLE_RATE

MIN_SPEECH_MS = 96  # speech heard = 3 silero chunks (32 ms) above the threshold


class SpeechGate:
    def __init__(self, threshold: float = 0.5) -> None:
        from engines.vad.silero import CHUNK_SAMPLES, SileroStream

        self._silero = SileroStream()
        self._threshold = threshold
        self._needed = -(-MIN_SPEECH_MS * SAMPLE_RATE // 1000 // CHUNK_SAMPLES)
        self._speech_chunks = 0

    @property
    def open(self) -> bool:
        return self._speech_chunks >= self._needed

    def feed(self, pcm: np.ndarray) -> None:
        if self.open:
            return  # decided: no need to keep scoring
        probs = self._silero.chunk_probabilities(pcm)
        self._speech_chunks += sum(p >= self._threshold for p in probs)
