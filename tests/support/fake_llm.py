"""Module-level fake chat engines for tests that need them in another process (spawn)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence

from engines.llm.base import ChatMessage
from engines.llm.resilience import Notice


class WordsLLM:
    """Echoes the last user message back word by word, `delay_s` per word.

    Magic questions: "boom" raises mid-answer; "die" kills the process; "notice" yields a
    Notice first.
    """

    def __init__(self, delay_s: float = 0.01) -> None:
        self.delay_s = delay_s

    def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int,
        stop: Sequence[str] = (), cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        question = messages[-1].content
        if question == "notice":
            yield Notice("Hold on. ", "holding")
        for i, word in enumerate(question.split()[:max_new_tokens]):
            if cancel is not None and cancel.is_set():
                return
            if question == "boom" or (word == "boom" and i > 0):
                raise RuntimeError("kaboom")
            if word == "die":
                os._exit(3)
            time.sleep(self.delay_s)
            yield word + " "


def words_llm(delay_s: float = 0.01) -> WordsLLM:
    return WordsLLM(delay_s)


def broken_llm() -> WordsLLM:
    raise FileNotFoundError("no such model")
