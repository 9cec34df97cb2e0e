"""faster-whisper (CTranslate2 Whisper) decoding with a context cut to the utterance.

Contract: `WhisperModelRunner.decode(pcm16k, language)` -> `Decoded` (text, language, no-speech
probability, average token log-probability, sentence-end probability, seconds spent). One
instance per process serves every stream: the CTranslate2 model is thread-safe (concurrent
calls queue for `num_workers` workers, each using `cpu_threads`), the feature extractor is a
pure NumPy function and the tokenizers only encode the prompt and decode. `WhisperRunner`
(`whisper_runner.py`) is what it shares with the torch runtime (`torch_whisper.py`, `[asr]
runtime = "torch"`): the window, prompts, length limit, text and acceptance rules;
`load_runner(config)` picks one.

Languages (`AsrConfig.language`): "en", "zh" or "auto" (detected by Whisper from the same
encoder pass, so it costs one extra decoder step, not a second encode). Chinese is decoded with
a Simplified-Chinese initial prompt: without one, Whisper base writes Traditional characters
about as often as Simplified ones (measured on synthetic speech). English-only models
(tiny.en) take only "en".

Why not `WhisperModel.transcribe`: it always pads audio to Whisper's 30 s window, so the
encoder costs the same ~0.7 s (2 cores) for a 1 s utterance as for 30 s. CTranslate2 accepts a
shorter mel input, so we append `context_pad_s` of silence and encode only that: 4-8x faster
for 1-5 s utterances. Measured on 64 generated utterances, with 3 s of padding and
`trim_restart` the word error rate matched or beat the 30 s window (README, section hearing).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from engines.asr.config import AsrConfig
from engines.asr.device import load_whisper
from engines.asr.errors import AsrModelLoadError
from engines.asr.model_files import resolve_whisper_model
from engines.asr.whisper_runner import Decoded, WhisperRunner
from engines.progress import load_step

logger = logging.getLogger(__name__)


class WhisperModelRunner(WhisperRunner):
    """A loaded CTranslate2 Whisper model and its reduced-context decode."""

    def __init__(self, config: AsrConfig) -> None:
        path = resolve_whisper_model(config.model)
        try:
            import ctranslate2
            from faster_whisper import WhisperModel
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
        self._set_up(config, model.hf_tokenizer, model.feature_extractor,
                     bool(model.model.is_multilingual))

    def decode(
        self, pcm16k: np.ndarray, language: str | None = None, beam_size: int | None = None,
        prompt: str | None = None,
    ) -> Decoded:
        start = time.perf_counter()
        language = language or self.config.language
        mel, duration = self._window(pcm16k)
        features = self._ct2.StorageView.from_array(mel[None])
        if language == "auto":
            encoded = self._model.encode(features)
            token, _ = self._model.detect_language(encoded)[0][0]
            language, features = token[2:-2], encoded  # "<|zh|>" -> "zh"
        tokens = self._prompt_for(language, prompt)
        result = self._model.generate(
            features,
            [tokens],
            beam_size=beam_size or self.config.beam_size,
            max_length=self._max_length(duration, tokens),
            return_scores=True,
            return_no_speech_prob=True,
            return_logits_vocab=True,
            suppress_blank=True,
        )[0]
        ids = list(result.sequences_ids[0])
        text = self._text(ids)
        return Decoded(
            text=text,
            language=language,
            no_speech_prob=float(result.no_speech_prob),
            avg_logprob=float(result.scores[0]) if result.scores else 0.0,
            end_probability=self._end_probability(ids, result.logits[0], text),
            seconds=time.perf_counter() - start,
        )

    def _end_probability(self, ids: list[int], logits: list[Any], text: str) -> float:
        k = self._end_token(ids, len(logits), text)
        return 0.0 if k is None else self._end_mass(np.asarray(logits[k]), ids[k])


def load_runner(config: AsrConfig) -> WhisperRunner:
    """The Whisper runner of `config.runtime` (torch is imported only for "torch")."""
    if config.runtime == "torch":
        from engines.asr.torch_whisper import TorchWhisperRunner

        return TorchWhisperRunner(config)
    return WhisperModelRunner(config)
