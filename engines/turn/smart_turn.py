"""Smart Turn v3.2 (pipecat, BSD-2-Clause) through onnxruntime: `complete_probability(pcm)`.

The model and its feature extractor come from the installed `pipecat-ai` wheel:
`pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx` (input `input_features`
[batch, 80, 800], a Whisper log-mel of 8 s at 16 kHz; output `logits` [batch, 1], already a
probability) and `_whisper_features.py` (pipecat's NumPy copy of transformers'
WhisperFeatureExtractor, the exact features the model was trained on). Audio is cut to its
last 8 s and zero-padded in front, as pipecat's `LocalSmartTurnAnalyzerV3` does.

Why not pipecat's analyzer class: it keeps its own speech/silence tracking (a second pause
detector beside our endpointer), loads an ONNX session per instance and runs it on a thread of
its own. And why the files are found by path instead of imported: importing any `pipecat`
module runs `pipecat/__init__.py`, which logs a banner through loguru and, on Python < 3.12,
replaces `asyncio.wait_for` process-wide with `wait_for2`'s. `_whisper_features.py` itself
imports only NumPy, so it is loaded from its file.

One `SmartTurnModel` per process (`load_smart_turn`) serves every session: onnxruntime's
`run` is thread-safe and the features are a pure function. ~26 ms per call on one thread.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engines.pcm import check_pcm16
from engines.progress import load_step
from engines.turn.base import WINDOW_S
from engines.turn.errors import InvalidInputError, TurnModelLoadError

logger = logging.getLogger(__name__)

SAMPLE_RATE = 16000
INPUT = "input_features"  # the model's one input (both runtimes)
_SMART_TURN_DIR = ("audio", "turn", "smart_turn")
_ONNX_NAME = "smart-turn-v3.2-cpu.onnx"
_FEATURES_NAME = "_whisper_features.py"
_models: dict[tuple[str, int], SmartTurnModel] = {}
_models_lock = threading.Lock()


def _smart_turn_dir() -> Path:
    # find_spec on a top-level name locates the package without executing its __init__.
    spec = importlib.util.find_spec("pipecat")
    if spec is None or not spec.submodule_search_locations:
        raise TurnModelLoadError("pipecat-ai is not installed: pip install 'rtc-avatar[asr]'")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*_SMART_TURN_DIR)


def bundled_model_path() -> Path:
    path = _smart_turn_dir() / "data" / _ONNX_NAME
    if not path.is_file():
        raise TurnModelLoadError(f"Smart Turn model missing at {path}")
    return path


def model_file(model_path: str | None) -> Path:
    """`[turn] model_path` as a file (None: pipecat's bundled v3.2)."""
    return Path(model_path).expanduser() if model_path else bundled_model_path()


def load_features() -> Callable[..., np.ndarray]:
    path = _smart_turn_dir() / _FEATURES_NAME
    spec = importlib.util.spec_from_file_location("engines.turn._pipecat_whisper_features", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise TurnModelLoadError(f"pipecat's Whisper feature extractor missing at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    extract: Callable[..., np.ndarray] = module.compute_whisper_log_mel_features
    return extract


def model_input(features: Callable[..., np.ndarray], pcm16k: np.ndarray) -> np.ndarray:
    """The model's `input_features` [1, 80, 800] for `pcm16k`: its last 8 s, zero-padded in
    front, as pipecat's analyzer feeds it (both runtimes)."""
    window = int(WINDOW_S * SAMPLE_RATE)
    pcm = check_pcm16(pcm16k, InvalidInputError)[-window:]
    audio = np.zeros(window, dtype=np.float32)
    if pcm.size:
        audio[-pcm.size:] = pcm.astype(np.float32) / 32768.0
    return np.ascontiguousarray(features(audio, do_normalize=True)[None])


class SmartTurnModel:
    """A loaded Smart Turn v3 ONNX model (see module docstring)."""

    def __init__(self, model_path: Path, threads: int = 1) -> None:
        try:
            import onnxruntime
        except ImportError as exc:  # pragma: no cover - dependency of the asr extra
            raise TurnModelLoadError("onnxruntime is missing: pip install onnxruntime") from exc
        self._features = load_features()
        opts = onnxruntime.SessionOptions()
        opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = threads
        with load_step(logger, f"smart turn ({model_path.name}, {threads} thread)"):
            try:
                self._session: Any = onnxruntime.InferenceSession(
                    str(model_path), sess_options=opts, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # onnxruntime raises its own untyped errors
                raise TurnModelLoadError(f"cannot load {model_path}: {exc}") from exc

    def complete_probability(self, pcm16k: np.ndarray) -> float:
        features = model_input(self._features, pcm16k)
        (probability,) = self._session.run(None, {INPUT: features})
        return float(np.clip(probability.reshape(-1)[0], 0.0, 1.0))


def load_smart_turn(model_path: str | None = None, threads: int = 1) -> SmartTurnModel:
    """The process-wide model for `model_path` (None = pipecat's bundled v3.2), loaded once."""
    path = model_file(model_path)
    key = (str(path.resolve()), threads)
    with _models_lock:
        if key not in _models:
            _models[key] = SmartTurnModel(path, threads)
        return _models[key]
