"""An ONNX graph run node by node in torch: a model file's own function on any torch device.

Why: two shipped models are ONNX files only, and the GPU machine's onnxruntime runs them on
the CPU (or, with its CUDA provider, slower than there: piper, bench/RESULTS.md section gpu).
- Smart Turn v3.2 is a statically quantized (QDQ) int8 graph. Read into a float32 network its
  weights are right but its activations are not rounded where the file rounds them (up to 0.8
  apart on borderline windows, section turn); run as the graph, every QuantizeLinear /
  DequantizeLinear at its place, it gives the file's function.
- A piper voice (VITS) is ~2,700 nodes with data-dependent shapes (the phonemes' durations
  set the audio's length): run as the graph, each call is the file's function at its input's
  shapes.

What it runs: the operators in `_Ops` (ONNX opset 15-18 semantics as those files use them);
any other operator is refused when the graph is loaded, naming it. Constant subgraphs (the
weights' DequantizeLinear, shape constants) are computed once at load. Integer tensors that
come from shapes or integer inputs stay on the CPU, so shape arithmetic never waits for the
device; an operation that meets a device tensor and a CPU one moves the CPU one over (counted
in `moves`: none in Smart Turn's graph, a few small masks in piper's).

On CUDA a graph with float32 inputs and one output can be captured as a CUDA graph for
given input shapes (Smart Turn's fixed ones, symbolic dimensions as 1, at load; a piper
decoder's length buckets, engines/tts/piper_split.py) on the graph's own stream, as the
portrait's warp is (engines/face/gpu_warp.py): a call of those shapes is a copy in, one
replay and a copy out, its wait asleep (engines/device_wait.py). Each capture is checked
against the eager run on a test input before it serves; one that fails or differs is logged
and those calls run eagerly on that stream instead. Graphs whose shapes depend on their
values (a whole piper voice) run eagerly.
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
Step = tuple[str, list[str], list[str], Attrs]

# ONNX TensorProto element types -> NumPy dtypes (those the two files use, and their kin).
_NUMPY_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_,
                10: np.float16, 11: np.float64}


def _ints(t: Tensor | np.ndarray) -> list[int]:
    """A small integer tensor's values on the host (a shape, axes, pads)."""
    return [int(v) for v in t.reshape(-1).tolist()]


def _host_slice(x: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                axes: np.ndarray | None = None, steps: np.ndarray | None = None) -> np.ndarray:
    index = [slice(None)] * x.ndim
    axes_list = _ints(axes) if axes is not None else list(range(starts.size))
    steps_list = _ints(steps) if steps is not None else [1] * starts.size
    for s, e, ax, st in zip(_ints(starts), _ints(ends), axes_list, steps_list, strict=True):
        dim = x.shape[ax]  # INT64_MAX / MIN clamped: NumPy's slices take any int
        index[ax] = slice(min(max(s, -dim - 1), dim), min(max(e, -dim - 1), dim), st)
    return x[tuple(index)]


def _host_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f" or y.dtype.kind == "f":
        return np.asarray(x / y, dtype=np.result_type(x, y))
    return np.asarray(np.trunc(x / y), dtype=np.result_type(x, y))


def _host_unsqueeze(x: np.ndarray, axes: np.ndarray) -> np.ndarray:
    rank = x.ndim + axes.size
    return np.expand_dims(x, tuple(sorted(d % rank for d in _ints(axes))))


def _host_ops() -> dict[str, Callable[..., Any]]:
    """Shape arithmetic in NumPy: the ops whose inputs are all host arrays (shapes, integer
    inputs, their sums and slices) run here, ~10x cheaper per call than torch's CPU ops
    (~1,100 of a piper voice's ~2,700 nodes each call). Reshape and Squeeze are the torch
    path's own functions: they only read shapes."""
    return {
        "Add": lambda x, y, a: np.add(x, y),
        "Sub": lambda x, y, a: np.subtract(x, y),
        "Mul": lambda x, y, a: np.multiply(x, y),
        "Div": lambda x, y, a: _host_div(x, y),
        "Equal": lambda x, y, a: np.equal(x, y),
        "Less": lambda x, y, a: np.less(x, y),
        "LessOrEqual": lambda x, y, a: np.less_equal(x, y),
        "GreaterOrEqual": lambda x, y, a: np.greater_equal(x, y),
        "And": lambda x, y, a: np.logical_and(x, y),
        "Not": lambda x, a: np.logical_not(x),
        "Neg": lambda x, a: np.negative(x),
        "Where": lambda c, x, y, a: np.where(c, x, y),
        "Cast": lambda x, a: x.astype(_NUMPY_TYPES[int(a["to"])]),
        "Unsqueeze": lambda x, axes, a: _host_unsqueeze(x, axes),
        "Squeeze": lambda x, axes=None, a=None: _squeeze(x, axes),
        "Concat": lambda *xs, a: np.concatenate(xs, axis=int(a["axis"])),
        "Gather": lambda x, i, a: np.take(x, i % x.shape[int(a.get("axis", 0))],
                                          axis=int(a.get("axis", 0))),
        "Reshape": lambda x, shape, a: _reshape(x, shape, a),
        "Expand": lambda x, s, a: np.broadcast_to(x, np.broadcast_shapes(x.shape,
                                                                         tuple(_ints(s)))),
        "Slice": lambda x, *rest, a: _host_slice(x, *rest),
        "Range": lambda s, e, d, a: np.arange(s.item(), e.item(), d.item(), dtype=s.dtype),
        "ReduceMax": lambda x, axes=None, a=None: _reduce(np.amax, x, axes, a or {}),
    }


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


def _reshape(x: Tensor | np.ndarray, shape: Tensor | np.ndarray, a: Attrs) -> Any:
    dims = _ints(shape)
    if not a.get("allowzero", 0):
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)


def _shape(x: Tensor | np.ndarray, a: Attrs) -> np.ndarray:
    """A host array, whatever `x` is: shapes are the host's."""
    return np.array(list(x.shape)[int(a.get("start", 0)):a.get("end")], dtype=np.int64)


def _slice(x: Tensor, starts: Tensor, ends: Tensor, axes: Tensor | None = None,
           steps: Tensor | None = None) -> Tensor:
    import torch

    index = [slice(None)] * x.ndim
    starts_list, ends_list = _ints(starts), _ints(ends)
    axes_list = _ints(axes) if axes is not None else list(range(len(starts_list)))
    steps_list = _ints(steps) if steps is not None else [1] * len(starts_list)
    flips = []
    for s, e, ax, st in zip(starts_list, ends_list, axes_list, steps_list, strict=True):
        dim = x.shape[ax]  # ONNX's "to the end" is INT64_MAX: clamped as Python would
        if st > 0:
            index[ax] = slice(min(max(s, -dim - 1), dim), min(max(e, -dim - 1), dim), st)
        else:  # torch has no negative steps: the forward slice of the same elements, flipped
            picked = range(dim)[slice(s, e, st)]
            if len(picked) == 0:
                index[ax] = slice(0, 0)
            else:
                index[ax] = slice(picked[-1], picked[0] + 1, -st)
                flips.append(ax % x.ndim)
    out = x[tuple(index)]
    return torch.flip(out, flips) if flips else out


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


def _conv_transpose(x: Tensor, w: Tensor, b: Tensor | None, a: Attrs) -> Tensor:
    from torch.nn import functional

    pads = list(a.get("pads", [0, 0]))
    if (x.ndim != 3 or pads[0] != pads[1] or a.get("auto_pad", b"NOTSET") != b"NOTSET"
            or "output_shape" in a):
        raise ValueError(f"ConvTranspose: only 1-D with symmetric pads is supported "
                         f"(pads {pads})")
    return functional.conv_transpose1d(
        x, w, b, stride=a.get("strides", [1])[0], padding=pads[0],
        output_padding=a.get("output_padding", [0])[0], groups=a.get("group", 1),
        dilation=a.get("dilations", [1])[0])


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


def _reduce(fn: Callable[..., Tensor], x: Tensor, axes: Tensor | None, a: Attrs) -> Tensor:
    """ReduceSum/Mean/Max: the axes as an input (opset 13/18) or an attribute (before)."""
    keep = bool(a.get("keepdims", 1))
    dims = _ints(axes) if axes is not None else list(a.get("axes", []))
    if not dims:
        if a.get("noop_with_empty_axes", 0):
            return x
        dims = list(range(x.ndim))
    if isinstance(x, np.ndarray):
        return fn(x, axis=tuple(dims), keepdims=keep)
    return fn(x, dim=tuple(dims), keepdim=keep)


def _unsqueeze(x: Tensor, axes: Tensor) -> Tensor:
    rank = x.ndim + axes.numel()
    for axis in sorted(d % rank for d in _ints(axes)):
        x = x.unsqueeze(axis)
    return x


def _squeeze(x: Tensor | np.ndarray, axes: Tensor | np.ndarray | None = None) -> Any:
    if axes is None:
        return x.reshape([d for d in x.shape if d != 1])
    drop = {d % x.ndim for d in _ints(axes)}
    return x.reshape([d for i, d in enumerate(x.shape) if i not in drop])


def _pad(x: Tensor, pads: Tensor, value: Tensor | None, a: Attrs) -> Tensor:
    from torch.nn import functional

    if a.get("mode", b"constant") != b"constant":
        raise ValueError(f"Pad: only mode constant is supported, not {a.get('mode')!r}")
    p = _ints(pads)
    rank = len(p) // 2
    pairs: list[int] = []
    for axis in reversed(range(rank)):  # torch's order: the last axis first
        pairs += [p[axis], p[axis + rank]]
    fill = 0.0 if value is None or value.numel() == 0 else float(value.reshape(-1)[0])
    return functional.pad(x, pairs, mode="constant", value=fill)


def _split(x: Tensor, sizes: Tensor | None, a: Attrs, outputs: int) -> tuple[Tensor, ...]:
    import torch

    axis = int(a.get("axis", 0))
    if sizes is not None:
        return tuple(torch.split(x, _ints(sizes), dim=axis))
    parts = int(a.get("num_outputs", outputs))
    return tuple(torch.tensor_split(x, parts, dim=axis))


def _cumsum(x: Tensor, axis: Tensor, a: Attrs) -> Tensor:
    import torch

    dim = _ints(axis)[0]
    y = torch.flip(x, [dim]) if a.get("reverse", 0) else x
    out = torch.cumsum(y, dim=dim)
    if a.get("exclusive", 0):
        out = out - y
    return torch.flip(out, [dim]) if a.get("reverse", 0) else out


def _scatter_nd(data: Tensor, indices: Tensor, updates: Tensor, a: Attrs) -> Tensor:
    if a.get("reduction", b"none") not in (b"none", "none"):
        raise ValueError(f"ScatterND: reduction {a['reduction']!r} is not supported")
    k = indices.shape[-1]
    flat = indices.reshape(-1, k)
    out = data.clone()
    out[tuple(flat.T)] = updates.reshape(-1, *data.shape[k:])
    return out


def _gather_nd(data: Tensor, indices: Tensor, a: Attrs) -> Tensor:
    if a.get("batch_dims", 0):
        raise ValueError("GatherND: batch_dims is not supported")
    k = indices.shape[-1]
    picked = data[tuple(indices.reshape(-1, k).T)]
    return picked.reshape(*indices.shape[:-1], *data.shape[k:])


def _div(x: Tensor, y: Tensor) -> Tensor:
    import torch

    if x.dtype.is_floating_point or y.dtype.is_floating_point:
        return x / y
    return torch.div(x, y, rounding_mode="trunc")  # ONNX's integer division truncates


class _Ops:
    """The operators, bound to the graph's device: what a node may produce where.

    Each takes the node's inputs (None for an absent optional one) and its attributes `a`.
    `moves` counts CPU tensors moved to the device because an operation met both."""

    def __init__(self, device: str) -> None:
        import torch
        from torch.nn import functional

        self.device = torch.device(device)
        self.moves = 0
        t, f, al = torch, functional, self._aligned

        def binary(fn: Callable[[Tensor, Tensor], Tensor]) -> Callable[..., Tensor]:
            return lambda x, y, a: fn(*al(x, y))

        self.table: dict[str, Callable[..., Any]] = {
            "QuantizeLinear": lambda x, s, z, a: _quantize(x, s, z, a),
            "DequantizeLinear": lambda q, s, z, a: _dequantize(q, s, z, a),
            "Add": binary(t.add),
            "Sub": binary(t.sub),
            "Mul": binary(t.mul),
            "Div": binary(_div),
            "Pow": binary(t.pow),
            "MatMul": binary(t.matmul),
            "Equal": binary(t.eq),
            "Less": binary(t.lt),
            "LessOrEqual": binary(t.le),
            "GreaterOrEqual": binary(t.ge),
            "And": binary(t.logical_and),
            "Not": lambda x, a: t.logical_not(x),
            "Neg": lambda x, a: t.neg(x),
            "Exp": lambda x, a: t.exp(x),
            "Sqrt": lambda x, a: t.sqrt(x),
            "Ceil": lambda x, a: t.ceil(x),
            "Erf": lambda x, a: t.erf(x),
            "Tanh": lambda x, a: t.tanh(x),
            "Sigmoid": lambda x, a: t.sigmoid(x),
            "Relu": lambda x, a: t.relu(x),
            "LeakyRelu": lambda x, a: f.leaky_relu(x, float(a.get("alpha", 0.01))),
            "Softplus": lambda x, a: f.softplus(x),
            "Softmax": lambda x, a: t.softmax(x, dim=int(a.get("axis", -1))),
            "Clip": lambda x, lo=None, hi=None, a=None: x if lo is None and hi is None
            else t.clamp(*al(x, lo, hi)),
            "Where": lambda c, x, y, a: t.where(*al(c, x, y)),
            "Cast": lambda x, a: x.to(_torch_type(int(a["to"]))),
            "Transpose": lambda x, a: x.permute(*a["perm"]) if "perm" in a else x.permute(
                *reversed(range(x.ndim))),
            "Reshape": lambda x, s, a: _reshape(x, s, a),
            "Shape": lambda x, a: _shape(x, a),
            "Unsqueeze": lambda x, axes, a: _unsqueeze(x, axes),
            "Squeeze": lambda x, axes=None, a=None: _squeeze(x, axes),
            "Expand": lambda x, s, a: x.expand(t.broadcast_shapes(tuple(x.shape),
                                                                 tuple(_ints(s)))),
            "Slice": lambda x, *rest, a: _slice(x, *rest),
            "Gather": lambda x, i, a: _gather(x, i, a),
            "GatherElements": lambda x, i, a: self._gather_elements(x, i, a),
            "GatherND": lambda x, i, a: self._gather_nd(x, i, a),
            "ScatterND": lambda d, i, u, a: self._scatter_nd(d, i, u, a),
            "Concat": lambda *xs, a: t.cat(al(*xs), dim=int(a["axis"])),
            "Split": lambda x, s=None, a=None, n=1: _split(x, s, a or {}, n),
            "Pad": lambda x, p, v=None, a=None: _pad(x, p, v, a or {}),
            "ConstantOfShape": lambda s, a: self._constant_of_shape(s, a),
            "Range": lambda s, e, d, a: t.arange(s.item(), e.item(), d.item(), dtype=s.dtype,
                                                 device=s.device),
            "NonZero": lambda x, a: t.nonzero(x).T.contiguous(),
            "CumSum": lambda x, axis, a: _cumsum(x, axis, a),
            "RandomNormalLike": lambda x, a: self._random_normal_like(x, a),
            "Conv": lambda x, w, b=None, a=None: _conv(x, w, b, a or {}),
            "ConvTranspose": lambda x, w, b=None, a=None: _conv_transpose(x, w, b, a or {}),
            "Gemm": lambda x, w, b=None, a=None: _gemm(x, w, b, a or {}),
            "LayerNormalization": lambda x, s, b=None, a=None: _layer_norm(x, s, b, a or {}),
            "ReduceSum": lambda x, axes=None, a=None: _reduce(t.sum, x, axes, a or {}),
            "ReduceMean": lambda x, axes=None, a=None: _reduce(t.mean, x, axes, a or {}),
            "ReduceMax": lambda x, axes=None, a=None: _reduce(t.amax, x, axes, a or {}),
        }

    def _aligned(self, *xs: Any) -> list[Any]:
        """The inputs on one device: CPU tensors meeting a device tensor move to it."""
        if all(x is None or x.device == self.device for x in xs) or all(
                x is None or x.device.type == "cpu" for x in xs):
            return list(xs)
        out = []
        for x in xs:
            if x is not None and x.device != self.device:
                x = x.to(self.device)
                self.moves += 1
            out.append(x)
        return out

    def _gather_nd(self, x: Tensor, indices: Tensor, a: Attrs) -> Tensor:
        x, indices = self._aligned(x, indices)
        return _gather_nd(x, indices, a)

    def _scatter_nd(self, data: Tensor, indices: Tensor, updates: Tensor, a: Attrs) -> Tensor:
        data, indices, updates = self._aligned(data, indices, updates)
        return _scatter_nd(data, indices, updates, a)

    def _gather_elements(self, x: Tensor, indices: Tensor, a: Attrs) -> Tensor:
        import torch

        axis = int(a.get("axis", 0)) % x.ndim
        x, indices = self._aligned(x, indices)
        return torch.gather(x, axis, indices % x.shape[axis])

    def _constant_of_shape(self, shape: Tensor | np.ndarray, a: Attrs
                           ) -> Tensor | np.ndarray:
        """Floats where the data is (the device), integers and booleans on the host."""
        import torch
        from onnx import numpy_helper

        value = (np.array(numpy_helper.to_array(a["value"])).reshape(-1)[0] if "value" in a
                 else np.float32(0))
        if value.dtype.kind != "f":
            return np.full(_ints(shape), value, dtype=value.dtype)
        dtype = torch.from_numpy(np.array([value])).dtype
        return torch.full(_ints(shape), value.item(), dtype=dtype, device=self.device)

    @staticmethod
    def _random_normal_like(x: Tensor, a: Attrs) -> Tensor:
        import torch

        dtype = _torch_type(int(a["dtype"])) if "dtype" in a else x.dtype
        noise = torch.randn(x.shape, dtype=dtype, device=x.device)
        return noise * float(a.get("scale", 1.0)) + float(a.get("mean", 0.0))


# Ops whose input is a shape and whose output is placed by the op itself (host or device).
_SHAPE_OPS = frozenset({"Shape", "ConstantOfShape"})


def _tensor(x: Tensor | np.ndarray | None) -> Tensor | None:
    """A host array as a CPU tensor for a torch op (copied where NumPy gave a view)."""
    import torch

    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.require(x, requirements=["C", "W"]))
    return x


def _torch_type(onnx_type: int) -> Any:
    import torch

    if onnx_type not in _NUMPY_TYPES:
        raise ValueError(f"element type {onnx_type} is not supported")
    return torch.from_numpy(np.zeros(1, _NUMPY_TYPES[onnx_type])).dtype


class TorchGraph:
    """`model`'s graph (a file, or an `onnx.ModelProto`) on `device`, called as an
    onnxruntime session is: `run(None, {name: array})` -> its outputs as NumPy arrays.
    Calls may run at once (each keeps its own values; the constants are only read; a
    captured graph's buffers are used under a lock). `cuda_graph`: capture where the graph
    allows it (see the module)."""

    def __init__(self, model: Path | Any, device: str = "cpu", *, cuda_graph: bool = True
                 ) -> None:
        import onnx
        import torch
        from onnx import helper, numpy_helper

        label = model.name if isinstance(model, Path) else "the graph"
        if isinstance(model, Path):
            model = onnx.load(str(model))
        graph = model.graph
        self.device = device
        self._ops = _Ops(device)
        self._host = _host_ops()
        unknown = sorted({n.op_type for n in graph.node} - set(self._ops.table))
        if unknown:
            raise ValueError(f"{label}: operators not supported here: {unknown}")
        values: dict[str, Tensor] = {}
        for init in graph.initializer:
            array = np.array(numpy_helper.to_array(init))
            # Integers shape or index: host arrays (quantized weights' zero points travel;
            # their DequantizeLinear is folded below anyway).
            values[init.name] = (array if array.dtype == np.int64
                                 else torch.from_numpy(array).to(device))
        self.inputs = [i.name for i in graph.input if i.name not in values]
        self.outputs = [o.name for o in graph.output]
        types = {i.name: _NUMPY_TYPES.get(i.type.tensor_type.elem_type) for i in graph.input}
        self._types: dict[str, Any] = {name: types[name] or np.float32 for name in self.inputs}
        self._shapes = {i.name: tuple(d.dim_value or 1 for d in i.type.tensor_type.shape.dim)
                        for i in graph.input if i.name in self.inputs}
        # Fold what depends on constants only (the weights' DequantizeLinear, shape
        # constants), once; keep the rest in graph order.
        self._nodes: list[Step] = []
        with torch.inference_mode():
            for node in graph.node:
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                step = (node.op_type, list(node.input), list(node.output), attrs)
                if all(name == "" or name in values for name in node.input):
                    self._execute(step, values)
                else:
                    self._nodes.append(step)
        # Only what the remaining nodes read (the folded weights' int8 originals go).
        read = {name for _, inputs, _, _ in self._nodes for name in inputs} | set(self.outputs)
        self._constants = {name: v for name, v in values.items() if name in read}
        self._lock = threading.Lock()
        self._stream: Any = None
        # Captures by the inputs' shapes: (graph, static inputs, static output, pinned in/out)
        self._replays: dict[tuple[tuple[int, ...], ...], Any] = {}
        if torch.device(device).type == "cuda":
            self._stream = torch.cuda.Stream(device)
            if cuda_graph and self.capturable:
                self.capture(self._shapes)

    @property
    def capturable(self) -> bool:
        """Whether `capture` may work: on CUDA, one output, float32 inputs only."""
        return self._stream is not None and len(self.outputs) == 1 and all(
            t == np.float32 for t in self._types.values())

    @property
    def captured(self) -> list[tuple[tuple[int, ...], ...]]:
        """The input shapes (in `inputs` order) that run as a captured CUDA graph."""
        return list(self._replays)

    def capture(self, shapes: dict[str, tuple[int, ...]]) -> bool:
        """Capture the graph for inputs of `shapes` (its shape arithmetic must not read the
        device's values), checked against the eager run; False (logged) where it failed or
        differed: such calls run eagerly."""
        if not self.capturable:
            return False
        key = tuple(tuple(shapes[n]) for n in self.inputs)
        if key not in self._replays:
            replay = self._captured(shapes)
            if replay is None:
                return False
            self._replays[key] = replay
        return True

    @property
    def moves(self) -> int:
        """CPU tensors moved to the device by operations that met both, so far."""
        return self._ops.moves

    def _forward(self, inputs: dict[str, Tensor]) -> list[Tensor]:
        """The outputs for `inputs` (tensors where `_placed` put them), node by node."""
        values = {**self._constants, **inputs}
        for step in self._nodes:
            self._execute(step, values)
        return [values[name] for name in self.outputs]

    def _execute(self, step: Step, values: dict[str, Tensor]) -> None:
        op, inputs, outputs, attrs = step
        args = [values[name] if name else None for name in inputs]
        while args and args[-1] is None:
            args.pop()
        result: Any
        if op in _SHAPE_OPS:
            result = self._ops.table[op](*args, a=attrs)
        elif op in self._host and all(x is None or isinstance(x, np.ndarray) for x in args):
            result = np.asarray(self._host[op](*args, a=attrs))
        else:
            args = [_tensor(x) for x in args]
            if op == "Split":
                result = self._ops.table[op](*args, a=attrs, n=len(outputs))
            else:
                result = self._ops.table[op](*args, a=attrs)
        if isinstance(result, tuple):
            values.update(zip(outputs, result, strict=True))
        else:
            values[outputs[0]] = result

    def _placed(self, arrays: dict[str, np.ndarray]) -> dict[str, Tensor | np.ndarray]:
        """Inputs: floats as tensors on the device, integers (ids, lengths) host arrays."""
        import torch

        return {n: torch.from_numpy(a).to(self.device) if a.dtype.kind == "f" else a
                for n, a in arrays.items()}

    def _captured(self, shapes: dict[str, tuple[int, ...]]) -> Any:
        """The graph's nodes captured for `shapes` and checked, or None (logged)."""
        import torch

        stream, here = self._stream, torch.cuda.current_stream(self.device)
        static = {n: torch.zeros(shapes[n], dtype=torch.float32, device=self.device)
                  for n in self.inputs}
        try:
            stream.wait_stream(here)
            with torch.inference_mode(), torch.cuda.stream(stream):
                for _ in range(2):  # warm-up off the default stream, as capture asks
                    self._forward(static)
            here.wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.inference_mode(), torch.cuda.graph(graph, stream=stream,
                                                          capture_error_mode="thread_local"):
                out = self._forward(static)[0]
            pinned_in = {n: torch.zeros(t.shape, dtype=t.dtype).pin_memory()
                         for n, t in static.items()}
            pinned_out = torch.zeros(out.shape, dtype=out.dtype).pin_memory()
            replay = (graph, static, out, pinned_in, pinned_out)
            rng = np.random.default_rng(0)
            probe = {n: rng.standard_normal(shapes[n]).astype(np.float32)
                     for n in self.inputs}
            replayed, eager = self._replayed(replay, probe), self._eager(probe)[0]
        except Exception as exc:  # capture refusals come as RuntimeErrors of many kinds
            logger.warning("graph capture failed, running eagerly: %s", exc)
            return None
        gap = float(np.max(np.abs(replayed - eager)))
        if not gap <= 1e-4:
            logger.warning("the captured graph differs from the eager run by %.2g: eager", gap)
            return None
        return replay

    def run(self, output_names: list[str] | None, feeds: dict[str, np.ndarray]
            ) -> list[np.ndarray]:
        """onnxruntime's `InferenceSession.run`: the named outputs (None: all), in order."""
        missing = [n for n in self.inputs if n not in feeds]
        if missing:
            raise ValueError(f"missing inputs: {missing}")
        arrays = {n: np.ascontiguousarray(feeds[n], dtype=self._types[n]) for n in self.inputs}
        replay = self._replays.get(tuple(arrays[n].shape for n in self.inputs))
        outputs = [self._replayed(replay, arrays)] if replay else self._eager(arrays)
        if output_names is None:
            return outputs
        return [outputs[self.outputs.index(name)] for name in output_names]

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

    def _eager(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The nodes one by one (on CUDA on the graph's stream, the wait asleep)."""
        import torch

        on_cuda = self._stream is not None
        with torch.inference_mode(), (torch.cuda.stream(self._stream) if on_cuda
                                      else contextlib.nullcontext()):
            outs = self._forward(self._placed(arrays))
            host = [out if isinstance(out, np.ndarray) else out.to("cpu", non_blocking=on_cuda)
                    for out in outs]
            if on_cuda:
                wait_for_device(torch, self.device)
        return [np.array(h) if isinstance(h, np.ndarray) else np.array(h.numpy()) for h in host]


def resolve_device(device: str, section: str) -> str:
    """"auto": "cuda" where torch sees a GPU, else "cpu" (logged, naming the config
    `section` that asked); others as given."""
    if device != "auto":
        return device
    import torch

    chosen = "cuda" if torch.cuda.is_available() else "cpu"
    if chosen == "cpu":
        logger.warning("%s device = \"auto\": no GPU visible to torch, on the CPU", section)
    return chosen
