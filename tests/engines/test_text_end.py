"""The text-end probe (engines/turn/text_end.py, engines/llm/text_end.py) and its place in the
verdict (engines/turn/policy.py), with test doubles for the chat engine; its examples
(engines/turn/training/data.py). The probe on the real model: tests/engines/test_llm_local.py."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

from engines.asr.base import PauseText
from engines.llm.base import LLMWrapper
from engines.llm.text_end import SAMPLE, load_text_end
from engines.turn import TurnConfig
from engines.turn.errors import InvalidInputError, InvalidTurnConfigError, TurnModelLoadError
from engines.turn.policy import complete_after_ms, text_end_matters
from engines.turn.text_end import (
    FINGERPRINT_COLS,
    FINGERPRINT_ROWS,
    HEAD,
    PROBE_FILE,
    TextEndProbe,
    fingerprint,
    normalized,
)
from engines.turn.training.data import examples

HIDDEN = 4


def probe(weights: Sequence[float] = (1.0, 0.0, 0.0, 0.0), bias: float = 0.0) -> TextEndProbe:
    embedding = np.arange(200_000 * 2, dtype=np.float32).reshape(-1, 2)[:, :1].repeat(8, 1)
    return TextEndProbe(np.asarray(weights, np.float64), bias, np.zeros(HIDDEN),
                        np.ones(HIDDEN), fingerprint(embedding / 1e5))


class FakeEngine:
    """A chat engine's hidden-state side: a fixed state, the prompts it was asked."""

    def __init__(self, hidden: np.ndarray, rows: np.ndarray) -> None:
        self.hidden, self.rows = hidden, rows
        self.prompts: list[str] = []

    def last_hidden_state(self, prompt: str) -> Future[np.ndarray]:
        self.prompts.append(prompt)
        done: Future[np.ndarray] = Future()
        done.set_result(self.hidden)
        return done

    def embedding_rows(self, rows: Sequence[int], cols: int) -> np.ndarray:
        assert tuple(rows) == FINGERPRINT_ROWS and cols == FINGERPRINT_COLS
        return self.rows


@pytest.mark.parametrize(("text", "words"), [
    ("Explain what a mortgage is.", "Explain what a mortgage is"),
    ("  Could you tell me?  ", "Could you tell me"),
    ("I want to, um...", "I want to, um"),
    ("Well, is it?!", "Well, is it"),
    ("你好吗？", "你好吗"),
    ("", ""),
])
def test_the_probe_reads_words_without_the_closing_mark(text: str, words: str) -> None:
    assert normalized(text) == words


def test_probability_is_the_logistic_of_the_standardized_state(tmp_path: Path) -> None:
    p = probe((2.0, 0.0, -1.0, 0.0), bias=-0.5)
    assert p.probability(np.array([1.0, 5.0, 0.5, 9.0])) == pytest.approx(
        1 / (1 + math.exp(-(2.0 - 0.5 - 0.5))))
    p.save(tmp_path / "p.npz")
    again = TextEndProbe.load(tmp_path / "p.npz")
    assert again.probability(np.ones(HIDDEN)) == pytest.approx(p.probability(np.ones(HIDDEN)))
    with pytest.raises(InvalidInputError):
        p.probability(np.ones(HIDDEN + 1))
    (tmp_path / "bad.npz").write_bytes(b"not a probe")
    with pytest.raises(TurnModelLoadError):
        TextEndProbe.load(tmp_path / "bad.npz")


def test_the_shipped_probe_loads() -> None:
    shipped = TextEndProbe.load(PROBE_FILE)
    assert shipped.weights.shape == (1536,)  # Qwen2.5-1.5B's hidden size
    assert shipped.fingerprint.shape == (len(FINGERPRINT_ROWS), FINGERPRINT_COLS)


async def test_the_engine_reads_the_words_and_other_weights_get_no_probe(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    p = probe()
    p.save(tmp_path / "p.npz")
    engine = FakeEngine(np.array([3.0, 0.0, 0.0, 0.0]), p.fingerprint * 1.001)
    text_end = load_text_end(LLMWrapper(engine), tmp_path / "p.npz")  # type: ignore[arg-type]
    assert text_end is not None
    assert await text_end.probability("Explain what a mortgage is.") == pytest.approx(
        1 / (1 + math.exp(-3.0)))
    assert engine.prompts == [HEAD + "Explain what a mortgage is"]
    assert await text_end.probability(" ? ") == 0.0  # no words: nothing asked
    assert len(engine.prompts) == 1

    class Capturing(FakeEngine):
        """An engine that can capture its forward (CUDA graphs): asked once, at load."""

        def prepare_hidden_states(self, sample: str) -> Future[None]:
            self.prompts.append(sample)
            done: Future[None] = Future()
            done.set_result(None)
            return done

    capturing = Capturing(np.array([3.0, 0.0, 0.0, 0.0]), p.fingerprint)
    assert load_text_end(capturing, tmp_path / "p.npz") is not None
    assert capturing.prompts == [HEAD + SAMPLE]

    other = FakeEngine(np.zeros(HIDDEN), p.fingerprint + 0.5)  # random weights, say
    assert load_text_end(other, tmp_path / "p.npz") is None
    assert load_text_end(object(), tmp_path / "p.npz") is None  # no hidden states (llama.cpp)
    assert "not the ones the probe was trained on" in caplog.text
    assert "gives no hidden states" in caplog.text


def test_the_probe_stands_in_for_the_mark_and_with_it_outweighs_the_voice() -> None:
    config = TurnConfig(text_end_threshold=0.95)
    weak = PauseText("Explain what a mortgage is.", 0.6)
    assert complete_after_ms(0.9, weak, config, 200) == 1200  # the whole patience
    assert complete_after_ms(0.9, weak, config, 200, text_end=0.97) == 200
    assert complete_after_ms(0.9, weak, config, 200, text_end=0.5) == 1200
    # off: the probe's number changes nothing
    assert complete_after_ms(0.9, weak, TurnConfig(), 200, text_end=0.99) == 1200
    # Smart Turn unsure: the probe alone does not outweigh it ...
    slow = complete_after_ms(0.05, weak, config, 200, text_end=0.99)
    assert slow is not None and slow > 1000
    # ... the probe and a sure mark together do (Smart Turn wrong on a whole question)
    sure = PauseText("Where does the Amazon river end?", 0.99)
    assert complete_after_ms(0.02, sure, config, 200) == pytest.approx(1160)
    assert complete_after_ms(0.02, sure, config, 200, text_end=0.99) == 200
    assert complete_after_ms(0.02, sure, config, 200, text_end=0.9) == pytest.approx(1160)
    # no final mark written: a sure probe stands in for it, if the last word may end one
    unmarked = PauseText("which planet is closest to the sun", 0.0)
    assert complete_after_ms(0.93, unmarked, config, 200) is None
    assert complete_after_ms(0.93, unmarked, config, 200, text_end=0.99) == 200
    assert complete_after_ms(0.99, PauseText("I'd like to", 0.0), config, 200,
                             text_end=0.99) is None
    # sure the words are unfinished: the whole patience, whatever the mark says
    guessed = PauseText("Could you tell me?", 0.77)
    short = complete_after_ms(0.98, guessed, config, 200)
    assert short is not None and short < 800
    assert complete_after_ms(0.98, guessed, config, 200, text_end=0.01) == 1200
    # ... a bound of its own, not 1 - threshold: a looser threshold does not widen it
    loose = TurnConfig(text_end_threshold=0.9)
    assert complete_after_ms(0.98, guessed, loose, 200, text_end=0.08) == short
    assert complete_after_ms(0.98, guessed, loose, 200, text_end=0.04) == 1200
    # asked only where the verdict waits and there are words that may end
    assert text_end_matters(weak, config, 200, 1200)
    assert text_end_matters(unmarked, config, 200, None)
    assert not text_end_matters(sure, config, 200, 200)
    assert not text_end_matters(PauseText("I'd like to", 0.0), config, 200, None)
    assert not text_end_matters(weak, TurnConfig(), 200, 1200)
    with pytest.raises(InvalidTurnConfigError):
        TurnConfig(text_end_threshold=1.0)


def test_examples_are_each_utterance_whole_and_cut() -> None:
    utterances = ["Tell me a joke about cats.", "Tell me a joke.", "What is the time in Tokyo?"]
    made = examples(utterances, seed=3)
    wholes = [e.text for e in made if e.whole]
    assert wholes == ["Tell me a joke about cats", "Tell me a joke", "What is the time in Tokyo"]
    cuts = [e for e in made if not e.whole]
    assert cuts and all(not e.text.endswith((".", "?")) for e in cuts)
    for cut in cuts:  # a word-boundary prefix of its own utterance, never a whole one
        assert utterances[cut.source].startswith(cut.text + " ")
        assert cut.text not in wholes
