"""Does the text read as a whole message? A probe on the answer LLM's own reading of it.

The third end-of-turn signal (bench/RESULTS.md, section turn): Smart Turn hears the voice,
Whisper's final mark is its guess at the punctuation, and both stay unsure after some complete
requests ("Explain what a mortgage is.") while Whisper writes confident marks after cut-off
prefixes it completes itself ("Could you tell me?"). Whether words make a whole request is a
question about the words, which the chat model already loaded for the answers reads: the probe
is a logistic regression on its last hidden state (after the final norm) at the last word of
`HEAD + normalized(text)`, trained (`python -m engines.turn.training`) on requests the same
model wrote and their word-boundary prefixes. LiveKit's turn detector fine-tunes a whole
Qwen2.5-0.5B for this; a linear probe costs one prefill of a few tokens on a model that is
there anyway, and ~6 KB. The engine side (a forward on the chat model's decode thread) is
engines/llm/text_end.py.

A probe belongs to one model's weights: the file records a fingerprint of the token embedding
(`fingerprint`), and a model that does not match it (another GGUF, the random weights of the
GPU benchmarks) gets no probe, with a warning, instead of a meaningless number.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from engines.turn.errors import InvalidInputError, TurnModelLoadError

HEAD = "<|im_start|>user\n"  # the chat format's opening of a user message (Qwen's ChatML)
FINGERPRINT_ROWS = (11, 1000, 9707, 40000, 120000)  # embedding rows the fingerprint reads
FINGERPRINT_COLS = 8
PROBE_FILE = Path(__file__).resolve().parent / "text_end_probe.npz"
_TRAILING = re.compile(r"[\s.?!,;:\u2026\u3002\uff1f\uff01\uff0c-]+$")


def normalized(text: str) -> str:
    """`text` without its closing punctuation: the probe reads words, not Whisper's guess at
    the mark (which it writes after cut-offs too)."""
    return _TRAILING.sub("", " ".join(text.split()))


def fingerprint(embedding: Any) -> np.ndarray:
    """A few values of the token-embedding matrix (`[vocab, hidden]`, torch or NumPy): enough
    to tell one set of weights from another, cheap to read on any device."""
    rows = [r for r in FINGERPRINT_ROWS if r < embedding.shape[0]]
    part = embedding[rows, :FINGERPRINT_COLS]
    if hasattr(part, "detach"):
        part = part.detach().float().cpu().numpy()
    return np.asarray(part, np.float32)


@dataclass(frozen=True)
class TextEndProbe:
    """Logistic regression on a standardized hidden state."""

    weights: np.ndarray  # [hidden]
    bias: float
    mean: np.ndarray  # [hidden]
    scale: np.ndarray  # [hidden]
    fingerprint: np.ndarray  # `fingerprint()` of the weights it was trained on

    @classmethod
    def load(cls, path: Path = PROBE_FILE) -> TextEndProbe:
        try:
            with np.load(path) as f:
                probe = cls(np.asarray(f["weights"], np.float64), float(f["bias"]),
                            np.asarray(f["mean"], np.float64), np.asarray(f["scale"], np.float64),
                            np.asarray(f["fingerprint"], np.float32))
        except (OSError, KeyError, ValueError) as exc:
            raise TurnModelLoadError(f"cannot load the text-end probe {path}: {exc}") from exc
        if not (probe.weights.shape == probe.mean.shape == probe.scale.shape
                and probe.weights.ndim == 1):
            raise TurnModelLoadError(f"text-end probe {path}: inconsistent shapes")
        return probe

    def save(self, path: Path) -> None:
        np.savez(path, weights=self.weights.astype(np.float32), bias=np.float64(self.bias),
                 mean=self.mean.astype(np.float32), scale=self.scale.astype(np.float32),
                 fingerprint=self.fingerprint)

    def matches(self, embedding_fingerprint: np.ndarray) -> bool:
        """True when the model's weights are the ones this probe was trained on (fp16 and
        quantized copies of them differ by far less than the tolerance)."""
        other = np.asarray(embedding_fingerprint, np.float32)
        return (other.shape == self.fingerprint.shape
                and bool(np.allclose(other, self.fingerprint, rtol=0.02, atol=2e-3)))

    def probability(self, hidden: np.ndarray) -> float:
        """P(the message is whole) from the last hidden state."""
        h = np.asarray(hidden, np.float64).reshape(-1)
        if h.shape != self.weights.shape:
            raise InvalidInputError(f"text-end probe expects a hidden state of "
                                    f"{self.weights.size} values, got {h.size}")
        x = (h - self.mean) / self.scale
        z = float(x @ self.weights) + self.bias
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0


class TextEnd(Protocol):
    """A text completeness signal for the end of turn."""

    async def probability(self, text: str) -> float:
        """P(`text` is a whole message), `text` as the ASR wrote it."""
        ...
