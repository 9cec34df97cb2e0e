"""silero-vad confirmation of another detector, through onnxruntime (no torch import).

The ONNX file ships inside the `silero-vad` package. One `InferenceSession` is loaded per
process and shared (onnxruntime's `run` is thread-safe); each stream keeps its own recurrent
state and 64-sample context, as silero's own `OnnxWrapper` does. The model scores 512-sample
(32 ms) chunks, so a frame is judged by the latest chunk score: up to 32 ms of lag, well inside
the endpointer's hangover.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np

from engines.progress import load_step
from engines.vad.base import VoiceActivityDetector
from engines.vad.config import SAMPLE_RATE
from engines.vad.errors import VadModelLoadError
from engines.vad.webrtc import check_pcm16

logger = logging.getLogger(__name__)

CHUNK_SAMPLES = 512  # samples per silero call at 16 kHz (fixed by the model)
_CONTEXT = 64  # samples of the previous chunk the model expects in front (silero v5+)
_session: Any = None
_session_lock = threading.Lock()


def silero_model_path() -> Path:
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or spec.origin is None:
        raise VadModelLoadError("silero-vad is not installed: pip install 'rtc-avatar[asr]'")
    path = Path(spec.origin).parent / "data" / "silero_vad.onnx"
    if not path.is_file():
        raise VadModelLoadError(f"silero-vad ONNX model missing at {path}")
    return path


def load_silero() -> None:
    """Load the shared ONNX session (idempotent)."""
    _shared_session()


def _shared_session() -> Any:
    global _session
    with _session_lock:
        if _session is None:
            import onnxruntime

            opts = onnxruntime.SessionOptions()
            # One thread: the calls are tiny and many sessions run them side by side.
            opts.inter_op_num_threads = 1
            opts.intra_op_num_threads = 1
            with load_step(logger, "silero-vad (onnx)"):
                _session = onnxruntime.InferenceSession(
                    str(silero_model_path()), sess_options=opts,
                    providers=["CPUExecutionProvider"],
                )
        return _session


class SileroStream:
    """Streaming silero speech probability for one audio stream."""

    def __init__(self) -> None:
        self._session = _shared_session()
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros((1, _CONTEXT), dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._sr = np.array(SAMPLE_RATE, dtype=np.int64)
        self.probability = 0.0

    def feed(self, pcm: np.ndarray) -> float:
        """Add int16 samples; return the probability of the latest complete 32 ms chunk."""
        self.chunk_probabilities(pcm)
        return self.probability

    def chunk_probabilities(self, pcm: np.ndarray) -> list[float]:
        """Add int16 samples; return the probability of each 32 ms chunk they completed.

        Chunk i of the stream covers samples [512 i, 512 (i + 1)).
        """
        audio = np.concatenate([self._pending, pcm.astype(np.float32) / 32768.0])
        n = audio.shape[0] // CHUNK_SAMPLES * CHUNK_SAMPLES
        probs = []
        for start in range(0, n, CHUNK_SAMPLES):
            x = np.concatenate([self._context, audio[None, start : start + CHUNK_SAMPLES]], axis=1)
            out, self._state = self._session.run(
                None, {"input": x, "state": self._state, "sr": self._sr}
            )
            self._context = x[:, -_CONTEXT:]
            self.probability = float(out[0, 0])
            probs.append(self.probability)
        self._pending = audio[n:]
        return probs


class SileroConfirmedVad:
    """Speech only where both `primary` (webrtcvad) and silero-vad hear it.

    webrtcvad reacts to any steady broadband energy in the voice band; silero is a neural
    classifier that rejects most such noise. Requiring both keeps webrtcvad's fast reaction
    while steady noise no longer holds an utterance open.
    """

    def __init__(self, primary: VoiceActivityDetector, threshold: float = 0.5) -> None:
        self._primary = primary
        self._silero = SileroStream()
        self._threshold = threshold

    def is_speech(self, frame: np.ndarray) -> bool:
        frame = check_pcm16(frame)
        # Silero keeps running on every frame so its recurrent state stays current.
        prob = self._silero.feed(frame)
        return self._primary.is_speech(frame) and prob >= self._threshold
