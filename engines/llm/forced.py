"""Timing-equivalent decoding, for benchmarks only: written answers as the decoded tokens.

On a machine the real weights cannot reach (the GPU machine takes 64 MiB per transfer, the
bundled GGUF is 1.1 GB), the transformers engine runs the real architecture with RANDOM
weights. Its own tokens would be gibberish, so the chunker, the TTS and the face would see no
real text. With `[llm] forced_answers = "answers.json"` every decode step still runs the real
forward pass (prefill, graph replay, argmax or sampling, as without the option), but the token
emitted and fed back is the next token of a written answer: the time per token is that of the
model, the text is the written one. Tables measured this way say "random weights,
timing-equivalent decoding".

The file is a JSON list of `{"question": ..., "answer": ...}`. `ForcedAnswers.pick(question)`
chooses the answer whose question shares the most words with the user's last message (ties:
the first in the file), so an ASR transcript that differs in a word still finds its answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from engines.llm.errors import InvalidInputError

_WORD = re.compile(r"[\w']+")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


@dataclass(frozen=True)
class ForcedAnswer:
    question: str
    answer: str


class ForcedAnswers:
    """Written answers, chosen per question (module docstring)."""

    def __init__(self, answers: list[ForcedAnswer]) -> None:
        if not answers:
            raise InvalidInputError("forced answers: the list is empty")
        self.answers = answers
        self._words = [_words(a.question) for a in answers]

    @classmethod
    def load(cls, path: str | Path) -> ForcedAnswers:
        """Read the JSON file; a missing or malformed file is an `InvalidInputError`."""
        try:
            items = json.loads(Path(path).read_text(encoding="utf-8"))
            answers = [ForcedAnswer(str(i["question"]), str(i["answer"])) for i in items]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InvalidInputError(f"forced answers {path}: {exc}") from exc
        if any(not a.answer.strip() for a in answers):
            raise InvalidInputError(f"forced answers {path}: an answer is empty")
        return cls(answers)

    def pick(self, question: str) -> str:
        """The answer for `question` (the most shared words; ties: the first)."""
        words = _words(question)
        best = max(range(len(self.answers)),
                   key=lambda i: (len(words & self._words[i]), -i))
        return self.answers[best].answer
