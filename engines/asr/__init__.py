"""Streaming speech recognition.

`create_asr(config)` loads the engine named by `config.engine` (heavy packages are imported
only then): "faster-whisper" (embedded offline default, `streaming.py`) or "funasr"
(Paraformer streaming, `funasr_paraformer.py`). The returned `StreamingASR` is shared by all
sessions; `open()` gives a per-utterance `AsrStream`.
"""

from __future__ import annotations

from engines.asr.base import AsrStream, PauseText, StreamingASR
from engines.asr.config import AsrConfig


def create_asr(config: AsrConfig | None = None) -> StreamingASR:
    """Load the configured engine (blocking: seconds; call once at start-up)."""
    config = config or AsrConfig()
    if config.engine == "funasr":
        from engines.asr.funasr_paraformer import FunAsrStreamingASR

        return FunAsrStreamingASR(config)
    from engines.asr.streaming import WhisperStreamingASR

    return WhisperStreamingASR(config)


__all__ = ["AsrConfig", "AsrStream", "PauseText", "StreamingASR", "create_asr"]
