"""Options of semantic end-of-turn detection (`[turn]` in the server's TOML).

Defaults are the embedded offline default: Smart Turn v3.2 (the ONNX file shipped in the
`pipecat-ai` wheel), asked at every pause the endpointer reports (`[vad] pause_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.turn.errors import InvalidTurnConfigError

MODELS = ("smart-turn-v3.2", "none")
RUNTIMES = ("onnxruntime", "torch")


@dataclass(frozen=True)
class TurnConfig:
    model: str = "smart-turn-v3.2"  # "smart-turn-v3.2" or "none" (fixed hangover, [vad])
    model_path: str | None = None  # another Smart Turn v3 ONNX file; None = pipecat's bundled
    threshold: float = 0.5  # complete at the pause when the model's probability is above this
    text_check: bool = True  # ... and the pause's transcript ends a sentence (policy.py) ...
    sentence_end_threshold: float = 0.85  # ... with at least this ASR probability for its . ? !
    # Short of those, the silence makes up for the confidence: a final mark
    # `sentence_end_span` below its threshold (or Smart Turn at 0) asks for this much more
    # silence, less short proportionally less; 0 = it never does (max_silence_ms ends it)
    patience_ms: int = 1000
    sentence_end_span: float = 0.15
    check_ahead: bool = True  # ask the model with the early pause decode ([vad] decode_ahead_ms)
    # When Smart Turn was the unsure part of a pause's verdict (at or below `threshold`), ask
    # it once more for this much more silence (at once, the missing silence made up:
    # policy.py `recheck_window`) and keep the sooner of the two verdicts, not before that
    # silence (policy.py, `recheck_at_ms`); 0 = never
    recheck_ms: int = 0
    # Above 0: end the turn at the early pause decode (`[vad] decode_ahead_ms` of silence, not
    # `pause_ms`) when Smart Turn and the ASR's final mark are both at least this sure and the
    # text reads finished (policy.py, `sure_early`); 0 = never before the pause
    early_end_confidence: float = 0.0
    # The text-end probe (engines/turn/text_end.py: the chat model's reading of the pause's
    # words): where a verdict would wait for the final mark alone, a probability at least this
    # that the words are a whole message stands in for it; 0 = off. Needs the transformers
    # chat engine with the weights the probe was trained on (else a warning, and off)
    text_end_threshold: float = 0.0
    max_silence_ms: int = 1500  # "incomplete" (or no verdict yet): end after this much silence
    # Learn the speaker's pauses (speaker.py): once they were heard, a turn ends after their
    # own longest pause inside a turn (x1.5 + 250 ms), never sooner than this much silence nor
    # later than max_silence_ms, whatever the words say (a misheard question looks
    # unfinished); 0 = off (max_silence_ms for everyone)
    speaker_floor_ms: int = 700
    threads: int = 1  # onnxruntime intra-op threads per call (26 ms per call on one thread)
    # "torch": the same file's graph run in torch, its int8 rounding included
    # (engines/turn/smart_turn_torch.py), on `device` ("cpu", "cuda", "cuda:N", or "auto": a
    # GPU if torch sees one); for a GPU (on a CPU ~6x slower than onnxruntime)
    runtime: str = "onnxruntime"
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise InvalidTurnConfigError(f"unknown turn model {self.model!r}; one of {MODELS}")
        if not (0.0 < self.threshold < 1.0 and 0.0 <= self.sentence_end_threshold < 1.0):
            raise InvalidTurnConfigError("threshold in (0, 1), sentence_end_threshold in [0, 1)")
        if not 0 <= self.patience_ms <= 10_000:
            raise InvalidTurnConfigError("patience_ms must be within 0..10000")
        if not 0 <= self.recheck_ms <= 10_000:
            raise InvalidTurnConfigError("recheck_ms must be within 0..10000")
        if not (self.early_end_confidence == 0.0 or 0.5 < self.early_end_confidence < 1.0):
            raise InvalidTurnConfigError("early_end_confidence must be 0 (off) or in (0.5, 1)")
        if not 0.0 <= self.text_end_threshold < 1.0:
            raise InvalidTurnConfigError("text_end_threshold must be 0 (off) or in (0, 1)")
        if not 0.0 < self.sentence_end_span <= 1.0:
            raise InvalidTurnConfigError("sentence_end_span must be within (0, 1]")
        if not 100 <= self.max_silence_ms <= 10_000:
            raise InvalidTurnConfigError("max_silence_ms must be within 100..10000")
        if not 0 <= self.speaker_floor_ms <= self.max_silence_ms:
            raise InvalidTurnConfigError("speaker_floor_ms must be 0 (off) or within "
                                         "1..max_silence_ms")
        if self.threads < 1:
            raise InvalidTurnConfigError("threads must be >= 1")
        if self.runtime not in RUNTIMES:
            raise InvalidTurnConfigError(f"unknown turn runtime {self.runtime!r}; one of "
                                         f"{RUNTIMES}")
        if not (self.device in ("cpu", "cuda", "auto") or self.device.startswith("cuda:")):
            raise InvalidTurnConfigError(f"turn device {self.device!r}: cpu, cuda[:N] or auto")
        if self.device != "cpu" and self.runtime != "torch":
            raise InvalidTurnConfigError("[turn] device needs runtime = \"torch\" "
                                         "(onnxruntime runs Smart Turn on the CPU)")

    @property
    def enabled(self) -> bool:
        return self.model != "none"
