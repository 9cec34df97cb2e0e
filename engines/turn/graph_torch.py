"""An ONNX graph run node by node in torch, its quantize-dequantize pairs included.

Why: Smart Turn v3.2 ships as a statically quantized (QDQ) int8 graph. Read into a float32
network its weights are right but its activations are not rounded where the file rounds
them, and on borderline windows that moved the probability by up to 0.8 (bench/RESULTS.md,
section turn). Running the graph itself, every QuantizeLinear / DequantizeLinear at its
place with the file's scales, gives the file's function on any device torch has (as near
onnxruntime as onnxruntime's fused and unfused runs of it are to each other).

What it runs: the operators of that graph (`_ops`, ONNX opset 18 semantics as the file uses
them); any other operator is refused when the graph is loaded, naming it. Weights and
constant subgraphs (the weights' DequantizeLinear) are computed once at load; integer
tensors (shapes, indices) stay on the CPU, so reshapes never wait for the device.

On CUDA the ~370 remaining nodes (~600 small kernels) are captured once as a CUDA graph for
the inputs' shapes (symbolic dimensions as 1) on the graph's own stream, as the portrait's
warp is (engines/face/gpu_warp.py): a call is a copy in, one replay and a copy out, its wait
asleep (engines/device_wait.py). The capture is checked against the eager run on a test
input before it serves; a capture that fails or differs is logged and the graph runs
eagerly on that stream instead.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engines.device_wait import wait_for_device

logger = logging.getLogger(__name__)

Tensor = Any  # torch.Tensor (torch is imported where the graph is loaded)
Attrs = dict[str, Any]


def _quant_range(zero: Tensor) -> tuple[int, int]:
    import torch

    return (0, 255) if zero.dtype == torch.uint8 else (-128, 127)


def _per_axis(t: Tensor, x: Tensor, axis: int) -> Tensor:
    """A per-channel scale or zero point shaped to broadcast along `axis` of `x`."""
    if t.ndim != 1 or t.numel() == 1:
        return t
    shape = [1] * x.ndim
    shape[axis % x.ndim] = t.numel()
    return t.reshape(shape)


def _quantize(x: Tensor, scale: Tensor, zero: Tensor, a: Attrs) -> Tensor:
    """QuantizeLinear, kept as a float tensor of integer values (round half to even)."""
    import torch

    lo, hi = _quant_range(zero)
    axis = int(a.get("axis", 1))
    q = torch.round(x / _per_axis(scale, x, axis)) + _per_axis(zero, x, axis).to(x.dtype)
    return q.clamp(lo, hi)


def _dequantize(q: Tensor, scale: Tensor, zero: Tensor, a: Attrs) -> Tensor:
    axis = int(a.get("axis", 1))
    s = _per_axis(scale, q, axis)
    return (q.to(s.dtype) - _per_axis(zero, q, axis).to(s.dtype)) * s


def _reshape(x: Tensor, shape: Tensor, a: Attrs) -> Tensor:
    dims = [int(d) for d in shape.tolist()]
    if not a.get("allowzero", 0):
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)


def _shape(x: Tensor, a: Attrs) -> Tensor:
    import torch

    dims = list(x.shape)[int(a.get("start", 0)):a.get("end")]
    return torch.tensor(dims, dtype=torch.int64)


def _slice(x: Tensor, starts: Tensor, ends: Tensor, axes: Tensor | None = None,
           steps: Tensor | None = None) -> Tensor:
    index = [slice(None)] * x.ndim
    axes_list = axes.tolist() if axes is not None else list(range(len(starts)))
    steps_list = steps.tolist() if steps is not None else [1] * len(starts)
    for s, e, ax, st in zip(starts.tolist(), ends.tolist(), axes_list, steps_list, strict=True):
        dim = x.shape[ax]  # ONNX's "to the end" is INT64_MAX: clamped as Python would
        index[ax] = slice(min(max(int(s), -dim - 1), dim), min(max(int(e), -dim - 1), dim),
                          int(st))
    return x[tuple(index)]


def _gather(x: Tensor, indices: Tensor, a: Attrs) -> Tensor:
    import torch

    axis = int(a.get("axis", 0)) % x.ndim
    flat = indices.reshape(-1).to(x.device) % x.shape[axis]
    out = torch.index_select(x, axis, flat)
    return out.reshape([*x.shape[:axis], *indices.shape, *x.shape[axis + 1:]])


def _conv(x: Tensor, w: Tensor, b: Tensor | None, a: Attrs) -> Tensor:
    from torch.nn import functional

    pads = list(a.get("pads", [0, 0]))
    if x.ndim != 3 or pads[0] != pads[1] or a.get("auto_pad", b"NOTSET") != b"NOTSET":
        raise ValueError(f"Conv: only 1-D with symmetric pads is supported (pads {pads})")
    return functional.conv1d(x, w, b, stride=a.get("strides", [1])[0], padding=pads[0],
                             dilation=a.get("dilations", [1])[0], groups=a.get("group", 1))


def _gemm(x: Tensor, w: Tensor, b: Tensor | None, a: Attrs) -> Tensor:
    x = x.T if a.get("transA", 0) else x
    w = w.T if a.get("transB", 0) else w
    out = float(a.get("alpha", 1.0)) * (x @ w)
    return out if b is None else out + float(a.get("beta", 1.0)) * b


def _layer_norm(x: Tensor, scale: Tensor, bias: Tensor | None, a: Attrs) -> Tensor:
    from torch.nn import functional

    axis = int(a.get("axis", -1)) % x.ndim
    return functional.layer_norm(x, list(x.shape[axis:]), scale, bias,
                                 float(a.get("epsilon", 1e-5)))


def _reduce_sum(x: Tensor, axes: Tensor | None, a: Attrs) -> Tensor:
    import torch

    if axes is None or axes.numel() == 0:
        if a.get("noop_with_empty_axes", 0):
            return x
        return torch.sum(x, dim=tuple(range(x.ndim)), keepdim=bool(a.get("keepdims", 1)))
    return torch.sum(x, dim=tuple(int(d) for d in axes.tolist()),
                     keepdim=bool(a.get("keepdims", 1)))


def _concat(*xs: Tensor, a: Attrs) -> Tensor:
    import torch

    return torch.cat(xs, dim=int(a["axis"]))


def _ops() -> dict[str, Callable[..., Tensor]]:
    import torch

    return {
        "QuantizeLinear": lambda x, s, z, a: _quantize(x, s, z, a),
        "DequantizeLinear": lambda q, s, z, a: _dequantize(q, s, z, a),
        "Add": lambda x, y, a: x + y,
        "Mul": lambda x, y, a: x * y,
        "Div": lambda x, y, a: x / y,
        "MatMul": lambda x, y, a: torch.matmul(x, y),
        "Erf": lambda x, a: torch.erf(x),
        "Tanh": lambda x, a: torch.tanh(x),
        "Sigmoid": lambda x, a: torch.sigmoid(x),
        "Softmax": lambda x, a: torch.softmax(x, dim=int(a.get("axis", -1))),
        "Transpose": lambda x, a: x.permute(*a["perm"]),
        "Reshape": lambda x, s, a: _reshape(x, s, a),
        "Shape": lambda x, a: _shape(x, a),
        "Slice": lambda x, *rest, a: _slice(x, *rest),
        "Gather": lambda x, i, a: _gather(x, i, a),
        "Concat": lambda *xs, a: _concat(*xs, a=a),
        "Conv": lambda x, w, b=None, a=None: _conv(x, w, b, a or {}),
        "Gemm": lambda x, w, b=None, a=None: _gemm(x, w, b, a or {}),
        "LayerNormalization": lambda x, s, b=None, a=None: _layer_norm(x, s, b, a or {}),
        "ReduceSum": lambda x, axes=None, a=None: _reduce_sum(x, axes, a or {}),
    }


class TorchGraph:
    """`model_path`'s graph on `device`: `run(name=array, ...)` -> its first output, a
    float32 NumPy array. Calls may run at once (each keeps its own values; the constants
    are only read; the captured graph's buffers are used under a lock). Inputs are float32."""

    def __init__(self, model_path: Path, device: str = "cpu", *, cuda_graph: bool = True
                 ) -> None:
        import onnx
        import torch
        from onnx import helper, numpy_helper

        model = onnx.load(str(model_path))
        graph = model.graph
        self.device = device
        self._ops = _ops()
        unknown = sorted({n.op_type for n in graph.node} - set(self._ops))
        if unknown:
            raise ValueError(f"{model_path.name}: operators not supported here: {unknown}")
        values: dict[str, Tensor] = {}
        for init in graph.initializer:
            array = numpy_helper.to_array(init)
            tensor = torch.from_numpy(np.array(array))
            # Integers that shape or index stay on the CPU; the quantized weights and the
            # zero points travel (their DequantizeLinear is folded below anyway).
            values[init.name] = tensor if array.dtype == np.int64 else tensor.to(device)
        self.inputs = [i.name for i in graph.input if i.name not in values]
        self.output = graph.output[0].name
        self._shapes = {i.name: tuple(d.dim_value or 1 for d in i.type.tensor_type.shape.dim)
                        for i in graph.input if i.name in self.inputs}
        # Fold what depends on constants only (the weights' DequantizeLinear, shape
        # constants), once; keep the rest in graph order.
        self._nodes: list[tuple[str, list[str], list[str], Attrs]] = []
        with torch.inference_mode():
            for node in graph.node:
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                step = (node.op_type, list(node.input), list(node.output), attrs)
                if all(name == "" or name in values for name in node.input):
                    self._execute(step, values)
                else:
                    self._nodes.append(step)
        # Only what the remaining nodes read (the folded weights' int8 originals go).
        read = {name for _, inputs, _, _ in self._nodes for name in inputs}
        self._constants = {name: v for name, v in values.items() if name in read}
        self._lock = threading.Lock()
        self._stream: Any = None
        self._replay: Any = None  # (graph, static inputs, static output, pinned in/out)
        if torch.device(device).type == "cuda":
            self._stream = torch.cuda.Stream(device)
            if cuda_graph:
                self._replay = self._captured()

    def _forward(self, inputs: dict[str, Tensor]) -> Tensor:
        """The output for `inputs` (tensors on the device), node by node."""
        values = {**self._constants, **inputs}
        for step in self._nodes:
            self._execute(step, values)
        return values[self.output]

    def _captured(self) -> Any:
        """The graph's nodes captured for `self._shapes` and checked, or None (logged)."""
        import torch

        stream, here = self._stream, torch.cuda.current_stream(self.device)
        static = {n: torch.zeros(shape, dtype=torch.float32, device=self.device)
                  for n, shape in self._shapes.items()}
        try:
            stream.wait_stream(here)
            with torch.inference_mode(), torch.cuda.stream(stream):
                for _ in range(2):  # warm-up off the default stream, as capture asks
                    self._forward(static)
            here.wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.inference_mode(), torch.cuda.graph(graph, stream=stream,
                                                          capture_error_mode="thread_local"):
                out = self._forward(static)
            pinned_in = {n: torch.zeros(t.shape, dtype=t.dtype).pin_memory()
                         for n, t in static.items()}
            pinned_out = torch.zeros(out.shape, dtype=out.dtype).pin_memory()
            replay = (graph, static, out, pinned_in, pinned_out)
            rng = np.random.default_rng(0)
            probe = {n: rng.standard_normal(shape).astype(np.float32)
                     for n, shape in self._shapes.items()}
            replayed, eager = self._replayed(replay, probe), self._eager(probe)
        except Exception as exc:  # capture refusals come as RuntimeErrors of many kinds
            logger.warning("graph capture failed, running eagerly: %s", exc)
            return None
        gap = float(np.max(np.abs(replayed - eager)))
        if not gap <= 1e-4:
            logger.warning("the captured graph differs from the eager run by %.2g: eager", gap)
            return None
        return replay

    def _execute(self, step: tuple[str, list[str], list[str], Attrs],
                 values: dict[str, Tensor]) -> None:
        op, inputs, outputs, attrs = step
        args = [values[name] if name else None for name in inputs]
        while args and args[-1] is None:
            args.pop()
        values[outputs[0]] = self._ops[op](*args, a=attrs)

    def run(self, **feeds: np.ndarray) -> np.ndarray:
        arrays = {n: np.ascontiguousarray(feeds[n], dtype=np.float32) for n in self.inputs}
        if self._replay is not None and all(a.shape == self._shapes[n]
                                            for n, a in arrays.items()):
            return self._replayed(self._replay, arrays)
        return self._eager(arrays)

    def _replayed(self, replay: Any, arrays: dict[str, np.ndarray]) -> np.ndarray:
        """The captured graph on `arrays`: copies in, one replay, the copy out."""
        import torch

        graph, static, out, pinned_in, pinned_out = replay
        with self._lock, torch.inference_mode(), torch.cuda.stream(self._stream):
            for name, array in arrays.items():
                pinned_in[name].numpy()[:] = array
                static[name].copy_(pinned_in[name], non_blocking=True)
            graph.replay()
            pinned_out.copy_(out, non_blocking=True)
            wait_for_device(torch, self.device)
            return np.array(pinned_out.float().numpy(), dtype=np.float32)

    def _eager(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        """The nodes one by one (on CUDA on the graph's stream, the wait asleep)."""
        import torch

        on_cuda = self._stream is not None
        with torch.inference_mode(), (torch.cuda.stream(self._stream) if on_cuda
                                      else contextlib.nullcontext()):
            out = self._forward({n: torch.from_numpy(a).to(self.device)
                                 for n, a in arrays.items()})
            host = out.float().to("cpu", non_blocking=on_cuda)
            if on_cuda:
                wait_for_device(torch, self.device)
        return np.array(host.numpy(), dtype=np.float32)
