"""The variables of a CTranslate2 `model.bin`, read into NumPy arrays without CTranslate2.

Contract: `read_ct2_model(path)` -> `Ct2Model` (spec name, spec revision, variables by name,
aliases resolved to the same array). Float16 and float32 arrays come back as stored, bfloat16
as float32 (NumPy has no bfloat16); an int8 or int16 weight with its `<name>_scale` is
dequantized to float32 and its scale dropped. Scalars (flags, head counts) are 0-d arrays.
A truncated or corrupt file, or a binary version this reader does not know, raises
`AsrModelLoadError` naming the file and what is wrong.

The layout is the one CTranslate2's `ModelSpec._serialize` writes (python/ctranslate2/specs/
model_spec.py) and `Model::load` reads (src/models/model.cc): native byte order (little-endian
on every platform its wheels exist for), no alignment padding; a string is a u16 length that
counts a trailing NUL, then the bytes and the NUL.

    u32 binary version (1-6); from version 2: string spec name, u32 spec revision
    u32 variable count; per variable: string name, u8 rank, rank x u32 dimensions,
        from version 4: u8 dtype id (0 float32, 1 int8, 2 int16, 3 int32, 4 float16,
        5 bfloat16), u32 byte count; before: u8 item size (4 float32, 2 int16, 1 int8),
        u32 item count; then the bytes
    from version 3: u32 alias count; per alias: string alias, string variable name
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engines.asr.errors import AsrModelLoadError

MAX_BINARY_VERSION = 6  # CTranslate2 4.x writes 6
# dtype ids of binary version >= 4 (include/ctranslate2/types.h); bfloat16 is read as uint16
_DTYPES: dict[int, np.dtype] = {
    0: np.dtype("<f4"), 1: np.dtype("i1"), 2: np.dtype("<i2"), 3: np.dtype("<i4"),
    4: np.dtype("<f2"), 5: np.dtype("<u2"),
}
_BFLOAT16 = 5
_ITEM_SIZES: dict[int, np.dtype] = {4: np.dtype("<f4"), 2: np.dtype("<i2"), 1: np.dtype("i1")}
_MAX_RANK = 8


@dataclass
class Ct2Model:
    spec: str  # "WhisperSpec", "TransformerSpec", ...
    revision: int
    variables: dict[str, np.ndarray] = field(default_factory=dict)


class _Reader:
    """Bounds-checked reads over the file's bytes: running past the end names the offset."""

    def __init__(self, data: bytearray, path: Path) -> None:
        self._data = data
        self._view = memoryview(data)
        self.pos = 0
        self._path = path

    def _need(self, n: int, what: str) -> int:
        start = self.pos
        if start + n > len(self._data):
            raise AsrModelLoadError(
                f"{self._path} is truncated or corrupt: {what} of {n} bytes at offset {start} "
                f"runs past the end ({len(self._data)} bytes)"
            )
        self.pos += n
        return start

    def uint(self, fmt: str, what: str) -> int:
        size = struct.calcsize("<" + fmt)
        start = self._need(size, what)
        return int(struct.unpack_from("<" + fmt, self._data, start)[0])

    def string(self, what: str) -> str:
        length = self.uint("H", what)
        start = self._need(length, what)
        raw = bytes(self._view[start : start + length])
        if length == 0 or raw[-1] != 0:
            raise AsrModelLoadError(f"{self._path} is corrupt: {what} at offset {start} is not "
                                    "a NUL-terminated string")
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AsrModelLoadError(f"{self._path} is corrupt: {what} at offset {start} is not "
                                    "UTF-8") from exc

    def array(self, dtype: np.dtype, shape: tuple[int, ...], nbytes: int, what: str) -> np.ndarray:
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes != expected:
            raise AsrModelLoadError(f"{self._path} is corrupt: {what} holds {nbytes} bytes, its "
                                    f"shape {list(shape)} and type {dtype} need {expected}")
        start = self._need(nbytes, what)
        # A view on the (writable) file buffer: torch.from_numpy can share it without a copy.
        return np.frombuffer(self._data, dtype, count=nbytes // dtype.itemsize,
                             offset=start).reshape(shape)

    def at_end(self) -> bool:
        return self.pos == len(self._data)


def _variable(reader: _Reader, version: int) -> tuple[str, np.ndarray]:
    name = reader.string("a variable name")
    rank = reader.uint("B", f"the rank of {name}")
    if rank > _MAX_RANK:
        raise AsrModelLoadError(f"{reader._path} is corrupt: {name} has rank {rank}")
    shape = tuple(reader.uint("I", f"a dimension of {name}") for _ in range(rank))
    if version >= 4:
        type_id = reader.uint("B", f"the type of {name}")
        if type_id not in _DTYPES:
            raise AsrModelLoadError(f"{reader._path}: {name} has an unknown type id {type_id}")
        dtype = _DTYPES[type_id]
        nbytes = reader.uint("I", f"the size of {name}")
    else:
        item_size = reader.uint("B", f"the item size of {name}")
        if item_size not in _ITEM_SIZES:
            raise AsrModelLoadError(f"{reader._path}: {name} has items of {item_size} bytes")
        dtype = _ITEM_SIZES[item_size]
        nbytes = reader.uint("I", f"the item count of {name}") * item_size
    value = reader.array(dtype, shape, nbytes, name)
    if version >= 4 and type_id == _BFLOAT16:  # the high half of a float32
        value = (value.astype(np.uint32) << 16).view(np.float32)
    return name, value


def _dequantize(variables: dict[str, np.ndarray]) -> None:
    """int8 / int16 weights with a saved scale -> float32 (CTranslate2 stored round(w * scale):
    one scale per output row for int8, one per tensor for int16)."""
    for name in [n for n in variables if n + "_scale" in variables]:
        value, scale = variables[name], variables.pop(name + "_scale").astype(np.float32)
        if value.dtype.kind != "i":
            continue
        rows = value.reshape(value.shape[0], -1) if value.ndim else value.reshape(1, 1)
        per_row = scale.reshape(-1, 1) if scale.size > 1 else scale.reshape(1, 1)
        variables[name] = (rows.astype(np.float32) / per_row).reshape(value.shape)


def read_ct2_model(path: str | Path) -> Ct2Model:
    """Read every variable of a CTranslate2 `model.bin` (see the module docstring)."""
    path = Path(path)
    try:
        data = bytearray(path.read_bytes())
    except OSError as exc:
        raise AsrModelLoadError(f"cannot read {path}: {exc}") from exc
    reader = _Reader(data, path)
    version = reader.uint("I", "the binary version")
    if not 1 <= version <= MAX_BINARY_VERSION:
        raise AsrModelLoadError(
            f"{path} has CTranslate2 binary version {version}; this reader knows 1-"
            f"{MAX_BINARY_VERSION} (a newer CTranslate2 wrote it, or it is not a model.bin)"
        )
    spec, revision = "", 1
    if version >= 2:
        spec = reader.string("the spec name")
        revision = reader.uint("I", "the spec revision")
    model = Ct2Model(spec, revision)
    for _ in range(reader.uint("I", "the variable count")):
        name, value = _variable(reader, version)
        model.variables[name] = value
    aliases: list[tuple[str, str]] = []
    if version >= 3:
        for _ in range(reader.uint("I", "the alias count")):
            aliases.append((reader.string("an alias"), reader.string("an alias target")))
    if not reader.at_end():
        raise AsrModelLoadError(f"{path} is corrupt: {len(data) - reader.pos} bytes follow the "
                                "last alias")
    _dequantize(model.variables)  # before aliasing: an alias shares its target's float array
    for alias, target in aliases:
        if target not in model.variables:
            raise AsrModelLoadError(f"{path} is corrupt: alias {alias} names a missing {target}")
        model.variables[alias] = model.variables[target]
    return model
