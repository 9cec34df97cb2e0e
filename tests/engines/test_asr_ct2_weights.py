"""`engines.asr.ct2_weights`: a CTranslate2 model.bin written here in its layout (binary
version 6, as `ModelSpec._serialize` writes it) reads back value for value, aliases and
quantization scales resolved; damaged files fail with `AsrModelLoadError` naming the fault."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from engines.asr.ct2_weights import read_ct2_model
from engines.asr.errors import AsrModelLoadError

TYPE_IDS = {"float32": 0, "int8": 1, "int16": 2, "int32": 3, "float16": 4}


def _string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def model_bin(variables: dict[str, np.ndarray], aliases: dict[str, str], version: int = 6,
              bfloat16: frozenset[str] = frozenset()) -> bytes:
    """The bytes of a model.bin holding `variables` (those named in `bfloat16`: uint16 bit
    patterns stored with bfloat16's type id) and `aliases` (alias -> variable)."""
    out = [struct.pack("<I", version), _string("WhisperSpec"), struct.pack("<I", 3),
           struct.pack("<I", len(variables))]
    for name, value in sorted(variables.items()):
        type_id = 5 if name in bfloat16 else TYPE_IDS[str(value.dtype)]
        out += [_string(name), struct.pack("<B", value.ndim),
                *(struct.pack("<I", d) for d in value.shape),
                struct.pack("<BI", type_id, value.nbytes),
                value.astype(value.dtype.newbyteorder("<")).tobytes()]
    out.append(struct.pack("<I", len(aliases)))
    for alias, target in aliases.items():
        out += [_string(alias), _string(target)]
    return b"".join(out)


@pytest.fixture
def weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "decoder/embeddings/weight": rng.standard_normal((7, 4)).astype(np.float16),
        "encoder/conv1/bias": rng.standard_normal(4).astype(np.float32),
        "encoder/num_heads": np.array(2, np.int16),
        "decoder/pre_norm": np.array(1, np.int8),
    }


def test_variables_and_aliases_read_back(tmp_path: Path, weights: dict[str, np.ndarray]) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(model_bin(weights, {"decoder/projection/weight":
                                         "decoder/embeddings/weight"}))
    model = read_ct2_model(path)
    assert (model.spec, model.revision) == ("WhisperSpec", 3)
    got = model.variables
    assert set(got) == {*weights, "decoder/projection/weight"}
    for name, value in weights.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape
        np.testing.assert_array_equal(got[name], value)
    assert got["decoder/projection/weight"] is got["decoder/embeddings/weight"]
    assert int(got["encoder/num_heads"]) == 2


def test_int8_weights_are_dequantized_by_their_row_scales(tmp_path: Path) -> None:
    """CTranslate2 stores round(w * scale) with scale = 127 / max|row| (model_spec.py)."""
    w = np.array([[0.5, -1.0, 0.25], [2.0, 0.0, -2.0]], np.float32)
    scale = (127.0 / np.abs(w).max(axis=1)).astype(np.float32)
    q = np.rint(w * scale[:, None]).astype(np.int8)
    path = tmp_path / "model.bin"
    path.write_bytes(model_bin({"ffn/linear_0/weight": q, "ffn/linear_0/weight_scale": scale},
                               {"other/weight": "ffn/linear_0/weight"}))
    got = read_ct2_model(path).variables
    assert set(got) == {"ffn/linear_0/weight", "other/weight"}  # the scale is used up
    assert got["ffn/linear_0/weight"].dtype == np.float32
    np.testing.assert_allclose(got["ffn/linear_0/weight"], w, atol=2.0 / 127)
    assert got["other/weight"] is got["ffn/linear_0/weight"]


def test_bfloat16_becomes_float32(tmp_path: Path) -> None:
    values = np.array([1.0, -2.5, 0.15625], np.float32)
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)  # exact in bfloat16
    path = tmp_path / "model.bin"
    path.write_bytes(model_bin({"w": bits}, {}, bfloat16=frozenset({"w"})))
    np.testing.assert_array_equal(read_ct2_model(path).variables["w"], values)


@pytest.mark.parametrize("cut", [3, 20, 60, -9, -1])
def test_a_truncated_file_names_where_it_ends(
    tmp_path: Path, weights: dict[str, np.ndarray], cut: int
) -> None:
    data = model_bin(weights, {"decoder/projection/weight": "decoder/embeddings/weight"})
    path = tmp_path / "model.bin"
    path.write_bytes(data[:cut])
    with pytest.raises(AsrModelLoadError, match="truncated"):
        read_ct2_model(path)


def test_unknown_versions_and_corruption_are_named(
    tmp_path: Path, weights: dict[str, np.ndarray]
) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(model_bin(weights, {}, version=7))
    with pytest.raises(AsrModelLoadError, match="binary version 7"):
        read_ct2_model(path)
    path.write_bytes(model_bin(weights, {}) + b"\0\0")
    with pytest.raises(AsrModelLoadError, match="2 bytes follow"):
        read_ct2_model(path)
    path.write_bytes(model_bin(weights, {"a": "missing/weight"}))
    with pytest.raises(AsrModelLoadError, match="missing/weight"):
        read_ct2_model(path)
    with pytest.raises(AsrModelLoadError, match="cannot read"):
        read_ct2_model(tmp_path / "absent.bin")
