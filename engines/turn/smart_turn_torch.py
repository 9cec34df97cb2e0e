"""Smart Turn v3.2 in torch, from the same ONNX file (`[turn] runtime = "torch"`): for a GPU.

Why: under load the turn model became the end of turn's last evidence. At 32 sessions on the
H200 (6 workers under MPS) its probability came 303-329 ms after the voice, after Whisper's
pause transcript (344-387), although it is asked 80 ms into the silence: ~50 ms of CPU a call
(this VM, one thread; ~26 ms on an idle machine) queued behind each worker's video and TTS.
On the GPU the graph's ~600 small kernels are one captured CUDA graph (engines/
graph_torch.py); the features stay pipecat's NumPy function (~3 ms), the same input the
ONNX model gets.

How: the file's graph itself, node by node (`engines.graph_torch`), its activations
rounded where the file rounds them (it is a statically quantized int8 graph). An earlier
port ran the dequantized weights in float32 and differed by up to 0.8 on borderline windows;
this one differs from onnxruntime by what onnxruntime's own fused and unfused runs of the
file differ by (within 0.15 and 0.16 on the test windows, median 0.005; bench/RESULTS.md,
section turn). On a CPU it is several times slower than onnxruntime: the GPU's runtime.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from engines.progress import load_step
from engines.turn.errors import TurnModelLoadError
from engines.turn.smart_turn import INPUT, load_features, model_input

logger = logging.getLogger(__name__)

_models: dict[tuple[str, str], TorchSmartTurn] = {}
_models_lock = threading.Lock()


class TorchSmartTurn:
    """`TurnModel` in torch on `device` (see the module docstring)."""

    def __init__(self, model_path: Path, device: str = "cpu", *, cuda_graph: bool = True
                 ) -> None:
        try:
            import onnx  # noqa: F401
            import torch  # noqa: F401
        except ImportError as exc:
            raise TurnModelLoadError("[turn] runtime = \"torch\" needs torch and onnx (the "
                                     "face extra): pip install 'rtc-avatar[face]'") from exc
        from engines.graph_torch import TorchGraph

        self._features = load_features()
        with load_step(logger, f"smart turn in torch ({model_path.name}, {device})"):
            try:
                self._graph = TorchGraph(model_path, device, cuda_graph=cuda_graph)
            except Exception as exc:  # onnx raises protobuf's own errors on a bad file
                raise TurnModelLoadError(f"cannot run {model_path} in torch: {exc}") from exc
        if self._graph.inputs != [INPUT]:
            raise TurnModelLoadError(f"{model_path}: inputs {self._graph.inputs}, expected "
                                     f"[{INPUT!r}] (Smart Turn v3)")
        self.device = device

    def complete_probability(self, pcm16k: np.ndarray) -> float:
        features = model_input(self._features, pcm16k)
        probability = float(self._graph.run(None, {INPUT: features})[0].reshape(-1)[0])
        return min(max(probability, 0.0), 1.0)


def load_torch_smart_turn(model_path: Path, device: str) -> TorchSmartTurn:
    """The process-wide torch model for (`model_path`, `device`), loaded once."""
    key = (str(model_path.resolve()), device)
    with _models_lock:
        if key not in _models:
            _models[key] = TorchSmartTurn(model_path, device)
        return _models[key]
