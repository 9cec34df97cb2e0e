"""Options of voice activity detection and endpointing (`[vad]` in the server's TOML).

Defaults are the embedded offline default: webrtcvad, 20 ms frames, a pause after 200 ms of
silence (where the ASR decodes ahead and a turn model, `[turn]`, is asked whether the user is
done) and, without a turn model, the end after 400 ms of silence.
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.vad.errors import InvalidVadConfigError

SAMPLE_RATE = 16000


FRAME_MS = (10, 20, 30)  # the analysis frames webrtcvad accepts


@dataclass(frozen=True)
class VadConfig:
    aggressiveness: int = 2  # webrtcvad mode 0..3; higher rejects more noise (and soft speech)
    frame_ms: int = 20  # analysis frame: 10, 20 or 30 ms (webrtcvad's accepted sizes)
    min_speech_ms: int = 150  # voiced audio needed before SpeechStarted (rejects clicks, coughs)
    start_gap_ms: int = 100  # unvoiced gap that resets a not-yet-confirmed onset
    pause_ms: int = 200  # silence inside an utterance that makes a SpeechPaused
    # Start the pause's ASR decode this far into a silence, the rest of `pause_ms` padded with
    # the room's sound from the pre-roll (engines/asr/ahead.py), so its text is ready at the
    # pause; 0 = at it
    decode_ahead_ms: int = 80
    end_silence_ms: int = 400  # silence (hangover) before SpeechEnded when there is no turn model
    max_utterance_s: float = 30.0  # forced SpeechEnded after this much speech
    pre_roll_ms: int = 500  # audio kept before the onset so the first syllable is not lost
    noise_gate_db: float = 6.0  # frames must be this far above the noise floor (0 = no gate)
    silero_confirm: bool = False  # also require silero-vad (ONNX) to hear speech in each frame
    silero_threshold: float = 0.5  # silero speech probability counted as speech

    def __post_init__(self) -> None:
        if self.aggressiveness not in (0, 1, 2, 3):
            raise InvalidVadConfigError("aggressiveness must be 0, 1, 2 or 3")
        if self.frame_ms not in FRAME_MS:
            raise InvalidVadConfigError("frame_ms must be 10, 20 or 30")
        for name in ("min_speech_ms", "start_gap_ms", "pause_ms", "end_silence_ms", "pre_roll_ms"):
            if getattr(self, name) < 0:
                raise InvalidVadConfigError(f"{name} must be >= 0")
        if self.pause_ms < self.frame_ms:
            raise InvalidVadConfigError("pause_ms must be at least one frame")
        if not 0 <= self.decode_ahead_ms < self.pause_ms:
            raise InvalidVadConfigError("decode_ahead_ms must be in [0, pause_ms)")
        if self.end_silence_ms <= self.pause_ms:
            raise InvalidVadConfigError("end_silence_ms must be longer than pause_ms")
        if self.max_utterance_s <= 0:
            raise InvalidVadConfigError("max_utterance_s must be > 0")
        if self.noise_gate_db < 0:
            raise InvalidVadConfigError("noise_gate_db must be >= 0")
        if not 0.0 < self.silero_threshold < 1.0:
            raise InvalidVadConfigError("silero_threshold must be in (0, 1)")

    @property
    def frame_samples(self) -> int:
        return SAMPLE_RATE * self.frame_ms // 1000
