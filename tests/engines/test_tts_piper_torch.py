"""Piper's voice run in torch (`[tts] runtime = "torch"`, engines/graph_torch.py) and split
(`runtime = "split"`: the text side on onnxruntime, the decoder in torch, engines/tts/
piper_split.py) against the same voice through onnxruntime, on the CPU: with the noise off
they compute the same function, so the same text must give the same durations and phoneme
timings and the same samples (the split's within its padding's edge). The GPU runs of them
are tests that skip here."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
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


def _snr_db(reference: PiperTTS, other: PiperTTS, text: str) -> float:
    """How far below the speech the two runtimes' difference is (same durations asserted)."""
    a = np.concatenate([s.pcm for s in reference.synthesize(text)]).astype(float)
    parts = list(other.synthesize(text))
    b = np.concatenate([s.pcm for s in parts]).astype(float)
    assert len(a) == len(b)
    assert [s.phonemes for s in reference.synthesize(text)] == [s.phonemes for s in parts]
    return float(20 * np.log10(np.sqrt(np.mean(a**2)) / max(np.sqrt(np.mean((a - b) ** 2)),
                                                                1e-9)))


def test_the_split_runtime_speaks_as_onnxruntime_does(quiet: tuple[PiperTTS, PiperTTS]
                                                      ) -> None:
    """The decoder padded to its bucket: only the chunk's last ~50 ms see zeros where the
    whole graph's convolutions had their edge (56-90 dB below the speech on the
    H200, 2026-12-03; the comparing script, bench/gpu_tts.py, is in git history at 44e67dd)."""
    reference, _ = quiet
    split = PiperTTS(noise_scale=0.0, noise_w_scale=0.0, runtime="split")
    for text in TEXTS:
        assert _snr_db(reference, split, text) > 40
    # Side by side (a worker on a GPU runs two calls at once: `device_calls`), each call
    # gives the samples it gives alone.
    alone = {text: np.concatenate([s.pcm for s in split.synthesize(text)]) for text in TEXTS}
    with ThreadPoolExecutor(max_workers=3) as pool:
        together = list(pool.map(
            lambda text: np.concatenate([s.pcm for s in split.synthesize(text)]), TEXTS * 2))
    for text, pcm in zip(TEXTS * 2, together, strict=True):
        assert np.array_equal(pcm, alone[text])


def test_the_split_pads_to_its_buckets_and_refuses_other_graphs(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    from engines.tts.piper_split import BUCKETS, PiperSplitSession

    split = PiperTTS(runtime="split")._voice.session  # noqa: SLF001 - its session
    assert isinstance(split, PiperSplitSession) and split.captured == []  # no GPU here
    assert not split.on_gpu and PiperTTS(runtime="split").device_calls == 0  # CPU work
    assert [split.bucket(n) for n in (1, 64, 65, 1024, 1500)] == [64, 64, 128, 1024, 1500]
    assert split.buckets == BUCKETS
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["input"], ["output"], name="/r")],
                              "g", [x], [y])
    with pytest.raises(ValueError, match="piper"):
        PiperSplitSession(helper.make_model(graph), "cpu", lambda part: None)
    path = tmp_path / "voice.onnx"
    onnx.save(helper.make_model(graph), str(path))
    (tmp_path / "voice.onnx.json").write_text("{}")
    with pytest.raises(ModelLoadError):
        PiperTTS(path, runtime="split")


def test_the_split_decoder_can_be_captured() -> None:
    """What a CUDA graph needs of the decoder side, checked on torch's "meta" device (shapes,
    no values): it runs at a bucket's length with no value read back from the device and no
    host value moved to it (either would break a capture on the GPU, where this VM has none)."""
    from onnx import shape_inference
    from onnx.utils import Extractor

    from engines.graph_torch import TorchGraph
    from engines.tts.piper_split import _crossing
    from engines.tts.piper_tts import _alignment_model, default_voice_paths

    model = shape_inference.infer_shapes(_alignment_model(default_voice_paths()[0]))
    crossing = _crossing(model)
    decoder = TorchGraph(Extractor(model).extract_model(crossing, [model.graph.output[0].name]),
                         "meta", cuda_graph=False)
    values = dict(decoder._constants)  # noqa: SLF001 - its own stepping, on "meta"
    values[crossing[0]] = torch.zeros(1, 192, 64, device="meta")
    values[crossing[1]] = torch.zeros(1, 1, 64, device="meta")
    with torch.inference_mode():
        for step in decoder._nodes:  # noqa: SLF001
            decoder._execute(step, values)  # noqa: SLF001
    assert tuple(values[decoder.outputs[0]].shape) == (1, 1, 1, 64 * 256)
    assert decoder.moves == 0


def test_with_noise_the_torch_runtime_still_speaks_the_text(
        quiet: tuple[PiperTTS, PiperTTS]) -> None:
    """The voice's own noise (RandomNormalLike in the graph, torch's generator, seeded here so
    the verdict is the same on every run): another take each call, of about the length of
    onnxruntime's noiseless one."""
    port = PiperTTS(runtime="torch")
    takes = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        takes.append(np.concatenate([s.pcm for s in port.synthesize(TEXTS[2])]))
    assert not np.array_equal(takes[0], takes[1])
    reference = np.concatenate([s.pcm for s in quiet[0].synthesize(TEXTS[2])])
    for take in takes:
        assert 0.8 < len(take) / len(reference) < 1.25
        assert np.abs(take).max() > 1000  # speech, not silence


def test_the_config_picks_the_runtime_and_refuses_mixtures() -> None:
    tts = create_tts(TTSConfig(engine="piper", runtime="torch"))
    assert isinstance(tts, PiperTTS)
    assert TTSConfig(runtime="split", device="cuda").device == "cuda"
    for bad in ({"runtime": "tensorflow"}, {"device": "gpu"}, {"device": "cuda"},
                {"runtime": "torch", "use_cuda": True}, {"runtime": "split", "use_cuda": True}):
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
    convolutions round otherwise; passed on the H200 box; skipped without a GPU)."""
    reference, _ = quiet
    on_gpu = PiperTTS(noise_scale=0.0, noise_w_scale=0.0, runtime="torch", device="cuda")
    for text in TEXTS:
        assert _agree(reference, on_gpu, text) > 0.99


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_split_decoder_is_captured_and_speaks_as_the_cpu(
        quiet: tuple[PiperTTS, PiperTTS]) -> None:
    """Every bucket captured (not the eager fallback), the speech as onnxruntime's within the
    padding's edge and cuDNN's TF32 rounding (passed on the H200 box:
    39-59 dB below the speech; skipped without a GPU)."""
    from engines.tts.piper_split import BUCKETS

    reference, _ = quiet
    on_gpu = PiperTTS(noise_scale=0.0, noise_w_scale=0.0, runtime="split", device="cuda")
    assert on_gpu._voice.session.captured == list(BUCKETS)  # noqa: SLF001
    assert on_gpu.device_calls == 2  # one call's text side beside another's replay
    for text in TEXTS:
        assert _snr_db(reference, on_gpu, text) > 30
