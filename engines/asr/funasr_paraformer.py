"""FunASR Paraformer streaming adapter (`engine = "funasr"`).

Uses FunASR's own streaming API: one `funasr.AutoModel(model=<name or local directory>)` per
process; each stream keeps its own `cache` dict and sends 600 ms chunks (`chunk_size =
[0, 10, 5]`: 10 x 60 ms per chunk, 5 x 60 ms look-ahead) through
`generate(input=chunk, cache=cache, is_final=False, chunk_size=..., encoder_chunk_look_back=4,
decoder_chunk_look_back=1)`. `finish()` sends the remainder (possibly empty) with
`is_final=True`, which makes FunASR flush its look-ahead and tail features. Each call returns
only the text of the new tokens, which the stream appends.

Thread safety: `AutoModel.generate` merges its call arguments (including `cache`) into the
model's shared `kwargs` dict, so two concurrent calls would swap caches. All calls therefore go
through one lock per loaded model; a 600 ms chunk takes tens of milliseconds on CPU, so the lock
is held briefly. `funasr` is imported only when this engine is created.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np

from engines.asr.audio import check_pcm16, pcm_to_float
from engines.asr.base import PauseText
from engines.asr.config import AsrConfig
from engines.asr.errors import AsrModelLoadError, StreamClosedError
from engines.asr.text import join_pieces
from engines.progress import load_step

logger = logging.getLogger(__name__)

_SAMPLES_PER_UNIT = 960  # one chunk_size unit = 60 ms at 16 kHz (FunASR's `chunk_size[1] * 960`)


def load_auto_model(config: AsrConfig) -> Any:
    """`funasr.AutoModel` for `config.funasr_model` (a local directory or a model name)."""
    try:
        from funasr import AutoModel
    except ImportError as exc:
        msg = "funasr is not installed: pip install 'rtc-avatar[funasr]'"
        raise AsrModelLoadError(msg) from exc
    name = config.funasr_model
    if not Path(name).is_dir():
        logger.warning("funasr model %r is not a local directory; FunASR resolves it", name)
    with load_step(logger, f"funasr {name}"):
        try:
            return AutoModel(
                model=name, device=config.funasr_device, disable_update=True,
                disable_pbar=True, disable_log=True,
            )
        except Exception as exc:  # FunASR raises bare Exceptions/AssertionErrors on bad models
            raise AsrModelLoadError(f"cannot load funasr model {name!r}: {exc}") from exc


class FunAsrStreamingASR:
    """One loaded Paraformer-streaming model serving every session's streams."""

    def __init__(self, config: AsrConfig, model: Any = None) -> None:
        self.config = config
        self.model = model if model is not None else load_auto_model(config)
        self.lock = threading.Lock()
        self.chunk_samples = config.funasr_chunk_size[1] * _SAMPLES_PER_UNIT

    def open(self, prompt: str | None = None) -> FunAsrStream:
        """`prompt` is Whisper's: Paraformer takes none, so a session's words are not used."""
        return FunAsrStream(self)

    def generate(self, chunk: np.ndarray, cache: dict[str, Any], is_final: bool) -> str:
        cfg = self.config
        with self.lock:
            result = self.model.generate(
                input=chunk,
                cache=cache,
                is_final=is_final,
                chunk_size=list(cfg.funasr_chunk_size),
                encoder_chunk_look_back=cfg.funasr_encoder_look_back,
                decoder_chunk_look_back=cfg.funasr_decoder_look_back,
            )
        if not result:
            return ""
        return str(result[0].get("text", ""))


class FunAsrStream:
    """One utterance: 600 ms chunks in, appended chunk texts out."""

    def __init__(self, engine: FunAsrStreamingASR) -> None:
        self._engine = engine
        self._cache: dict[str, Any] = {}
        self._pending = np.zeros(0, dtype=np.float32)
        self._text = ""
        self._closed = False

    def feed(self, pcm16k: np.ndarray, partial: bool = True) -> str | None:
        """Paraformer decodes 600 ms chunks as they fill, so `partial` changes nothing."""
        if self._closed:
            raise StreamClosedError("feed() after finish()")
        pcm = check_pcm16(pcm16k)
        self._pending = np.concatenate([self._pending, pcm_to_float(pcm)])
        before = self._text
        step = self._engine.chunk_samples
        while self._pending.shape[0] >= step:
            chunk, self._pending = self._pending[:step], self._pending[step:]
            self._append(self._engine.generate(chunk, self._cache, is_final=False))
        return self._text if self._text != before else None

    def pause(self) -> PauseText:
        """Paraformer decodes as it goes: the text so far (the look-ahead is flushed only at
        `finish`, so the last ~300 ms may be missing until then); no end probability."""
        return PauseText(self._text)

    def decode_ahead(self, rest: np.ndarray) -> PauseText | None:
        """Nothing to do early: Paraformer has decoded what it was fed already (its text
        reaches the listener as partials)."""
        return None

    def finish(self) -> str:
        if self._closed:
            raise StreamClosedError("finish() called twice")
        self._closed = True
        # The remainder may be empty: FunASR then flushes its cached tail features.
        self._append(self._engine.generate(self._pending, self._cache, is_final=True))
        self._pending = np.zeros(0, dtype=np.float32)
        return self._text

    def _append(self, piece: str) -> None:
        self._text = join_pieces(self._text, piece)
