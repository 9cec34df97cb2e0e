"""Audio on the models' side: what engines check, resample and read.

The resampling contract (with `media.audio`, the wire's side): audio changes rate at two kinds
of edges, each with a library, and nowhere else.
- The wire: `media.audio` turns what the peer sends into the listeners' 16 kHz mono int16
  frames and any PCM the agent says into the 48 kHz the tracks send. Nothing else touches the
  wire's formats.
- A model's input: an engine whose model wants one rate brings what it is given to that rate
  with `resample` (soxr); offline tools (CLIs, benchmarks) read files with `read_audio`.
  Engines never import `media`: the two sides meet only in the formats they agree on.

- `check_pcm16(pcm, error)`: the one check every audio-taking engine runs on its input;
- `resample(pcm, from_rate, to_rate)`: 1-D PCM at another rate, same dtype (soxr, "HQ");
- `read_audio(path, rate)`: any audio file -> mono int16 at `rate` (PyAV's libswresample).
"""

from __future__ import annotations

from pathlib import Path

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


def resample(pcm: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Mono PCM (int16 or float32) from `from_rate` to `to_rate`, same dtype; unchanged when
    the rates agree or there is nothing to resample."""
    if from_rate == to_rate or len(pcm) == 0:
        return pcm
    import soxr

    out: np.ndarray = soxr.resample(pcm, from_rate, to_rate)
    return out


def read_audio(path: Path, rate: int, error: type[Exception] = InvalidInputError) -> np.ndarray:
    """Decode any audio file (first audio stream) to mono int16 at `rate`."""
    import av

    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise error(f"cannot read {path}: {exc}") from exc
    resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
    chunks = []
    with container:
        for frame in container.decode(audio=0):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
    return np.concatenate(chunks).astype(np.int16) if chunks else np.zeros(0, np.int16)
