"""engines/graph_torch.py's operators against onnxruntime, one small graph each, at the
corners the two shipped models do not reach (negative steps, reversed and exclusive sums,
integer division of negatives, scatter and gather by index tuples, shapes that broadcast both
ways), on the CPU and on the host path (integer inputs run in NumPy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engines.graph_torch import TorchGraph

onnx = pytest.importorskip("onnx")
pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
         np.dtype(np.bool_): TensorProto.BOOL}


def _both(node: object, feeds: dict[str, np.ndarray], out_type: int,
          constants: dict[str, np.ndarray] | None = None, outputs: int = 1
          ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """onnxruntime's and the torch graph's outputs of the one-node graph `node`."""
    inputs = [helper.make_tensor_value_info(n, TYPES[a.dtype], list(a.shape))
              for n, a in feeds.items()]
    names = list(node.output)  # type: ignore[attr-defined]
    outs = [helper.make_tensor_value_info(n, out_type, None) for n in names[:outputs]]
    inits = [numpy_helper.from_array(a, n) for n, a in (constants or {}).items()]
    graph = helper.make_graph([node], "g", inputs, outs, initializer=inits)  # type: ignore[list-item]
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    reference = ort.InferenceSession(model.SerializeToString(),
                                     providers=["CPUExecutionProvider"]).run(None, feeds)
    return reference, TorchGraph(model).run(None, feeds)


def _same(pair: tuple[list[np.ndarray], list[np.ndarray]]) -> None:
    reference, ours = pair
    assert len(reference) == len(ours)
    for r, o in zip(reference, ours, strict=True):
        assert r.shape == o.shape and r.dtype == o.dtype
        np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-6)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 5, 7)).astype(np.float32)
I64 = np.array([[7, -7, 9], [-9, 5, -5]], np.int64)


@pytest.mark.parametrize("x", [X, np.arange(24, dtype=np.int64).reshape(2, 3, 4)])
def test_slices_with_negative_steps_and_clamped_ends(x: np.ndarray) -> None:
    c = {"s": np.array([-1, 0], np.int64), "e": np.array([-10**18, 9], np.int64),
         "a": np.array([1, 2], np.int64), "t": np.array([-2, 3], np.int64)}
    _same(_both(helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"]), {"x": x},
                TYPES[x.dtype], c))


@pytest.mark.parametrize("reverse,exclusive", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumulative_sums(reverse: int, exclusive: int) -> None:
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], reverse=reverse,
                            exclusive=exclusive)
    _same(_both(node, {"x": X}, TensorProto.FLOAT, {"axis": np.array(1, np.int64)}))


@pytest.mark.parametrize("x", [X, np.arange(12, dtype=np.int64).reshape(3, 4)])
def test_pad_with_a_value_and_negative_pads(x: np.ndarray) -> None:
    rank = x.ndim
    pads = np.array([1, 0, 2][:rank] + [0, -1, 3][:rank], np.int64)
    value = np.array(5, x.dtype)
    node = helper.make_node("Pad", ["x", "p", "v"], ["y"], mode="constant")
    _same(_both(node, {"x": x}, TYPES[x.dtype], {"p": pads, "v": value}))


def test_integer_division_truncates_towards_zero() -> None:
    node = helper.make_node("Div", ["x", "d"], ["y"])
    _same(_both(node, {"x": I64}, TensorProto.INT64, {"d": np.array([2, -4, 3], np.int64)}))
    float_node = helper.make_node("Div", ["x", "d"], ["y"])  # the device path, floats
    _same(_both(float_node, {"x": X}, TensorProto.FLOAT, {"d": np.float32(1.5) * np.ones(
        (7,), np.float32)}))


def test_scatter_and_gather_by_index_tuples() -> None:
    idx = np.array([[0, 1], [2, 4], [1, 0]], np.int64)
    updates = RNG.standard_normal((3, 7)).astype(np.float32)
    _same(_both(helper.make_node("ScatterND", ["x", "i", "u"], ["y"]), {"x": X},
                TensorProto.FLOAT, {"i": idx, "u": updates}))
    _same(_both(helper.make_node("GatherND", ["x", "i"], ["y"]), {"x": X}, TensorProto.FLOAT,
                {"i": idx}))
    picks = RNG.integers(0, 7, (3, 5, 4)).astype(np.int64)
    _same(_both(helper.make_node("GatherElements", ["x", "i"], ["y"], axis=-1), {"x": X},
                TensorProto.FLOAT, {"i": picks}))


def test_expand_broadcasts_both_ways_and_shapes_are_host_arithmetic() -> None:
    x = RNG.standard_normal((3, 1, 7)).astype(np.float32)
    _same(_both(helper.make_node("Expand", ["x", "s"], ["y"]), {"x": x}, TensorProto.FLOAT,
                {"s": np.array([2, 1, 4, 1], np.int64)}))
    _same(_both(helper.make_node("Range", ["a", "b", "c"], ["y"]), {}, TensorProto.INT64,
                {"a": np.array(3, np.int64), "b": np.array(-8, np.int64),
                 "c": np.array(-3, np.int64)}))
    _same(_both(helper.make_node("Unsqueeze", ["x", "a"], ["y"]), {"x": I64},
                TensorProto.INT64, {"a": np.array([-1, 0], np.int64)}))
    _same(_both(helper.make_node("Squeeze", ["x", "a"], ["y"]), {"x": x}, TensorProto.FLOAT,
                {"a": np.array([-2], np.int64)}))
    _same(_both(helper.make_node("Squeeze", ["x", "a"], ["y"]), {"x": I64.reshape(2, 1, 3)},
                TensorProto.INT64, {"a": np.array([-2], np.int64)}))  # the host path
    _same(_both(helper.make_node("Reshape", ["x", "s"], ["y"]), {"x": I64}, TensorProto.INT64,
                {"s": np.array([0, -1, 1], np.int64)}))


def test_masks_where_and_nonzero() -> None:
    mask = X > 0.3
    _same(_both(helper.make_node("NonZero", ["m"], ["y"]), {"m": mask}, TensorProto.INT64))
    _same(_both(helper.make_node("Where", ["m", "x", "z"], ["y"]), {"m": mask, "x": X},
                TensorProto.FLOAT, {"z": np.zeros((7,), np.float32)}))
    node = helper.make_node("ConstantOfShape", ["s"], ["y"],
                            value=numpy_helper.from_array(np.array([4], np.int64)))
    _same(_both(node, {}, TensorProto.INT64, {"s": np.array([2, 3], np.int64)}))


def test_split_by_sizes_into_several_outputs() -> None:
    node = helper.make_node("Split", ["x", "s"], ["a", "b"], axis=2)
    _same(_both(node, {"x": X}, TensorProto.FLOAT, {"s": np.array([3, 4], np.int64)},
                outputs=2))


def test_piper_s_operators_are_all_supported() -> None:
    """The bundled voice loads (every operator known) and its integer inputs stay host
    arrays: nothing it reads is refused, nothing is guessed."""
    from engines.tts.piper_tts import default_voice_paths

    model, _ = default_voice_paths()
    graph = TorchGraph(Path(model))
    assert graph.inputs == ["input", "input_lengths", "scales"]
