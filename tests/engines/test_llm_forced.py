"""Timing-equivalent decoding (engines/llm/forced.py): the graph decoder on a tiny random
Qwen2 (CPU, the step run eagerly) emits exactly the written tokens while running one forward
per token, and its cache then holds them (the next turn reuses them as after real decoding);
the answer is chosen by the question's words; the option is refused for other engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engines.llm.config import LLMConfig
from engines.llm.cuda_graphs import GraphDecoder, Sampling
from engines.llm.errors import InvalidInputError
from engines.llm.forced import ForcedAnswers
from tests.engines.test_llm_cuda_graphs import tiny_model


def test_forced_tokens_are_emitted_and_every_step_runs_the_model() -> None:
    model = tiny_model()
    calls = []
    model.register_forward_hook(lambda *_: calls.append(1))
    decoder = GraphDecoder(model, (64, 128))
    decoder.prepare()
    ids, written = list(range(1, 20)), [7, 7, 200, 3, 9, 42]
    calls.clear()
    assert list(decoder.decode(ids, 40, Sampling(), forced=written)) == written
    assert len(calls) == len(written)  # one prefill + one step per later token
    assert decoder.cached_ids[: len(ids) + len(written) - 1] == ids + written[:-1]
    # Sampling is overwritten too, and max_new_tokens still caps the answer.
    sampled = Sampling(temperature=1.0, top_p=0.9, seed=3)
    assert list(decoder.decode(ids, 3, sampled, forced=written)) == written[:3]
    # Without the option the same decoder decodes its own tokens again.
    own = list(decoder.decode(ids, 6, Sampling()))
    assert own != written
    with pytest.raises(InvalidInputError):
        decoder.decode(ids, 4, Sampling(), forced=[])


def test_answers_are_chosen_by_the_questions_words(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps([
        {"question": "Hello, how are you?", "answer": "I'm well, thanks!"},
        {"question": "Why is the sky blue?", "answer": "Air scatters blue light the most."},
        {"question": "How do I boil an egg?", "answer": "Ten minutes in boiling water."},
    ]))
    answers = ForcedAnswers.load(path)
    assert answers.pick("why is the sky so blue") == "Air scatters blue light the most."
    assert answers.pick("how do i boil eggs") == "Ten minutes in boiling water."
    assert answers.pick("something else entirely") == "I'm well, thanks!"  # ties: the first


@pytest.mark.parametrize("content", ["not json", '[{"question": "q"}]', "[]",
                                     '[{"question": "q", "answer": " "}]'])
def test_a_bad_answers_file_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "answers.json"
    path.write_text(content)
    with pytest.raises(InvalidInputError):
        ForcedAnswers.load(path)
    with pytest.raises(InvalidInputError):
        ForcedAnswers.load(tmp_path / "missing.json")


def test_only_the_transformers_engine_takes_forced_answers() -> None:
    with pytest.raises(InvalidInputError, match="transformers"):
        LLMConfig(forced_answers="a.json")
    assert LLMConfig(engine="transformers", forced_answers="a.json").forced_answers == "a.json"

