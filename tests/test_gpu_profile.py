"""config/gpu.toml is a valid server configuration with the documented GPU choices."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rtc_server.config import load_config
from rtc_server.engine_set import gpu_problem
from rtc_server.face_batch import enabled

PROFILE = Path(__file__).resolve().parents[1] / "config" / "gpu.toml"


def test_the_gpu_profile_loads_with_the_server_loader() -> None:
    config = load_config(PROFILE)
    assert (config.llm.engine, config.llm.device, config.llm.precision) == (
        "transformers", "cuda", "bf16")
    assert config.llm.cuda_graphs and config.llm.context_tokens == 4096
    assert config.llm.batch_streams == 4  # a worker's sessions decoded together
    assert (config.face.engine, config.face.device) == ("torch", "cuda") and enabled(config.face)
    assert config.face.batch_window_ms == 2.0 and config.face.max_batch == 64
    assert (config.asr.runtime, config.asr.device) == ("torch", "auto")
    assert config.media.render_device == "cuda"
    assert (config.turn.runtime, config.turn.device) == ("torch", "cuda")
    assert (config.tts.engine, config.tts.runtime, config.tts.device) == ("piper", "split", "cuda")


def test_without_a_gpu_the_profile_stops_before_anything_loads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No CUDA: `python -m rtc_server --config config/gpu.toml` exits 2 with one message that
    names what needs the GPU, before the calibration and before any model is loaded."""
    from rtc_server import __main__ as entry
    from rtc_server import engine_set, profile

    def no_calibration(*args: object, **kwargs: object) -> None:
        raise AssertionError("calibrated (or loaded) before the GPU check")

    monkeypatch.setattr(engine_set, "cuda_available", lambda: False)
    monkeypatch.setattr(profile, "fit", no_calibration)
    assert entry.main(["--config", str(PROFILE), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert '[llm] device = "cuda"' in err and '[face] device = "cuda"' in err
    assert '[media] render_device = "cuda"' in err and '[tts] device = "cuda"' in err
    assert "torch sees none" in err


def test_the_check_passes_with_a_gpu_or_without_gpu_keys() -> None:
    config = load_config(PROFILE)
    assert gpu_problem(config, lambda: True) is None
    assert gpu_problem(load_config(None), lambda: False) is None


def test_a_render_device_that_is_neither_cpu_nor_cuda_is_refused(tmp_path: Path) -> None:
    from rtc_server.errors import ConfigError

    bad = tmp_path / "bad.toml"
    bad.write_text('[media]\nrender_device = "gpu"\n')
    with pytest.raises((ConfigError, ValueError), match="render_device"):
        load_config(bad)


def _needs_a_gpu(path: Path, text: str, named: str) -> None:
    """The configuration `text` is named (`named`) by the check without a GPU, passes with."""
    path.write_text(text)
    problem = gpu_problem(load_config(path), lambda: False)
    assert problem is not None and named in problem
    assert gpu_problem(load_config(path), lambda: True) is None


def test_the_turn_model_on_a_gpu_is_part_of_the_check(tmp_path: Path) -> None:
    """`[turn] runtime = "torch"` on `cuda`: named by the start-up check where torch sees no
    GPU; a device without the torch runtime is refused when the file is read."""
    from rtc_server.errors import ConfigError

    _needs_a_gpu(tmp_path / "turn.toml", '[turn]\nruntime = "torch"\ndevice = "cuda"\n',
                 '[turn] device = "cuda"')
    bad = tmp_path / "bad.toml"
    bad.write_text('[turn]\ndevice = "cuda"\n')  # onnxruntime: the CPU only
    with pytest.raises((ConfigError, ValueError), match="runtime"):
        load_config(bad)


def test_piper_on_the_gpu_is_part_of_the_check(tmp_path: Path) -> None:
    """`[tts] use_cuda = true` (piper on onnxruntime's CUDA provider) is named by the start-up
    check where there is no GPU; with Kokoro (CPU only) the key is not a GPU need."""
    _needs_a_gpu(tmp_path / "tts.toml", '[tts]\nengine = "piper"\nuse_cuda = true\n',
                 "[tts] use_cuda = true")
    kokoro = tmp_path / "kokoro.toml"
    kokoro.write_text('[tts]\nengine = "kokoro"\nuse_cuda = true\n')
    assert gpu_problem(load_config(kokoro), lambda: False) is None


def test_piper_in_torch_on_the_gpu_is_part_of_the_check(tmp_path: Path) -> None:
    """`[tts] runtime = "torch"`, `device = "cuda"` is named by the start-up check where torch
    sees no GPU; a device without the torch runtime is refused when the file is read."""
    from rtc_server.errors import ConfigError

    _needs_a_gpu(tmp_path / "tts.toml",
                 '[tts]\nengine = "piper"\nruntime = "torch"\ndevice = "cuda"\n',
                 '[tts] device = "cuda"')
    bad = tmp_path / "bad.toml"
    bad.write_text('[tts]\nengine = "piper"\ndevice = "cuda"\n')
    with pytest.raises((ConfigError, ValueError), match="runtime"):
        load_config(bad)


def test_without_torch_a_gpu_key_gets_the_message_not_an_import_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rtc_server import engine_set

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert engine_set.cuda_available() is False
    problem = gpu_problem(load_config(PROFILE), engine_set.cuda_available)
    assert problem is not None and '[llm] device = "cuda"' in problem
