"""Log-mel features of speech for the audio-to-landmark model.

Contract: `log_mel(pcm, sample_rate)` -> float32 [T_feat, N_MELS] with one row every
`HOP_MS` (10 ms), so FEATS_PER_FRAME (4) rows per 25 fps video frame. Row i describes the
25 ms window centred on time i * 10 ms (the first window is zero-padded on the left), so a row
looks 12.5 ms into the future; the model adds its own bounded look-ahead (see `model.py`).
The audio is padded with silence at the end so that T_feat is a multiple of FEATS_PER_FRAME and
covers every video frame that starts inside the audio: T_feat = 4 * ceil(duration * 25).

Pure NumPy (audio at other rates is brought to 16 kHz by `engines.pcm.resample`), identical in
training and at run time.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from engines.face.errors import InvalidInputError
from engines.pcm import resample

SAMPLE_RATE = 16000
N_MELS = 80
N_FFT = 512
WIN_LENGTH = 400  # 25 ms
HOP_LENGTH = 160  # 10 ms
HOP_MS = 10
FPS = 25
FEATS_PER_FRAME = 1000 // (HOP_MS * FPS)  # 4 feature rows per video frame
F_MIN = 55.0
F_MAX = 7600.0
LOG_FLOOR = 1e-6  # power floor: digital silence maps to log(1e-6) = -13.8
SILENCE_VALUE = float(np.log(LOG_FLOOR))


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    return 2595.0 * np.log10(1.0 + hz / 700.0)  # HTK formula


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


@functools.cache
def mel_filterbank() -> np.ndarray:
    """Triangular, area-normalised filters [N_MELS, N_FFT // 2 + 1] (float32)."""
    freqs = np.linspace(0.0, SAMPLE_RATE / 2, N_FFT // 2 + 1)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(np.array(F_MIN)), _hz_to_mel(np.array(F_MAX)),
                                   N_MELS + 2))
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (freqs[None, :] - lower) / (centre - lower)
    down = (upper - freqs[None, :]) / (upper - centre)
    fb = np.maximum(0.0, np.minimum(up, down))
    fb *= (2.0 / (upper - lower))  # Slaney-style normalisation keeps bands comparable
    fb.setflags(write=False)
    return fb.astype(np.float32)


@functools.cache
def _window() -> np.ndarray:
    win = np.zeros(N_FFT, dtype=np.float32)
    offset = (N_FFT - WIN_LENGTH) // 2
    win[offset : offset + WIN_LENGTH] = np.hanning(WIN_LENGTH + 1)[:-1]
    return win


def num_frames(num_samples: int, sample_rate: int, fps: int = FPS) -> int:
    """Video frames that start inside `num_samples` of audio: ceil(duration * fps)."""
    return math.ceil(num_samples * fps / sample_rate - 1e-9)


def to_float_mono(pcm: np.ndarray, sample_rate: int) -> np.ndarray:
    """int16 or float PCM at any rate -> float32 in [-1, 1] at SAMPLE_RATE."""
    pcm = np.asarray(pcm)
    if pcm.ndim != 1:
        raise InvalidInputError(f"PCM must be 1-D mono, got shape {pcm.shape}")
    if sample_rate <= 0:
        raise InvalidInputError(f"bad sample rate {sample_rate}")
    if pcm.dtype == np.int16:
        audio = pcm.astype(np.float32) / 32768.0
    elif np.issubdtype(pcm.dtype, np.floating):
        audio = pcm.astype(np.float32)
    else:
        raise InvalidInputError(f"PCM must be int16 or float, got {pcm.dtype}")
    return resample(audio, sample_rate, SAMPLE_RATE)


def log_mel(pcm: np.ndarray, sample_rate: int) -> np.ndarray:
    """Log-mel features [4 * ceil(duration * 25), N_MELS] float32 (see the module contract)."""
    n_video = num_frames(len(pcm), sample_rate)
    audio = to_float_mono(pcm, sample_rate)
    n_feat = n_video * FEATS_PER_FRAME
    if n_feat == 0:
        return np.zeros((0, N_MELS), dtype=np.float32)
    # Centre window i on sample i * HOP; pad N_FFT/2 on the left and enough on the right.
    needed = (n_feat - 1) * HOP_LENGTH + N_FFT
    padded = np.zeros(needed, dtype=np.float32)
    body = audio[: max(0, needed - N_FFT // 2)]
    padded[N_FFT // 2 : N_FFT // 2 + len(body)] = body
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP_LENGTH][:n_feat]
    spectrum = np.fft.rfft(frames * _window(), axis=1)
    power = (spectrum.real**2 + spectrum.imag**2).astype(np.float32)
    mel = power @ mel_filterbank().T
    return np.log(mel + LOG_FLOOR).astype(np.float32)


def resample_frames(offsets: np.ndarray, from_fps: float, to_fps: float) -> np.ndarray:
    """Linearly re-time a landmark sequence [T, ...] from one frame rate to another."""
    if from_fps == to_fps or len(offsets) == 0:
        return offsets
    n_out = math.ceil(len(offsets) * to_fps / from_fps - 1e-9)
    src_t = np.arange(len(offsets)) / from_fps
    dst_t = np.arange(n_out) / to_fps
    flat = offsets.reshape(len(offsets), -1)
    out = np.empty((n_out, flat.shape[1]), dtype=np.float32)
    for j in range(flat.shape[1]):
        out[:, j] = np.interp(dst_t, src_t, flat[:, j])
    return out.reshape((n_out, *offsets.shape[1:]))
