"""Voice activity detection and endpointing.

`create_vad(config)` gives a per-stream detector (webrtcvad behind a noise-floor gate,
optionally confirmed by silero-vad); `create_endpointer(config)` gives a per-stream
`Endpointer` that turns 16 kHz int16 frames into `SpeechStarted` / `SpeechPaused` /
`SpeechResumed` / `SpeechEnded` events (with a turn model deciding the end through
`Endpointer.verdict`, see `endpointer.py`). Both are cheap to create; the silero ONNX session,
when used, is loaded once per process and shared (`load_vad_models` loads it up front).
"""

from __future__ import annotations

from engines.vad.base import (
    EndReason,
    SpeechEnded,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    VadEvent,
    VoiceActivityDetector,
)
from engines.vad.config import SAMPLE_RATE, VadConfig
from engines.vad.endpointer import Endpointer


def create_vad(config: VadConfig | None = None) -> VoiceActivityDetector:
    """A new detector for one stream (webrtcvad keeps per-stream noise statistics)."""
    config = config or VadConfig()
    from engines.vad.webrtc import WebRtcVad

    detector: VoiceActivityDetector = WebRtcVad(config.aggressiveness)
    if config.noise_gate_db > 0:
        from engines.vad.gate import NoiseFloorGate

        detector = NoiseFloorGate(detector, config.noise_gate_db)
    if config.silero_confirm:
        from engines.vad.silero import SileroConfirmedVad

        detector = SileroConfirmedVad(detector, config.silero_threshold)
    return detector


def load_vad_models(config: VadConfig | None = None) -> None:
    """Load shared models now (server start-up) rather than in the first session."""
    config = config or VadConfig()
    if config.silero_confirm:
        from engines.vad.silero import load_silero

        load_silero()


def create_endpointer(
    config: VadConfig | None = None, detector: VoiceActivityDetector | None = None,
    max_silence_ms: int | None = None,
) -> Endpointer:
    """A new Endpointer for one stream; `detector` defaults to `create_vad(config)`.

    `max_silence_ms` set = a turn model decides the end (`Endpointer.verdict`), and this much
    silence ends the utterance without its "complete"; None = the fixed hangover.
    """
    config = config or VadConfig()
    detector = detector if detector is not None else create_vad(config)
    return Endpointer(config, detector, max_silence_ms)


__all__ = [
    "SAMPLE_RATE",
    "EndReason",
    "Endpointer",
    "SpeechEnded",
    "SpeechPaused",
    "SpeechResumed",
    "SpeechStarted",
    "VadConfig",
    "VadEvent",
    "VoiceActivityDetector",
    "create_endpointer",
    "create_vad",
    "load_vad_models",
]
