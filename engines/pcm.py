"""The one check every audio-taking engine runs on its input: mono int16 NumPy PCM."""

from __future__ import annotations

import numpy as np

from engines.errors import InvalidInputError


def check_pcm16(pcm: np.ndarray, error: type[Exception] = InvalidInputError) -> np.ndarray:
    """Return `pcm` as a 1-D contiguous int16 array, or raise `error` saying what is wrong."""
    if not isinstance(pcm, np.ndarray):
        raise error(f"expected a NumPy int16 array, got {type(pcm).__name__}")
    if pcm.dtype != np.int16:
        raise error(f"expected int16 samples, got {pcm.dtype}")
    if pcm.ndim == 2 and 1 in pcm.shape:
        pcm = pcm.reshape(-1)
    if pcm.ndim != 1:
        raise error(f"expected mono audio, got shape {pcm.shape}")
    return np.ascontiguousarray(pcm)
