"""TTS engines: text chunk -> `Speech` (int16 PCM, sample rate, phoneme timings).

`create_tts(config)` picks the implementation from `config.engine` ("piper" default,
"kokoro" for Mandarin and more natural English, "espeak" fallback); heavy packages load lazily
inside the implementation modules.
"""

from __future__ import annotations

from engines.tts.base import TTS, PhonemeTiming, Speech
from engines.tts.config import TTSConfig
from engines.tts.errors import InvalidInputError

__all__ = ["TTS", "PhonemeTiming", "Speech", "TTSConfig", "create_tts"]


def create_tts(config: TTSConfig | None = None) -> TTS:
    """Build the configured TTS engine (loads its voice now)."""
    config = config or TTSConfig()
    if config.engine in ("piper", "auto"):  # "auto" unresolved (no measurement): piper
        from engines.tts.piper_tts import PiperTTS

        return PiperTTS(
            config.voice_model, config.voice_config, speed=config.speed,
            use_cuda=config.use_cuda, threads=config.threads, runtime=config.runtime,
            device=config.device,
        )
    if config.engine == "kokoro":
        from engines.tts.kokoro import DEFAULT_VOICE, KokoroTTS

        return KokoroTTS(
            config.voice or DEFAULT_VOICE, speed=config.speed, threads=config.kokoro_threads,
            sessions=config.kokoro_sessions, optimization=config.kokoro_optimization,
            max_tokens=config.kokoro_max_tokens,
        )
    if config.engine == "espeak":
        from engines.tts.espeak import EspeakTTS

        return EspeakTTS(config.espeak_voice, speed=config.speed, pitch=config.pitch)
    raise InvalidInputError(f"unknown tts engine {config.engine!r} (auto, piper, kokoro, espeak)")
