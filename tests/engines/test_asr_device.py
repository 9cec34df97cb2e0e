"""`[asr] device` (engines/asr/device.py): CUDA is used only after it has run the encoder;
"cuda" fails start-up naming the cause, "auto" falls back to the CPU with a warning.

The H200 case (the driver sees the GPU, CTranslate2's CUDA 12 build then cannot load cuBLAS
12) is faked; the no-GPU case is this machine's real one.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import ctranslate2
import pytest

from engines.asr.config import AsrConfig
from engines.asr.device import load_whisper
from engines.asr.errors import AsrModelLoadError, InvalidAsrConfigError
from engines.asr.whisper import WhisperModelRunner

CUBLAS = "Library libcublas.so.12 is not found or cannot be loaded"


class FakeCt2Whisper:
    n_mels = 80

    def __init__(self, device: str) -> None:
        self.device = device

    def encode(self, features: Any, to_cpu: bool = False) -> None:
        if self.device == "cuda":
            raise RuntimeError(CUBLAS)


class FakeWhisperModel:
    made: list[str] = []

    def __init__(self, path: str, *, device: str, **kwargs: Any) -> None:
        FakeWhisperModel.made.append(device)
        self.model = FakeCt2Whisper(device)


def test_unknown_device_is_a_config_error() -> None:
    with pytest.raises(InvalidAsrConfigError, match="device"):
        AsrConfig(device="gpu")


@pytest.mark.skipif(ctranslate2.get_cuda_device_count() > 0, reason="CTranslate2 sees a GPU")
def test_cuda_without_a_usable_gpu_stops_start_up() -> None:
    with pytest.raises(AsrModelLoadError, match=r"get_cuda_device_count\(\) is 0"):
        WhisperModelRunner(AsrConfig(device="cuda"))


@pytest.mark.skipif(ctranslate2.get_cuda_device_count() > 0, reason="CTranslate2 sees a GPU")
def test_auto_falls_back_to_the_cpu_and_decodes(caplog: pytest.LogCaptureFixture) -> None:
    import numpy as np

    with caplog.at_level(logging.WARNING, logger="engines.asr.device"):
        runner = WhisperModelRunner(AsrConfig(device="auto"))
    assert "decoding on the CPU" in caplog.text
    assert runner.decode(np.zeros(16000, np.int16)).seconds >= 0


def test_a_gpu_that_fails_at_the_first_product(monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    FakeWhisperModel.made = []
    with pytest.raises(AsrModelLoadError, match="libcublas.so.12"):
        load_whisper(FakeWhisperModel, Path("/m"), AsrConfig(device="cuda"))
    with caplog.at_level(logging.WARNING, logger="engines.asr.device"):
        model = load_whisper(FakeWhisperModel, Path("/m"), AsrConfig(device="auto"))
    assert model.model.device == "cpu" and FakeWhisperModel.made == ["cuda", "cuda", "cpu"]
    assert "libcublas.so.12" in caplog.text


def test_cpu_never_touches_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_cuda() -> int:
        raise AssertionError("CUDA was probed")

    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", no_cuda)
    FakeWhisperModel.made = []
    load_whisper(FakeWhisperModel, Path("/m"), AsrConfig())
    assert FakeWhisperModel.made == ["cpu"]
