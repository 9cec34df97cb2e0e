"""Piper's voice run in torch (`[tts] runtime = "torch"`, engines/graph_torch.py) against the
same voice through onnxruntime, on the CPU: with the noise off both runtimes compute the same
function, so the same text must give the same samples (within float rounding) and the same
phoneme timings. The GPU run of it is a test that skips here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engines.tts import TTSConfig, create_tts
from engines.tts.errors import InvalidInputError, ModelLoadError
from engines.tts.piper_tts import PiperTTS

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

TEXTS = ("Sure.", "I'm doing well, thank you!",
         "The capital of France is Paris, which sits on the Seine.")


@pytest.fixture(scope="module")
def quiet() -> tuple[PiperTTS, PiperTTS]:
    return (PiperTTS(noise_scale=0.0, noise_w_scale=0.0),
            PiperTTS(noise_scale=0.0, noise_w_scale=0.0, runtime="torch"))


def _agree(reference: PiperTTS, other: PiperTTS, text: str) -> float:
    """The correlation of the two runtimes' samples for `text` (lengths and timings equal)."""
    a, b = list(reference.synthesize(text)), list(other.synthesize(text))
    assert len(a) == len(b) >= 1
    worst = 1.0
    for x, y in zip(a, b, strict=True):
        assert len(x.pcm) == len(y.pcm)  # the same durations, to the sample
        assert x.phonemes == y.phonemes
        worst = min(worst, float(np.corrcoef(x.pcm.astype(float), y.pcm.astype(float))[0, 1]))
    return worst


def test_the_torch_runtime_speaks_as_onnxruntime_does(quiet: tuple[PiperTTS, PiperTTS]
                                                      ) -> None:
    reference, port = quiet
    for text in TEXTS:
        assert _agree(reference, port, text) > 0.9999  # measured: > 0.999999


def test_with_noise_the_torch_runtime_still_speaks_the_text() -> None:
    """The voice's own noise (RandomNormalLike in the graph): another take each call, of
    about the same length as onnxruntime's."""
    port = PiperTTS(runtime="torch")
    takes = [np.concatenate([s.pcm for s in port.synthesize(TEXTS[2])]) for _ in range(2)]
    assert not np.array_equal(takes[0], takes[1])
    reference = np.concatenate([s.pcm for s in PiperTTS().synthesize(TEXTS[2])])
    for take in takes:
        assert 0.8 < len(take) / len(reference) < 1.25
        assert np.abs(take).max() > 1000  # speech, not silence


def test_the_config_picks_the_runtime_and_refuses_mixtures() -> None:
    tts = create_tts(TTSConfig(engine="piper", runtime="torch"))
    assert isinstance(tts, PiperTTS)
    for bad in ({"runtime": "tensorflow"}, {"device": "gpu"}, {"device": "cuda"},
                {"runtime": "torch", "use_cuda": True}):
        with pytest.raises(InvalidInputError):
            TTSConfig(**bad)
    assert list(tts.synthesize("   ")) == []  # no speech, no call
    with pytest.raises(InvalidInputError):
        list(tts.synthesize(None))  # type: ignore[arg-type]


def test_a_corrupt_voice_file_is_a_load_error(tmp_path: Path) -> None:
    model = tmp_path / "voice.onnx"
    model.write_bytes(b"not an onnx file")
    (tmp_path / "voice.onnx.json").write_text("{}")
    with pytest.raises(ModelLoadError):
        PiperTTS(model, runtime="torch")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_voice_is_the_cpu_s(quiet: tuple[PiperTTS, PiperTTS]) -> None:
    """The CUDA run: the same durations and nearly the same samples (cuDNN's TF32
    convolutions round otherwise; not run on this CPU-only VM)."""
    reference, _ = quiet
    on_gpu = PiperTTS(noise_scale=0.0, noise_w_scale=0.0, runtime="torch", device="cuda")
    for text in TEXTS:
        assert _agree(reference, on_gpu, text) > 0.99
