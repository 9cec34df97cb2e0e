"""Token ids -> the answer's text deltas: detokenized whole (a token may complete a
multi-byte character or change how the previous ones read), held while a character is half
there, cut at an end-of-turn token or a stop string."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engines.llm.stops import StopFilter


class AnswerText:
    def __init__(self, tokenizer: Any, eos: set[int], stop: Sequence[str]) -> None:
        self._tokenizer = tokenizer
        self._eos = eos
        self._stops = StopFilter(stop)
        self._ids: list[int] = []
        self._text = ""
        self.done = False  # an end-of-turn token or a stop string came: feed no more

    def feed(self, token: int) -> str:
        """The text `token` adds (maybe "")."""
        if self.done:
            return ""
        if token in self._eos:
            self.done = True
            return ""
        self._ids.append(token)
        full: str = self._tokenizer.decode(self._ids, skip_special_tokens=True)
        if full.endswith("\ufffd"):
            return ""  # half of a multi-byte character: wait for the rest
        delta, self._text = full[len(self._text):], full
        out = self._stops.feed(delta)
        if self._stops.stopped:
            self.done = True
        return out

    def flush(self) -> str:
        """What a stop-string prefix held back, at the end."""
        return self._stops.flush()
