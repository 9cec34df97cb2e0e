"""What every Whisper runtime shares: the window, prompts, length limit, text and acceptance.

`WhisperRunner` is the base of the CTranslate2 runner (`whisper.py`) and of the torch one
(`torch_whisper.py`, `[asr] runtime = "torch"`), with `Decoded`, what a decode returns. It has
a module of its own so that the runtimes import it and `whisper.load_runner` imports them, one
way. It loads no model.
"""

from __future__ import annotations

import math
import threading
import zlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from engines.asr.audio import SAMPLE_RATE, pcm_to_float
from engines.asr.config import AsrConfig
from engines.asr.errors import AsrModelLoadError
from engines.asr.text import SENTENCE_END, trim_restart
from engines.text.zh_script import to_simplified

_HOP = 160  # samples per mel frame (Whisper's 10 ms hop)
_MAX_WINDOW_S = 30  # Whisper's positional embeddings cover 30 s
MAX_TEXT_POSITIONS = 448  # Whisper's decoder positional embeddings (prompt and text)
# Bound on tokens per second of audio: fast speech needs ~5 (with punctuation and casing);
# 6 cut off the end of a 22 s decode in a test. It also bounds the cost of a restart loop.
_TOKENS_PER_S = 10
# Initial prompts per language when `AsrConfig.prompt` is unset: "The following are sentences
# in Mandarin." in Simplified characters steers Whisper to Simplified output.
DEFAULT_PROMPTS = {"zh": "以下是普通话的句子。"}
# Sessions' own prompts (the app's words, `decode(prompt=...)`) tokenized, kept for reuse: a
# session decodes with one prompt until its app sends new words.
_SESSION_PROMPTS_KEPT = 256


@dataclass(frozen=True)
class Decoded:
    text: str
    language: str
    no_speech_prob: float
    avg_logprob: float
    end_probability: float  # of a final . ? ! there (0.0 when the text does not end so)
    seconds: float  # wall time of the decode


def compression_ratio(text: str) -> float:
    """Bytes over zlib-compressed bytes, as Whisper computes it (repetition makes it large)."""
    data = text.encode()
    return len(data) / len(zlib.compress(data)) if data else 0.0


def tokens_probability(logits: np.ndarray, tokens: np.ndarray) -> float:
    """Softmax probability of any of `tokens` (distinct ids) under one step's logits (float64:
    no fp16 overflow)."""
    scores = np.asarray(logits, dtype=np.float64).reshape(-1)
    scores = np.exp(scores - scores.max())
    return float(scores[tokens].sum() / scores.sum())


_END_MARKS = frozenset(".?!")
_CLOSERS = frozenset("\"')")


def sentence_end_tokens(vocab: dict[str, int], below: int) -> np.ndarray:
    """Ids (< `below`) of the byte-level BPE tokens that are only a sentence's final mark:
    optional space, then . ? ! (no run of dots: "..." trails off), then optional closing
    quotes ("?", " ?", "?!", "?\"", "!"). Whisper spreads its belief that a sentence ends
    over these ("Who wrote Romeo and Juliet" ends "?" 0.60 and "." 0.25 on one voice)."""
    ids = []
    for token, k in vocab.items():
        text = token.replace("\u0120", " ").strip()  # "Ġ": the byte-level BPE's space
        marks = text.rstrip("".join(_CLOSERS))
        if (k < below and marks and set(marks) <= _END_MARKS and ".." not in marks):
            ids.append(k)
    return np.asarray(sorted(ids), dtype=np.int64)


class WhisperRunner(ABC):
    """What every Whisper runtime shares: the reduced-context mel window, the prompts, the
    length limit, the text of the decoded ids, the sentence-end token and Whisper's rules for
    accepting text. A subclass loads its model, calls `_set_up` and implements `decode`."""

    config: AsrConfig
    multilingual: bool
    max_audio_s: float
    # Decodes that run side by side without more cores (rtc_server/engine_set.py sizes the
    # ASR threads by it): 0 where a decode is CPU work.
    device_calls: int = 0

    def _set_up(
        self, config: AsrConfig, hf_tokenizer: Any, features: Any, multilingual: bool
    ) -> None:
        """`hf_tokenizer`: the model's `tokenizers.Tokenizer`; `features`: faster-whisper's
        `FeatureExtractor` (a pure NumPy function of the waveform)."""
        from faster_whisper.tokenizer import Tokenizer

        self.config = config
        self.multilingual = multilingual
        if not multilingual and config.language != "en":
            raise AsrModelLoadError(
                f"{config.model} is an English-only model: set [asr] language = \"en\""
            )
        self._tokenizer_type = Tokenizer
        self._hf_tokenizer = hf_tokenizer
        self._features = features
        text = Tokenizer(hf_tokenizer, multilingual, task="transcribe", language="en")
        self._eot, self._decode_tokens = text.eot, text.decode
        self._end_ids = sentence_end_tokens(hf_tokenizer.get_vocab(), self._eot)
        self._sot, self._no_speech = text.sot, text.no_speech
        self._prompt_texts = {config.prompt.strip()} if config.prompt else set()
        self._prompt_texts.update(DEFAULT_PROMPTS.values())
        self._prompt_texts.discard("")
        self._prompts = {lang: self._prompt(lang) for lang in ("en", "zh")}
        self._session_prompts: dict[tuple[str, str], list[int]] = {}
        self._session_lock = threading.Lock()
        self.max_audio_s = _MAX_WINDOW_S - config.context_pad_s

    @abstractmethod
    def decode(
        self, pcm16k: np.ndarray, language: str | None = None, beam_size: int | None = None,
        prompt: str | None = None,
    ) -> Decoded:
        """Transcribe one utterance (int16, 16 kHz, at most `max_audio_s` long).

        `language` None = the configured one; with "auto" Whisper detects it in this call.
        `prompt`: this decode's initial prompt (a session's own words) instead of the
        configured one; None = the configured one.
        """

    def _prompt(self, language: str, initial: str | None = None) -> list[int]:
        tokenizer = self._tokenizer_type(
            self._hf_tokenizer, self.multilingual, task="transcribe",
            language=language if self.multilingual else None,
        )
        prompt: list[int] = []
        if initial is None:  # the configured prompt: English-only models take none (the
            # bank's words cost tiny.en 6.0 -> 6.7% WER clean, 14.7 -> 17.0% at 15 dB on
            # other sentences: bench/RESULTS.md, asr); a session's own words they do take
            initial = "" if not self.multilingual else self.config.prompt if (
                self.config.prompt is not None) else DEFAULT_PROMPTS.get(language, "")
        if initial.strip():
            prompt = [tokenizer.sot_prev, *tokenizer.encode(" " + initial.strip())]
        return [*prompt, *tokenizer.sot_sequence, tokenizer.no_timestamps]

    def _prompt_for(self, language: str, initial: str | None = None) -> list[int]:
        if initial is not None:
            return self._session_prompt(language, initial)
        return self._prompts.get(language) or self._prompts.setdefault(
            language, self._prompt(language)
        )

    def _session_prompt(self, language: str, initial: str) -> list[int]:
        """A session's prompt's tokens, cut to fit beside the text (Whisper's own rule: the
        prompt's last half of the decoder's positions), kept for the session's next decodes."""
        key = (language, initial)
        with self._session_lock:
            tokens = self._session_prompts.get(key)
        if tokens is None:
            tokens = self._prompt(language, initial)
            head = len(self._prompt(language, ""))  # the start-of-transcript sequence
            extra = len(tokens) - head - 1  # the prompt's text tokens (after <|startofprev|>)
            limit = MAX_TEXT_POSITIONS // 2 - 1
            if extra > limit:  # keep the text's end, next to the start of transcript
                tokens = [tokens[0], *tokens[1 + extra - limit:]]
            with self._session_lock:
                if len(self._session_prompts) >= _SESSION_PROMPTS_KEPT:
                    self._session_prompts.pop(next(iter(self._session_prompts)))
                self._session_prompts[key] = tokens
        return tokens

    def _window(self, pcm16k: np.ndarray) -> tuple[np.ndarray, float]:
        """The utterance's log-mel frames [n_mels, frames] over the reduced context (the audio
        and `context_pad_s` of silence, in whole seconds), and the audio's duration in s."""
        audio = pcm_to_float(pcm16k)[: int(self.max_audio_s * SAMPLE_RATE)]
        duration = audio.shape[0] / SAMPLE_RATE
        # Whole seconds keep the frame count even (the encoder's stride-2 convolution).
        window_s = min(_MAX_WINDOW_S, math.ceil(duration + self.config.context_pad_s))
        padded = np.zeros(window_s * SAMPLE_RATE, dtype=np.float32)
        padded[: audio.shape[0]] = audio
        mel = self._features(padded)[:, : window_s * SAMPLE_RATE // _HOP]
        return np.ascontiguousarray(mel), duration

    def _window_frames(self) -> list[int]:
        """The mel frame counts `_window` can give: every whole-second window from the
        padding alone to Whisper's 30 s."""
        first = max(math.ceil(self.config.context_pad_s), 1)
        return [s * SAMPLE_RATE // _HOP for s in range(first, _MAX_WINDOW_S + 1)]

    @staticmethod
    def _max_length(duration: float, prompt: list[int]) -> int:
        """CTranslate2's `max_length` (prompt included) for `duration` s of audio."""
        return min(MAX_TEXT_POSITIONS, int(duration * _TOKENS_PER_S) + 20 + len(prompt))

    def _text(self, ids: list[int]) -> str:
        return trim_restart(self._decode_tokens([t for t in ids if t < self._eot]).strip())

    def _end_token(self, ids: list[int], steps: int, text: str) -> int | None:
        """The step whose token ends `text` with . ? or ! (None if it does not end so).

        The probability of a final mark at that step (`_end_mass`) is Whisper's own belief
        that a sentence ends where the audio stops: median 0.90-0.95 after complete
        questions, mostly below 0.7 where it wrote a period after words cut off in
        mid-sentence ("I need it." for "I need to ...") (engines/turn/policy.py). `steps`:
        how many steps' logits there are.
        """
        if not text.endswith(SENTENCE_END):
            return None
        last = min(steps, next((k for k, t in enumerate(ids) if t >= self._eot), len(ids)))
        # The token where the decoded text reaches `text`: the last one, unless trim_restart
        # cut a repetition off the end.
        for k in range(last - 1, -1, -1):
            if self._decode_tokens(ids[: k + 1]).strip() == text:
                return k
        return None

    def _end_mass(self, logits: np.ndarray, chosen: int) -> float:
        """Whisper's probability that the sentence ends at the step that wrote `chosen` (the
        final mark): that of any final mark there, not only the one it wrote ("?" or "."
        are the same evidence; engines/turn/policy.py)."""
        ids = self._end_ids
        if chosen not in ids:
            ids = np.append(ids, chosen)
        return tokens_probability(logits, ids)

    def accept(self, decoded: Decoded, prompt: str | None = None) -> str:
        """Drop text the model itself scores as no speech, or that loops.

        Whisper's own rules: no-speech probability > 0.6 with an average log-probability
        < -1, and (its trigger for a retry) a zlib compression ratio > 2.4, which catches
        "very very very ...". A tighter no-speech rule (0.3 / -0.7) dropped 2-5 s bursts of
        babble but also "Yes", "Okay", "Hi" and "Thanks" said alone (no-speech 0.3-0.6 on our
        voices, log-probability down to -2.7), so it is not used (bench/RESULTS.md, asr).
        """
        cfg = self.config
        if decoded.no_speech_prob > cfg.no_speech_threshold and (
            decoded.avg_logprob < cfg.logprob_threshold
        ):
            return ""
        if compression_ratio(decoded.text) > cfg.compression_ratio_threshold:
            return ""
        said = decoded.text.strip()
        if said in self._prompt_texts or (prompt is not None and said == prompt.strip()):
            return ""  # Whisper read its own initial prompt back (seen on unclear Chinese)
        if decoded.language == "zh":  # the prompt steers to Simplified; this makes sure
            return to_simplified(decoded.text)
        return decoded.text
