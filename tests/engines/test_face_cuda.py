"""The torch face runtime on CUDA: batched graph calls equal batch-1 calls, graphs captured at
start-up, capture safe while another thread uses the GPU; without a GPU, a clear error."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from engines.face import FaceConfig, create_face
from engines.face.errors import RuntimeUnavailableError
from engines.face.features import log_mel
from engines.face.torch_runtime import TorchFace, bucket

NO_CUDA = "needs a CUDA GPU (torch.cuda.is_available() is False): CUDA graphs"
# Max abs, face units: batch 64 vs batch 1 at the same precision. fp32: cuDNN picks other
# (TF32) convolution algorithms for other batch sizes, measured 1.6e-4 on the H200 (~0.01 px);
# fp16 was bitwise equal there.
SAME_GRAPH_BATCHING = 5e-4
ORT_FP32, ORT_FP16 = 1e-3, 2e-2  # against ONNX Runtime CPU (tests/engines/test_face_model.py)


def utterances(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        samples = int((0.3 + (i % 17) * 0.31) * 16000)
        t = np.arange(samples) / 16000
        pcm = 0.2 * np.sin(2 * np.pi * (2 + i % 5) * t) ** 2 * rng.standard_normal(samples)
        out.append(log_mel(pcm.astype(np.float32), 16000))
    return out


def test_buckets() -> None:
    assert bucket(1, 4) == (1, 128) and bucket(3, 129) == (4, 256) and bucket(64, 640) == (64, 640)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_a_clear_error() -> None:
    with pytest.raises(RuntimeUnavailableError, match="no CUDA GPU"):
        create_face(FaceConfig(engine="torch", device="cuda"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
@pytest.mark.parametrize(("half", "to_ort"), [(False, ORT_FP32), (True, ORT_FP16)])
def test_64_sessions_in_one_call_equal_batch_1(half: bool, to_ort: float) -> None:
    face = create_face(FaceConfig(engine="torch", device="cuda", half=half))
    assert isinstance(face, TorchFace)
    ort = create_face()
    feats = utterances(64)
    batched = face.predict_batch(feats)
    for f, got in zip(feats, batched, strict=True):
        alone = face.predict(f)
        assert got.shape == alone.shape == (len(f) // 4, 68, 2)
        assert np.abs(got - alone).max() < SAME_GRAPH_BATCHING
        assert np.abs(got - ort.predict(f)).max() < to_ort


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_warm_up_captures_the_live_buckets_while_another_thread_uses_the_gpu() -> None:
    face = TorchFace(device="cuda")
    stop = threading.Event()

    def busy() -> None:  # another engine (the LLM) syncing with the GPU meanwhile
        x = torch.randn(512, 512, device="cuda")
        while not stop.is_set():
            (x @ x).sum().item()

    other = threading.Thread(target=busy)
    other.start()
    try:
        assert face.warm_up(max_batch=64, seconds=2.56) == 7 * 2
    finally:
        stop.set()
        other.join()
    feats = utterances(3)
    for f, got in zip(feats, face.predict_batch(feats), strict=True):
        assert np.abs(got - face.predict(f)).max() < SAME_GRAPH_BATCHING
