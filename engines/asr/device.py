"""Where faster-whisper runs: `[asr] device` = "cpu" (default), "cuda" or "auto".

Contract: `load_whisper(factory, path, config)` returns a loaded `WhisperModel` on the device
the configuration allows. CTranslate2's PyPI wheels (4.x) are built against CUDA 12 and load
cuBLAS 12 lazily, at the first matrix product, so a machine whose driver "sees" the GPU can
still fail at the first decode: on the project's H200 machine (CUDA 13 libraries only) the
4.8.5 wheel fails with "Library libcublas.so.12 is not found or cannot be loaded". A CUDA
model is therefore trusted only after `probe()` has encoded one second of silence on it.
"cuda": any CUDA problem stops start-up with `AsrModelLoadError` naming it; "auto": CUDA when
the probe passes, else the CPU with a logged warning. On CUDA the weights run in float16
(`compute_type` is the CPU's weight type).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engines.asr.config import AsrConfig
from engines.asr.errors import AsrModelLoadError

logger = logging.getLogger(__name__)

CUDA_COMPUTE_TYPE = "float16"
_PROBE_FRAMES = 100  # 1 s of log-mel frames


def probe(ct2_whisper: Any) -> None:
    """Run the encoder once (this is where a missing CUDA library shows itself)."""
    import ctranslate2

    mel = np.zeros((1, int(ct2_whisper.n_mels), _PROBE_FRAMES), np.float32)
    ct2_whisper.encode(ctranslate2.StorageView.from_array(mel), to_cpu=True)


def cuda_problem(factory: Callable[..., Any], path: Path, config: AsrConfig) -> tuple[Any, str]:
    """(model, "") on a working GPU, else (None, why)."""
    import ctranslate2

    if ctranslate2.get_cuda_device_count() == 0:
        return None, ("CTranslate2 sees no CUDA device (get_cuda_device_count() is 0: no GPU, "
                      "no driver, or a CPU-only CTranslate2 build)")
    try:
        model = factory(str(path), device="cuda", compute_type=CUDA_COMPUTE_TYPE,
                        num_workers=config.num_workers, local_files_only=True)
        probe(model.model)
    except (RuntimeError, ValueError, OSError) as exc:
        return None, (f"CTranslate2 {ctranslate2.__version__} cannot run on CUDA: {exc} (its "
                      "PyPI wheels need CUDA 12's cuBLAS and cuDNN 9 libraries)")
    return model, ""


def load_whisper(factory: Callable[..., Any], path: Path, config: AsrConfig) -> Any:
    """The `WhisperModel` on `config.device` (see the module docstring)."""
    if config.device != "cpu":
        model, problem = cuda_problem(factory, path, config)
        if model is not None:
            return model
        if config.device == "cuda":
            raise AsrModelLoadError(f'[asr] device = "cuda": {problem}; use "cpu" or "auto"')
        logger.warning("ASR: %s; decoding on the CPU", problem)
    return factory(str(path), device="cpu", compute_type=config.compute_type,
                   cpu_threads=config.cpu_threads, num_workers=config.num_workers,
                   local_files_only=True)
