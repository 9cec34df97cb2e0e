"""Smart Turn v3.2 in torch, from the same ONNX file (`[turn] runtime = "torch"`): for a GPU.

Why: under load the turn model became the end of turn's last evidence. At 32 sessions on the
H200 (6 workers under MPS) its probability came 303-329 ms after the voice, after Whisper's
pause transcript (344-387), although it is asked 80 ms into the silence: ~50 ms of CPU a call
(this VM, one thread; ~26 ms on an idle machine) queued behind each worker's video and TTS.
On the GPU the network is a few dozen small kernels; the features stay pipecat's NumPy
function (~3 ms), the same input the ONNX model gets.

The network (read from the graph, `bench/RESULTS.md` section gpu): a Whisper-tiny encoder
(two GELU convolutions, the second of stride 2, 400 learned positions, 4 pre-norm layers of
width 384, 6 heads, feed-forward 1536, a final LayerNorm), attention pooling over time
(Linear 384-256, tanh, Linear 256-1, softmax) and a classifier (Linear 384-256, LayerNorm,
GELU, Linear 256-64, GELU, Linear 64-1, sigmoid). The file is int8 (per-channel weights and
quantized activations); here its weights are dequantized once and run in float32, so the
probabilities differ from onnxruntime's by the activations' rounding: within 0.05 where
either is sure, but up to 0.8 on borderline windows, and offline its unsure turns wait longer
(bench/RESULTS.md, section turn; tests/engines/test_smart_turn_torch.py). An option, in no
profile.

Weights are matched to the network by the graph, not by initializer names (most of them are
anonymous): each MatMul/Gemm/Conv weight is named after the bias added to its output; the
projections without a bias are the layers' keys, in graph order.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np

from engines.progress import load_step
from engines.turn.errors import TurnModelLoadError
from engines.turn.smart_turn import load_features, model_input

logger = logging.getLogger(__name__)

WIDTH, HEADS, LAYERS = 384, 6, 4
_PREFIX = "inner."
_models: dict[tuple[str, str], TorchSmartTurn] = {}
_models_lock = threading.Lock()


def onnx_weights(model_path: Path) -> dict[str, np.ndarray]:
    """The float32 weights of a Smart Turn v3 ONNX file, by the module names of its export
    (`encoder.layers.0.self_attn.k_proj.weight`, `classifier.0.bias`, ...), Linear weights as
    [out, in] (see the module docstring)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(model_path)).graph
    init = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    made: dict[str, np.ndarray] = {}  # a DequantizeLinear's output -> its float tensor
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
        if node.op_type == "DequantizeLinear" and node.input[0] in init:
            q, scale = init[node.input[0]], init[node.input[1]]
            zero = init[node.input[2]] if len(node.input) > 2 else np.zeros_like(scale)
            axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
            if scale.ndim == 1 and scale.size > 1:
                shape = [1] * q.ndim
                shape[axis] = scale.size
                scale, zero = scale.reshape(shape), zero.reshape(shape)
            made[node.output[0]] = ((q.astype(np.float32) - zero.astype(np.float32))
                                    * scale.astype(np.float32))

    def value(name: str) -> np.ndarray | None:
        if name in made:
            return made[name]
        if name in init and init[name].dtype == np.float32:
            return init[name]
        return None

    weights: dict[str, np.ndarray] = {}
    unnamed: list[np.ndarray] = []  # projections with no bias after them (the keys)
    for node in graph.node:
        if node.op_type not in ("MatMul", "Gemm", "Conv"):
            continue
        weight = value(node.input[1])
        if weight is None:
            continue  # an activation product (attention scores)
        bias_name, bias = None, None
        if node.op_type in ("Gemm", "Conv") and len(node.input) > 2:
            bias = value(node.input[2])
            bias_name = node.input[2].split("_quantized")[0]
        else:
            for add, via in _after(node.output[0], consumers):
                other = [i for i in add.input if i != via]
                if add.op_type == "Add" and other and other[0] in init:
                    bias_name, bias = other[0], init[other[0]]
        if node.op_type == "MatMul":
            weight = weight.T  # [in, out] -> [out, in]
        if bias_name is None:
            unnamed.append(weight)
            continue
        module = bias_name[len(_PREFIX):].rsplit(".bias", 1)[0]
        weights[module + ".weight"] = np.ascontiguousarray(weight)
        assert bias is not None
        weights[module + ".bias"] = bias.astype(np.float32)
    if len(unnamed) != LAYERS:  # the key projections (no bias), one per layer, in order
        raise TurnModelLoadError(f"{model_path}: {len(unnamed)} projections without a bias, "
                                 f"expected {LAYERS} (one key projection a layer)")
    for layer, weight in enumerate(unnamed):
        weights[f"encoder.layers.{layer}.self_attn.k_proj.weight"] = np.ascontiguousarray(weight)
    for name, array in init.items():  # positions and LayerNorms, by name
        if array.dtype == np.float32 and name.startswith(_PREFIX):
            short = name[len(_PREFIX):]
            if short not in weights and ("norm" in short or "embed_positions" in short
                                         or short.startswith("classifier.1")):
                weights[short] = array
    return weights


def _after(name: str, consumers: dict[str, list[Any]]) -> list[tuple[Any, str]]:
    """The nodes that use `name`, looking through the activations' quantize-dequantize pairs;
    each with the name it reads."""
    found: list[tuple[Any, str]] = []
    for node in consumers.get(name, []):
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            found += _after(node.output[0], consumers)
        else:
            found.append((node, name))
    return found


def build_network(weights: dict[str, np.ndarray]) -> Any:
    """The torch module for `weights` (`onnx_weights`), in eval mode, on the CPU."""
    import torch
    from torch import nn
    from torch.nn import functional

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.self_attn_layer_norm = nn.LayerNorm(WIDTH)
            self.self_attn = nn.Module()
            self.self_attn.q_proj = nn.Linear(WIDTH, WIDTH)
            self.self_attn.k_proj = nn.Linear(WIDTH, WIDTH, bias=False)
            self.self_attn.v_proj = nn.Linear(WIDTH, WIDTH)
            self.self_attn.out_proj = nn.Linear(WIDTH, WIDTH)
            self.final_layer_norm = nn.LayerNorm(WIDTH)
            self.fc1 = nn.Linear(WIDTH, 4 * WIDTH)
            self.fc2 = nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x: Any) -> Any:
            b, t, _ = x.shape
            h = self.self_attn_layer_norm(x)
            attn: Any = self.self_attn

            def heads(y: Any) -> Any:
                return y.view(b, t, HEADS, WIDTH // HEADS).transpose(1, 2)

            o = functional.scaled_dot_product_attention(
                heads(attn.q_proj(h)), heads(attn.k_proj(h)), heads(attn.v_proj(h)))
            x = x + attn.out_proj(o.transpose(1, 2).reshape(b, t, WIDTH))
            return x + self.fc2(functional.gelu(self.fc1(self.final_layer_norm(x))))

    class SmartTurnNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Module()
            self.encoder.conv1 = nn.Conv1d(80, WIDTH, 3, padding=1)
            self.encoder.conv2 = nn.Conv1d(WIDTH, WIDTH, 3, stride=2, padding=1)
            self.encoder.embed_positions = nn.Embedding(400, WIDTH)
            self.encoder.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
            self.encoder.layer_norm = nn.LayerNorm(WIDTH)
            self.pool_attention = nn.Sequential(nn.Linear(WIDTH, 256), nn.Tanh(),
                                                nn.Linear(256, 1))
            self.classifier = nn.Sequential(
                nn.Linear(WIDTH, 256), nn.LayerNorm(256), nn.GELU(), nn.Dropout(0.0),
                nn.Linear(256, 64), nn.GELU(), nn.Linear(64, 1))

        def forward(self, features: Any) -> Any:
            enc: Any = self.encoder
            x = functional.gelu(enc.conv2(functional.gelu(enc.conv1(features))))
            x = x.transpose(1, 2) + enc.embed_positions.weight
            for layer in enc.layers:
                x = layer(x)
            x = enc.layer_norm(x)
            weights = torch.softmax(self.pool_attention(x), dim=1)
            return torch.sigmoid(self.classifier((x * weights).sum(dim=1)))

    net = SmartTurnNet()
    state = {name: torch.from_numpy(np.array(array, dtype=np.float32))
             for name, array in weights.items()}
    missing, unexpected = net.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise TurnModelLoadError(f"Smart Turn weights do not fit the network: missing "
                                 f"{missing}, unexpected {unexpected}")
    return net.eval()


class TorchSmartTurn:
    """`TurnModel` in torch on `device` (see the module docstring)."""

    def __init__(self, model_path: Path, device: str = "cpu") -> None:
        try:
            import torch
        except ImportError as exc:
            raise TurnModelLoadError("[turn] runtime = \"torch\" needs torch (the face "
                                     "extra): pip install 'rtc-avatar[face]'") from exc
        self._torch = torch
        self._features = load_features()
        with load_step(logger, f"smart turn in torch ({model_path.name}, {device})"):
            try:
                weights = onnx_weights(model_path)
            except ImportError as exc:
                raise TurnModelLoadError("reading the Smart Turn file needs onnx: pip "
                                         "install 'rtc-avatar[face]'") from exc
            self._net = build_network(weights).to(device)
        self.device = device

    def complete_probability(self, pcm16k: np.ndarray) -> float:
        features = model_input(self._features, pcm16k)
        torch = self._torch
        with torch.inference_mode():
            out = self._net(torch.from_numpy(features).to(self.device))
            probability = float(out.reshape(-1)[0].item())
        return min(max(probability, 0.0), 1.0)


def resolve_device(device: str) -> str:
    """"auto": "cuda" where torch sees a GPU, else "cpu" (logged); others as given."""
    if device != "auto":
        return device
    import torch

    chosen = "cuda" if torch.cuda.is_available() else "cpu"
    if chosen == "cpu":
        logger.warning("[turn] device = \"auto\": no GPU visible to torch, Smart Turn on the CPU")
    return chosen


def load_torch_smart_turn(model_path: Path, device: str) -> TorchSmartTurn:
    """The process-wide torch model for (`model_path`, `device`), loaded once."""
    key = (str(model_path.resolve()), device)
    with _models_lock:
        if key not in _models:
            _models[key] = TorchSmartTurn(model_path, device)
        return _models[key]
