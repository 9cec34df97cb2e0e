"""Audio checks and conversion at the ASR edge.

Streams take 16 kHz mono int16 (the listener format); `to_pcm16k` turns anything else (float,
other rates, stereo) into it with soxr, for the CLI and benchmarks.
"""

from __future__ import annotations

import numpy as np

from engines.asr.errors import InvalidAudioError
from engines.pcm import check_pcm16 as pcm16

SAMPLE_RATE = 16000


def check_pcm16(pcm: np.ndarray) -> np.ndarray:
    """Return `pcm` as 1-D int16 or raise InvalidAudioError."""
    return pcm16(pcm, InvalidAudioError)


def to_pcm16k(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mono 16 kHz int16 from int16/int32/float audio of shape (n,) or (n, channels)."""
    import soxr

    if sample_rate <= 0:
        raise InvalidAudioError(f"bad sample rate {sample_rate}")
    x = np.asarray(samples)
    if x.ndim == 2:
        x = x.mean(axis=1) if x.dtype.kind == "f" else x.astype(np.float64).mean(axis=1)
    if x.ndim != 1:
        raise InvalidAudioError(f"expected (n,) or (n, channels) audio, got shape {x.shape}")
    if x.dtype.kind in "iu":
        scale = float(np.iinfo(samples.dtype).max + 1) if samples.dtype.kind in "iu" else 32768.0
        x = x.astype(np.float64) / scale
    x = x.astype(np.float32)
    if sample_rate != SAMPLE_RATE:
        x = soxr.resample(x, sample_rate, SAMPLE_RATE)
    return np.clip(np.round(x * 32768.0), -32768, 32767).astype(np.int16)


def pcm_to_float(pcm: np.ndarray) -> np.ndarray:
    return pcm.astype(np.float32) / 32768.0
