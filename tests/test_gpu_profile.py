"""config/gpu.toml is a valid server configuration with the documented GPU choices."""

from __future__ import annotations

from pathlib import Path

from rtc_server.config import load_config
from rtc_server.face_batch import enabled

PROFILE = Path(__file__).resolve().parents[1] / "config" / "gpu.toml"


def test_the_gpu_profile_loads_with_the_server_loader() -> None:
    config = load_config(PROFILE)
    assert (config.llm.engine, config.llm.device, config.llm.precision) == (
        "transformers", "cuda", "bf16")
    assert config.llm.cuda_graphs and config.llm.context_tokens == 4096
    assert (config.face.engine, config.face.device) == ("torch", "cuda") and enabled(config.face)
    assert config.face.batch_window_ms == 2.0 and config.face.max_batch == 64
    assert config.asr.device == "auto"
