"""The audio-to-landmark model: shapes, determinism, bounded look-ahead, ONNX export and the
parity of the runtimes that exist here (ONNX Runtime CPU, torch CPU; torch CUDA and TensorRT
when present)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from engines.face import FaceConfig, create_face
from engines.face.artifact import export_onnx, load_torch, read_metadata
from engines.face.errors import InvalidInputError, ModelLoadError, RuntimeUnavailableError
from engines.face.features import N_MELS, SILENCE_VALUE, log_mel
from engines.face.model import CONFIG_KEY, build_model
from engines.face.runtime import FaceRuntime
from engines.face.tensorrt_runtime import engine_cache_key

# Stated tolerances (max abs difference of landmark offsets, in face units: 1.0 = the distance
# between the outer eye corners, so 1e-4 is ~0.01 px on a 512 px avatar).
CPU_PARITY = 1e-4  # onnxruntime vs torch, float32
GPU_FP32_PARITY = 1e-3  # TF32/cuDNN kernel choices
FP16_PARITY = 2e-2  # half precision (torch fp16, TensorRT FP16)


@pytest.fixture(scope="session")
def ort_face() -> FaceRuntime:
    return create_face()


@pytest.fixture(scope="session")
def features() -> np.ndarray:
    rng = np.random.default_rng(0)
    t = np.arange(3 * 16000) / 16000
    pcm = 0.2 * np.sin(2 * np.pi * 3 * t) ** 2 * rng.standard_normal(len(t))
    return log_mel(pcm.astype(np.float32), 16000)


def test_output_shape_follows_the_frame_count(ort_face: FaceRuntime,
                                              features: np.ndarray) -> None:
    out = ort_face.predict(features)
    assert out.shape == (len(features) // 4, 68, 2) and out.dtype == np.float32
    assert ort_face.predict(features[:10]).shape == (3, 68, 2)  # ceil(10 / 4)
    assert ort_face.predict(features[:0]).shape == (0, 68, 2)
    pcm = np.zeros(int(1.01 * 22050), np.int16)
    assert ort_face.animate(pcm, 22050).shape == (26, 68, 2)  # ceil(1.01 s * 25)


def test_predictions_are_deterministic(ort_face: FaceRuntime, features: np.ndarray) -> None:
    assert np.array_equal(ort_face.predict(features), ort_face.predict(features))


def test_fresh_models_are_seeded() -> None:
    a, b, c = build_model(seed=3), build_model(seed=3), build_model(seed=4)
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb), name
    assert not all(torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters(),
                                                          strict=True))


def test_look_ahead_is_at_most_six_feature_rows() -> None:
    model = build_model(seed=0).eval()
    lookahead = model.config.lookahead
    x = torch.randn(1, 200, N_MELS)
    with torch.no_grad():
        base = model(x)
        for row in (101, 102, 103, 130):
            bumped = x.clone()
            bumped[0, row] += 4.0
            changed = (model(bumped) - base).abs().amax(dim=(0, 2, 3)) > 0
            first = int(torch.nonzero(changed)[0])
            # Frame k (at feature row 4k) may only see rows <= 4k + lookahead.
            assert 4 * first + lookahead >= row
            assert 4 * (first - 1) + lookahead < row  # and the bound is tight
    assert lookahead * 10 + 12.5 <= 80  # ms of audio past the frame, with the window's half


def test_onnx_export_round_trip(tmp_path: Path) -> None:
    model = build_model(seed=1).eval()
    path = export_onnx(model, tmp_path / "m.onnx", {"note": "test"})
    assert CONFIG_KEY in read_metadata(path)
    face = create_face(FaceConfig(model_path=str(path)))
    x = np.random.default_rng(0).normal(-5, 3, size=(400, N_MELS)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)[None])[0].numpy()
        reloaded = load_torch(path)(torch.from_numpy(x)[None])[0].numpy()
    assert np.abs(face.predict(x) - expected).max() < CPU_PARITY
    assert np.array_equal(reloaded, expected)


def test_onnxruntime_and_torch_cpu_agree(ort_face: FaceRuntime, features: np.ndarray) -> None:
    torch_face = create_face(FaceConfig(engine="torch"))
    assert np.abs(ort_face.predict(features) - torch_face.predict(features)).max() < CPU_PARITY


def test_batch_equals_separate_calls(ort_face: FaceRuntime, features: np.ndarray) -> None:
    short, long_ = features[:160], features
    batched = ort_face.predict_batch([short, long_])
    assert batched[0].shape == (40, 68, 2) and batched[1].shape == (len(features) // 4, 68, 2)
    assert np.abs(batched[0] - ort_face.predict(short)).max() < 1e-5
    assert np.abs(batched[1] - ort_face.predict(long_)).max() < 1e-5


def test_silence_keeps_the_face_at_rest(ort_face: FaceRuntime) -> None:
    out = ort_face.predict(np.full((100, N_MELS), SILENCE_VALUE, np.float32))
    assert np.abs(out).max() < 0.02


@pytest.mark.parametrize(
    "bad",
    [np.zeros((10, 40), np.float32), np.zeros(80, np.float32), np.zeros((8, N_MELS), np.int32),
     np.full((8, N_MELS), np.nan, np.float32), np.zeros((7000, N_MELS), np.float32)],
)
def test_bad_features_are_refused(ort_face: FaceRuntime, bad: np.ndarray) -> None:
    with pytest.raises(InvalidInputError):
        ort_face.predict(bad)


def test_configuration_errors() -> None:
    with pytest.raises(InvalidInputError, match="unknown face engine"):
        create_face(FaceConfig(engine="coreml"))
    with pytest.raises(ModelLoadError, match="not found"):
        create_face(FaceConfig(model_path="/nonexistent/face.onnx"))


def test_engine_cache_key_separates_gpus_versions_and_models() -> None:
    base = engine_cache_key("NVIDIA H200", (9, 0), "10.9.0", "a" * 64, 64, 6000)
    assert base.endswith(".engine") and "nvidia-h200" in base
    others = {
        engine_cache_key("NVIDIA L4", (8, 9), "10.9.0", "a" * 64, 64, 6000),
        engine_cache_key("NVIDIA H200", (9, 0), "10.13.0", "a" * 64, 64, 6000),
        engine_cache_key("NVIDIA H200", (9, 0), "10.9.0", "b" * 64, 64, 6000),
        engine_cache_key("NVIDIA H200", (9, 0), "10.9.0", "a" * 64, 32, 6000),
    }
    assert base not in others and len(others) == 4


def _has_tensorrt() -> bool:
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_tensorrt_runtime_explains_when_missing() -> None:
    if _has_tensorrt():
        pytest.skip("TensorRT is installed here; the parity test covers it")
    with pytest.raises(RuntimeUnavailableError):
        create_face(FaceConfig(engine="tensorrt"))


@pytest.mark.skipif(not _has_tensorrt(), reason="TensorRT 10 and a CUDA GPU are not available")
def test_tensorrt_fp16_agrees_with_onnxruntime(ort_face: FaceRuntime,
                                               features: np.ndarray) -> None:
    trt_face = create_face(FaceConfig(engine="tensorrt", max_batch=4, max_seconds=10.0))
    assert np.abs(trt_face.predict(features) - ort_face.predict(features)).max() < FP16_PARITY
    batched = trt_face.predict_batch([features, features[:200]])
    assert np.abs(batched[1] - ort_face.predict(features[:200])).max() < FP16_PARITY


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_torch_cuda_graphs_agree_with_onnxruntime(ort_face: FaceRuntime,
                                                  features: np.ndarray) -> None:
    expected = ort_face.predict(features)
    for half, tol in ((False, GPU_FP32_PARITY), (True, FP16_PARITY)):
        face = create_face(FaceConfig(engine="torch", device="cuda", half=half))
        assert np.abs(face.predict(features) - expected).max() < tol
        # A cut utterance: frames whose 60 ms look-ahead stays inside the cut are unchanged.
        assert np.abs(face.predict(features[:100])[:23] - expected[:23]).max() < tol
