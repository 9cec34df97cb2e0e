"""The shipped model file: one ONNX graph that every runtime loads.

Contract:
- `export_onnx(model, path, metrics)` writes the graph (input "features" [batch, time, 80],
  output "offsets" [batch, frames, 68, 2], both axes dynamic, opset 17) with the model's
  `ModelConfig` and the training metrics as ONNX metadata;
- `load_torch(path)` rebuilds the PyTorch module from that same file (architecture from the
  metadata, weights from the graph's initializers, which keep the state-dict names);
- `read_metadata(path)`, `onnx_sha256(path)` for reports and engine-cache keys.
"""

from __future__ import annotations

import functools
import hashlib
import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from engines.face.errors import ModelLoadError

DEFAULT_MODEL_PATH = Path(__file__).with_name("face_landmarks.onnx")
INPUT_NAME = "features"
OUTPUT_NAME = "offsets"
METRICS_KEY = "rtc_avatar.face.metrics"
OPSET = 17


def model_path(path: str | Path | None) -> Path:
    """The configured model file, or the shipped one; a clear error if it is missing."""
    resolved = Path(path) if path else DEFAULT_MODEL_PATH
    if not resolved.is_file():
        hint = " (train it with `python -m engines.face.training`)" if path is None else ""
        raise ModelLoadError(f"face model file not found: {resolved}{hint}")
    return resolved


def export_onnx(model: Any, path: str | Path, metrics: dict[str, Any] | None = None) -> Path:
    """Export an `AudioToLandmarks` module to ONNX with dynamic batch and time axes."""
    import onnx
    import torch

    from engines.face.model import CONFIG_KEY

    model = model.eval()
    example = torch.zeros(1, 40, model.config.n_mels)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.onnx"
        # The TorchScript exporter keeps initializer names equal to state-dict keys, which is
        # what lets the torch runtime load this very file; the dynamo one needs onnxscript.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TorchScript-exporter deprecation chatter
            torch.onnx.export(
                model, (example,), str(raw), dynamo=False, opset_version=OPSET,
                input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                dynamic_axes={INPUT_NAME: {0: "batch", 1: "time"},
                              OUTPUT_NAME: {0: "batch", 1: "frames"}},
            )
        proto = onnx.load(str(raw))
    meta = {CONFIG_KEY: model.config.to_json(), METRICS_KEY: json.dumps(metrics or {})}
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    proto.producer_name = "rtc-avatar engines.face"
    onnx.checker.check_model(proto)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(proto, str(out))
    return out


def read_metadata(path: str | Path) -> dict[str, str]:
    import onnx

    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises several unrelated types on corrupt files
        raise ModelLoadError(f"cannot read face model {path}: {exc}") from exc
    return {p.key: p.value for p in proto.metadata_props}


def load_torch(path: str | Path) -> Any:
    """The `AudioToLandmarks` module stored in an ONNX file (eval mode, CPU, float32)."""
    import onnx
    import torch
    from onnx import numpy_helper

    from engines.face.model import CONFIG_KEY, AudioToLandmarks, ModelConfig

    proto = onnx.load(str(path))
    meta = {p.key: p.value for p in proto.metadata_props}
    if CONFIG_KEY not in meta:
        raise ModelLoadError(f"{path} has no {CONFIG_KEY} metadata: not a face model export")
    model = AudioToLandmarks(ModelConfig.from_json(meta[CONFIG_KEY]))
    weights = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    state = model.state_dict()
    missing = [k for k in state if k not in weights]
    if missing:
        raise ModelLoadError(f"{path} lacks weights for {missing[:3]}...")
    model.load_state_dict({k: torch.from_numpy(np.array(weights[k])) for k in state})
    return model.eval()


@functools.cache
def _sha256_cached(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def onnx_sha256(path: str | Path) -> str:
    stat = Path(path).stat()
    return _sha256_cached(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)
