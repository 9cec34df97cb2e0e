"""Audio at the ASR edge: streams take 16 kHz mono int16 (the listeners' format, made by
`media.audio` live and by `engines.pcm.read_audio` offline) and nothing else."""

from __future__ import annotations

import numpy as np

from engines.asr.errors import InvalidAudioError
from engines.pcm import check_pcm16 as pcm16

SAMPLE_RATE = 16000


def check_pcm16(pcm: np.ndarray) -> np.ndarray:
    """Return `pcm` as 1-D int16 or raise InvalidAudioError."""
    return pcm16(pcm, InvalidAudioError)


def pcm_to_float(pcm: np.ndarray) -> np.ndarray:
    return pcm.astype(np.float32) / 32768.0
